"""The shell in the browser: usable on a phone-sized screen and from the keyboard."""

import pytest
from playwright.sync_api import expect

from tests.trajectories.factories import ingest, run_item

pytestmark = pytest.mark.e2e

PAGES = [
    "/",
    "/trajectories/",
    "/trajectories/{run}/",
    "/graphs/",
    "/procedures/",
    "/reviews/",
    "/models/",
    "/accounts/settings/",
    "/accounts/audit/",
]


def test_pages_fit_a_narrow_screen_without_sideways_scrolling(page_as, admin_user):
    task = "A customer asks for a refund on an order that arrived damaged " * 3
    stored = ingest(*(run_item(task=task) for _ in range(6)))
    page = page_as(admin_user)
    page.set_viewport_size({"width": 380, "height": 800})

    too_wide = {}
    for path in PAGES:
        page.goto(path.format(run=stored.created_ids[0]))
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 0:
            too_wide[path] = overflow
    assert not too_wide, f"pages wider than a 380px screen (px too wide): {too_wide}"
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Audit")).to_be_visible()


def test_the_first_tab_reaches_a_skip_link_to_the_content(logged_in_page):
    logged_in_page.keyboard.press("Tab")
    skip = logged_in_page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()

    logged_in_page.keyboard.press("Enter")
    expect(logged_in_page.locator("main#main")).to_be_focused()
