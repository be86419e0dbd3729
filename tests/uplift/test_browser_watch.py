"""In Debian's Chromium: the watch page of a running canary after a few looks draws both charts and lists the looks;
an operator changes the share through the form and sees it on the page, and stops the canary after confirming
(data-confirm), the page then showing the watch stopped and the version it replaced back; a read-only user sees no
form; after the watch rolls a worse canary back, the review queue's card links to the watch page; and the watch page
has no serious or critical accessibility violation (axe-core, as tests/e2e/test_accessibility.py checks every page).
"""

from __future__ import annotations

import re

import pytest
from django.db import transaction
from playwright.sync_api import expect

from accounts.services import Actor
from procedures import active_body
from procedures.mining import intent_key
from procedures.models import Procedure, VersionStatus
from procedures.promotable import KIND
from reviews import registry
from tests.e2e import conftest as e2e
from tests.helpers.browser import accessibility_violations, report
from tests.helpers.watch import look, runs
from tests.procedures.factories import REFUND, stored_version
from uplift import watch_services
from uplift.models import Watch

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings(e2e.PLUGIN_DEPRECATION)]

browser_type_launch_args = e2e.browser_type_launch_args
page_as = e2e.page_as

CHARTS = ("watch-arms-chart", "watch-bound-chart")
# Each canvas: drawn by Chart.js (a chart bound to it) and its size on the page.
DRAWN = """(ids) => ids.map((id) => {
  const canvas = document.querySelector(`canvas[data-chart="${id}"]`);
  const chart = canvas && window.Chart !== undefined ? window.Chart.getChart(canvas) : undefined;
  return {id, drawn: chart !== undefined, width: canvas ? canvas.clientWidth : 0,
          height: canvas ? canvas.clientHeight : 0, points: chart ? chart.data.labels.length : 0};
})"""
ALL_DRAWN = (
    "(ids) => window.Chart !== undefined && ids.every((id) => "
    'window.Chart.getChart(document.querySelector(`canvas[data-chart="${id}"]`)) !== undefined)'
)


@pytest.fixture
def canary(settings):
    """refund v1 active, v2 a canary for half of the runs, watched (its first look, at the start, counts nothing)."""
    settings.WAYMARK_WATCH_MIN_RUNS = 20
    procedure = Procedure.objects.create(intent=intent_key(REFUND), title="refund")
    v1 = stored_version(procedure, "lookup_policy", "issue_refund", number=1, status=VersionStatus.ACTIVE)
    Procedure.objects.filter(pk=procedure.pk).update(active_version=v1)
    v2 = stored_version(procedure, "check_account", "lookup_policy", "issue_refund", number=2)
    system = Actor.system()
    with transaction.atomic():
        registry.get_kind(KIND).start_canary(
            actor=system, candidate_id=str(v2.pk), expected_active_id=str(v1.pk), share=0.5
        )
        watch = watch_services.watch_start(
            actor=system, kind=KIND, parent_key=str(procedure.pk), candidate_id=str(v2.pk), control_id=str(v1.pk),
            mode="canary", share=0.5, request_id=None,
        )  # fmt: skip
    active_body.recent.clear()
    return procedure, v1, v2, watch


@pytest.fixture
def watched(canary):
    """The canary after two more looks, neither deciding (too few runs, then alike arms)."""
    procedure, v1, v2, watch = canary
    for n in (10, 20):
        runs(v1, n, success_rate=0.9)
        runs(v2, n, success_rate=0.9)
        assert look(watch).status == Watch.Status.RUNNING
    watch.refresh_from_db()
    assert len(watch.history) >= 2
    return procedure, v1, v2, watch


def opened(page_as, user, path):
    errors = []
    page = page_as(user, path)
    page.on("pageerror", lambda error: errors.append(error))
    return page, errors


def charts_drawn(page) -> list[dict]:
    page.wait_for_function(ALL_DRAWN, arg=list(CHARTS), timeout=10_000)
    return page.evaluate(DRAWN, list(CHARTS))


def test_the_watch_page_draws_both_charts_and_lists_the_looks(page_as, watched, viewer):
    _, _, _, watch = watched
    page, errors = opened(page_as, viewer, f"/certification/watches/{watch.pk}/")
    expect(page.get_by_role("heading", name=re.compile(rf"^Watch #{watch.pk}:"))).to_be_visible()
    expect(page.locator("[data-watch-decision]")).to_contain_text("Watching: no decision yet")
    for chart in charts_drawn(page):
        assert chart["drawn"] and chart["width"] > 100 and chart["height"] > 100, chart
        assert chart["points"] == len(watch.history), chart
    history = page.locator("table.watch-history tbody tr")
    expect(history).to_have_count(len(watch.history))
    expect(history.first.locator("td").nth(1)).to_have_text("30")  # newest first: 30 canary runs counted
    expect(page.locator("table.watch-arms")).to_contain_text("canary")
    assert not errors


def test_an_operator_changes_the_share_through_the_form(page_as, watched, operator):
    procedure, _, _, watch = watched
    page, errors = opened(page_as, operator, f"/certification/watches/{watch.pk}/")
    expect(page.locator(".lede")).to_contain_text("serves 50% of runs")
    page.get_by_label("Canary share (%)").fill("25")
    page.get_by_role("button", name="Change").click()
    expect(page.locator(".msg-success")).to_contain_text("The watch's settings are changed.")
    expect(page.locator(".lede")).to_contain_text("serves 25% of runs")
    expect(page.get_by_label("Canary share (%)")).to_have_attribute("placeholder", "25")
    assert Watch.objects.get(pk=watch.pk).share == 0.25
    assert Procedure.objects.get(pk=procedure.pk).canary_share == 0.25
    assert not errors


def test_stopping_the_canary_asks_first_then_rolls_the_version_back(page_as, watched, operator):
    procedure, v1, v2, watch = watched
    page, errors = opened(page_as, operator, f"/certification/watches/{watch.pk}/")
    questions = []

    def answer(dialog, accept):
        questions.append((dialog.type, dialog.message))
        dialog.accept() if accept else dialog.dismiss()

    page.get_by_label("Why stop it? (required)").fill("customers complain")
    page.once("dialog", lambda dialog: answer(dialog, accept=False))
    page.get_by_role("button", name="Stop the canary").click()
    page.wait_for_timeout(300)
    assert questions == [("confirm", "Stop the canary now? The version it replaced goes back for every run.")]
    assert Watch.objects.get(pk=watch.pk).status == Watch.Status.RUNNING  # dismissed: nothing sent
    expect(page.get_by_role("button", name="Stop the canary")).to_be_visible()

    page.once("dialog", lambda dialog: answer(dialog, accept=True))
    page.get_by_role("button", name="Stop the canary").click()
    expect(page.locator(".msg-success")).to_contain_text("The canary is stopped: the version it replaced is back")
    expect(page.locator("h1 .badge")).to_have_text("stopped")
    decision = page.locator("[data-watch-decision]")
    expect(decision).to_contain_text("stopped: customers complain")
    expect(page.get_by_role("button", name="Stop the canary")).to_have_count(0)  # nothing left to stop or change
    expect(page.get_by_role("button", name="Change")).to_have_count(0)
    decision.get_by_role("link", name="the rollback request").click()
    expect(page).to_have_url(re.compile(r"/reviews/\d+/$"))
    expect(page.locator("h1")).to_contain_text("rollback")
    expect(page.locator("#outcome")).to_contain_text(
        f"{v1.label} became the active version again, replacing {v2.label}"
    )
    procedure.refresh_from_db()
    assert procedure.active_version_id == v1.pk and procedure.canary_control_id is None
    assert len(questions) == 2 and not errors


def test_a_read_only_user_sees_the_watch_without_its_forms(page_as, watched, viewer):
    _, _, _, watch = watched
    page, errors = opened(page_as, viewer, f"/certification/watches/{watch.pk}/")
    charts_drawn(page)
    expect(page.locator("table.watch-history")).to_be_visible()
    expect(page.locator("main form[method=post]")).to_have_count(0)
    expect(page.get_by_label("Canary share (%)")).to_have_count(0)
    expect(page.get_by_role("button", name="Stop the canary")).to_have_count(0)
    assert not errors


def test_the_queue_card_of_a_rollback_by_the_watch_leads_to_the_watch(page_as, canary, viewer):
    procedure, v1, v2, watch = canary
    runs(v1, 200, success_rate=0.9)
    runs(v2, 200, success_rate=0.5)
    assert look(watch).status == Watch.Status.ROLLED_BACK
    page, errors = opened(page_as, viewer, "/reviews/")
    card = page.locator("#watch-alerts [data-watch-alert=rolled_back]")
    expect(card).to_contain_text("Rolled back by the watch")
    card.get_by_role("link", name="the watch").click()
    expect(page).to_have_url(re.compile(rf"/certification/watches/{watch.pk}/$"))
    expect(page.get_by_role("heading", name=re.compile(rf"^Watch #{watch.pk}:"))).to_contain_text("rolled back")
    expect(page.locator("[data-watch-decision]")).to_contain_text("worse in success")
    charts_drawn(page)
    procedure.refresh_from_db()
    assert procedure.active_version_id == v1.pk
    assert not errors


def test_the_watch_page_has_no_serious_accessibility_violation(
    browser, browser_context_args, live_server, watched, operator
):
    _, _, _, watch = watched
    found = accessibility_violations(
        browser, browser_context_args, live_server, operator, f"/certification/watches/{watch.pk}/"
    )  # as an operator: the forms too
    assert not found, "serious or critical accessibility violations (axe-core):\n" + report({"watch": found})
