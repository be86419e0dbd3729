"""In Chromium: an operator starts a 4-round two-hop run on a skeleton workspace from the page, watches it finish
(the run page polls with htmx), opens the rejected round (both graphs drawn with Mermaid, the diff), and follows
"Propose for activation" for the accepted head to the propose form.

Under the test settings Celery is eager, and the live server commits for real, so the step enqueued on commit would
run every round inside the start request. To watch the run progress instead, this test turns eager mode off for its
duration (the enqueued messages go to the in-memory broker and nobody consumes them) and runs the steps from the test
thread while the browser polls.
"""

import os
import re

import pytest
from playwright.sync_api import expect

from config.celery import app as celery_app
from graphs.models import EvolutionRound, EvolutionRun
from tests.e2e.conftest import browser_type_launch_args, page_as  # noqa: F401  (shared browser fixtures)
from tests.graphs.evolution_helpers import make_lab, run_to_end

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings(
        "ignore:Session-scoped fixtures defined as instance methods:pytest.PytestRemovedIn10Warning"
    ),
]
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"


@pytest.fixture
def steps_left_to_the_test():
    eager = celery_app.conf.task_always_eager
    assert eager, "the test settings run Celery eagerly"
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = eager


def test_an_operator_starts_a_run_watches_it_finish_inspects_the_rejection_and_proposes_the_head(
    page_as,  # noqa: F811
    operator,
    steps_left_to_the_test,
):
    make_lab()
    errors = []
    page = page_as(operator, "/graphs/lab/evolutions/")
    page.on("pageerror", lambda error: errors.append(error))

    page.get_by_label("Rounds").fill("4")
    page.locator("select[name=evaluator]").select_option("two-hop")
    page.get_by_role("radio", name=re.compile("tie-accepting")).check()
    page.get_by_role("button", name="Start the run").click()

    expect(page).to_have_url(re.compile(r"/graphs/lab/evolutions/\d+/$"))
    run = EvolutionRun.objects.get()
    status = page.locator("#run-status")
    expect(status).to_have_text("Queued")
    assert page.locator("#run-live").get_attribute("hx-trigger") == "every 2s"
    url_before = page.url

    run_to_end(run)  # the worker's part, while the page polls

    expect(status).to_have_text("Succeeded", timeout=15_000)
    expect(page.locator("#run-live")).not_to_have_attribute("hx-trigger", re.compile(".*"))  # polling stopped
    assert page.url == url_before  # no reload, no navigation
    for iteration, outcome in [(1, "accepted"), (2, "structural_failure"), (3, "rejected"), (4, "duplicate_candidate")]:
        expect(page.locator(f"#round-{iteration}")).to_contain_text(outcome)
    expect(page.locator('canvas[data-chart="rounds-chart-data"]')).to_be_visible()
    drawn = page.evaluate("() => Boolean(window.Chart && Chart.getChart(document.querySelector('canvas[data-chart]')))")
    assert drawn

    page.get_by_label("Inspect round 3").click()
    expect(page).to_have_url(re.compile(rf"/graphs/lab/evolutions/{run.pk}/rounds/3/$"))
    drawings = page.locator("figure.graph-drawing pre.mermaid svg")
    expect(drawings).to_have_count(2, timeout=15_000)
    expect(drawings.nth(0)).to_be_visible()
    expect(drawings.nth(1)).to_be_visible()
    assert drawings.nth(0).bounding_box()["width"] > 200  # a sensible width, not a tiny box
    expect(page.locator("#round-diff .diff-del").first).to_be_visible()
    expect(page.locator("h1")).to_contain_text("rejected")

    page.get_by_role("link", name=f"← Evolution run {run.pk}").click()
    head = EvolutionRound.objects.get(run=run, outcome="accepted").graph_revision
    expect(page.locator("#accepted-head")).to_contain_text(f"#{head.seq} {head.digest[:12]}")
    page.get_by_role("link", name="Propose for activation").click()
    expect(page).to_have_url(re.compile(r"/reviews/propose/\?kind=graph_revision&candidate_id=\d+$"))
    assert page.url.endswith(f"candidate_id={head.pk}")
    assert not errors
