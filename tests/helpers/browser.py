"""Accessibility in the browser: axe-core's serious and critical violations on a page (`blocking_violations`), on a
path as a user in its own context (`accessibility_violations`), and their report (`report`); as
tests/e2e/test_accessibility.py checks every page."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.test import Client
from playwright.sync_api import Page

AXE = Path(__file__).resolve().parent.parent / "e2e" / "vendor" / "axe-core" / "axe.min.js"

# axe.run in the page: the serious and critical violations, each with its nodes' targets (CSS selectors).
RUN_AXE = """async () => {
  const results = await axe.run(document, {resultTypes: ["violations"]});
  const blocking = ["serious", "critical"];
  return results.violations.filter((v) => blocking.includes(v.impact)).map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    targets: v.nodes.filter((n) => blocking.includes(n.impact)).map((n) => JSON.stringify(n.target)),
  }));
}"""
# Mermaid draws after load (deferred script, asynchronous rendering): check the drawings, not their source text.
DRAWN = "() => Array.from(document.querySelectorAll('pre.mermaid')).every((pre) => pre.querySelector('svg'))"


def blocking_violations(page: Page) -> list[dict]:
    page.wait_for_function(DRAWN, timeout=15_000)
    page.add_script_tag(path=str(AXE))
    return page.evaluate(RUN_AXE)


def report(found: dict[str, list[dict]]) -> str:
    lines = []
    for where, violations in found.items():
        for violation in violations:
            lines.append(f"{where}: {violation['id']} ({violation['impact']}) {violation['help']}")
            lines.extend(f"    {target}" for target in violation["targets"])
    return "\n".join(lines)


def accessibility_violations(browser, browser_context_args, live_server, user, path) -> list[dict]:
    """axe-core's serious and critical violations on `path` as `user` (its own context, CSP bypassed so the axe script
    can be injected: tests/e2e/test_accessibility.py)."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(**{**browser_context_args, "base_url": live_server.url, "bypass_csp": True})
    try:
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}])
        page = context.new_page()
        assert page.goto(path).status == 200
        page.wait_for_function("() => window.Chart !== undefined", timeout=10_000)
        return blocking_violations(page)
    finally:
        context.close()
