"""Browser tests: pytest-playwright driving Debian's Chromium against pytest-django's live server.

Reusable fixtures: `page_as(user)` gives a browser page already logged in as `user`; `logged_in_page` is one for
an operator. Every test collected here is marked `e2e`.
"""

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

# Playwright's sync API runs an event loop in this thread; Django's ORM refuses to run inside one unless told.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = Path("/usr/bin/chromium")
HERE = Path(__file__).resolve().parent
# pytest-playwright's own base_url fixture is written in a style pytest deprecates; not ours to fix.
PLUGIN_DEPRECATION = "ignore:Session-scoped fixtures defined as instance methods:pytest.PytestRemovedIn10Warning"


def pytest_collection_modifyitems(config, items):
    """Every test under tests/e2e is a browser test (marker `e2e`, select or skip them with -m)."""
    filtering = config.pluginmanager.has_plugin("warnings")
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.e2e)
            if filtering:
                item.add_marker(pytest.mark.filterwarnings(PLUGIN_DEPRECATION))


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Launch Debian's Chromium (no downloaded browsers). Missing: skipped with the reason, but a failure under CI."""
    if not CHROMIUM.exists():
        reason = f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM)}


@pytest.fixture
def page_as(live_server, browser, browser_context_args):
    """page_as(user, path="/") -> a page, in its own browser context logged in as `user`, opened at `path`."""
    contexts = []

    def open_as(user, path: str = "/"):
        client = Client()
        client.force_login(user)
        context = browser.new_context(**{**browser_context_args, "base_url": live_server.url})
        contexts.append(context)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}])
        page = context.new_page()
        page.goto(path)
        return page

    yield open_as
    for context in contexts:
        context.close()


@pytest.fixture
def logged_in_page(page_as, operator):
    """A page logged in as the operator (who may write), opened at the dashboard."""
    return page_as(operator)
