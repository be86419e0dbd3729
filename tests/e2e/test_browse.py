"""In the browser: log in through the form, see the dashboard, follow a run to its step timeline."""

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from accounts.demo import DEMO_PASSWORD
from trajectories.models import Run

pytestmark = pytest.mark.e2e

RUN_LINK = re.compile(r"/trajectories/(\d+)/$")


@pytest.fixture
def demo(live_server, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    return live_server


def test_a_reviewer_logs_in_and_opens_a_runs_step_timeline(demo, page):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(error))
    page.goto(demo.url + "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))

    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()

    expect(page.get_by_role("heading", name="Dashboard", level=1)).to_be_visible()
    expect(page.locator(".card").filter(has_text="Runs").first).to_contain_text(str(Run.objects.production().count()))

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Trajectories").click()
    expect(page.get_by_role("heading", name="Trajectories", level=1)).to_be_visible()

    hrefs = page.locator("main a").evaluate_all("links => links.map(link => link.pathname)")
    first_run = next(href for href in hrefs if RUN_LINK.search(href))
    page.locator(f'main a[href="{first_run}"]').first.click()

    run = Run.objects.get(pk=int(RUN_LINK.search(first_run).group(1)))
    steps = list(run.steps.order_by("ordinal"))
    assert steps, "the demo runs have steps"
    timeline = page.locator(".timeline")
    expect(timeline).to_be_visible()
    expect(timeline.locator(":scope > li")).to_have_count(len(steps))
    for step in steps:
        expect(timeline).to_contain_text(step.tool)
    assert not script_errors


def test_the_audit_link_is_shown_to_admins_only(page_as, admin_user, viewer):
    nav = page_as(admin_user).get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Audit")).to_be_visible()

    nav = page_as(viewer).get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Trajectories")).to_be_visible()
    expect(nav.get_by_role("link", name="Audit")).to_have_count(0)


def test_the_logged_in_page_fixture_lands_on_the_dashboard(logged_in_page, operator):
    expect(logged_in_page.get_by_role("heading", name="Dashboard", level=1)).to_be_visible()
    expect(logged_in_page.locator(".who")).to_contain_text(operator.username)
