"""In Debian's Chromium: try-guidance shows the server's 400 message in place (htmx drops 4xx answers unless the
form opts in with data-swap-errors), and the error pages keep the navigation."""

import html

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from tests.e2e import conftest as e2e
from tests.helpers.reviews import graph_workspace

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings(e2e.PLUGIN_DEPRECATION)]

browser_type_launch_args = e2e.browser_type_launch_args
page_as = e2e.page_as


def test_try_guidance_shows_the_servers_400_message(page_as, viewer):
    graph_workspace()
    client = Client()
    client.force_login(viewer)
    client.get(reverse("graphs:workspace", args=["ws"]))
    answer = client.post(
        reverse("graphs:guidance", args=["ws"]),
        {"steps": "search", "hops": 2, "mode": "raw_subgraph", "revision": "#999"},
        HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value,
    )
    assert answer.status_code == 400
    errors = []
    page = page_as(viewer, "/graphs/ws/")
    page.on("pageerror", lambda error: errors.append(error))
    guidance = page.locator("#guidance")
    guidance.get_by_label("Revision").fill("#999")
    guidance.get_by_role("button", name="Show the context").click()
    alert = page.locator("#guidance [role=alert]")
    expect(alert).to_be_visible()
    message = alert.inner_text().strip()
    assert message and message in html.unescape(answer.content.decode())
    expect(page).to_have_url(f"{page.url.split('/graphs/')[0]}/graphs/ws/")  # swapped in place, no navigation
    assert not errors


def test_a_404_page_keeps_the_navigation_in_the_browser(page_as, viewer):
    page = page_as(viewer, "/procedures/versions/987654/")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    expect(page.get_by_text("/procedures/versions/987654/")).to_be_visible()
