"""In Chromium: every chart on the dashboard, a version page with a replay and a workspace page is drawn by the
vendored Chart.js, and sits beside its table."""

import datetime as dt

import pytest
from django.utils import timezone

from procedures.models import Procedure
from procedures.replay.services import offline as offline_replay_services
from tests.e2e.conftest import browser_type_launch_args, page_as  # noqa: F401  (shared browser fixtures)
from tests.graphs.factories import make_demo_workspace
from tests.procedures.factories import queued_replay, refund_run, stored_version
from tests.promote import promote_procedure_version
from tests.trajectories.factories import ingest, run_item
from trajectories import rollup
from trajectories.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")]

# For each canvas: drawn by Chart.js (a chart instance bound to it, with a non-empty area) and a table in its block.
CHARTS = """() => Array.from(document.querySelectorAll("canvas[data-chart]")).map((canvas) => {
  const chart = window.Chart === undefined ? undefined : window.Chart.getChart(canvas);
  const block = canvas.closest(".chart-block");
  const table = block ? block.querySelector("table.chart-table tbody tr") : null;
  return {id: canvas.dataset.chart, drawn: chart !== undefined, width: canvas.clientWidth,
          height: canvas.clientHeight, datasets: chart ? chart.data.datasets.length : 0, table: table !== null};
})"""


def spread_runs() -> None:
    """Production runs over the last days, some guided by the demo workspace."""
    for offset, outcome in enumerate(["success", "failure", "success", "unknown"]):
        items = [run_item(outcome=outcome, graph_workspace="two-hop-qa") for _ in range(offset + 1)]
        ids = ingest(*items).created_ids
        moment = timezone.now() - dt.timedelta(days=offset)
        Run.objects.filter(pk__in=ids).update(created_at=moment)
    rollup.rebuild()  # written behind ingest's back: the daily totals follow


def replayed_candidate():
    held_out = ingest(*[refund_run() for _ in range(3)], refund_run("lookup_policy", "check", "issue_refund"))
    procedure = Procedure.objects.create(intent="refund request", title="refund_request")
    active = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
    promote_procedure_version(active)
    candidate = stored_version(procedure, "lookup_policy", "check", "issue_refund", number=2, status="candidate")
    offline_replay_services.replay_offline_run(
        replay=queued_replay(candidate, compared_with=active, held_out=held_out.created_ids)
    )
    return candidate


def charts_on(page, expected: set[str]) -> list[dict]:
    page.wait_for_function(
        "() => window.Chart !== undefined && Array.from(document.querySelectorAll('canvas[data-chart]'))"
        ".every((canvas) => window.Chart.getChart(canvas) !== undefined)",
        timeout=15_000,
    )
    found = page.evaluate(CHARTS)
    assert expected <= {item["id"] for item in found}
    return found


def test_every_chart_is_drawn_by_chartjs_beside_its_table(page_as, viewer):  # noqa: F811
    spread_runs()
    candidate = replayed_candidate()
    make_demo_workspace()
    errors = []
    pages = {
        "/": {"outcome-chart-data", "intent-chart-data", "usage-chart-data"},
        f"/procedures/versions/{candidate.pk}/": {"procedure-trends-data"},
        "/graphs/two-hop-qa/": {"workspace-trends-data"},
    }
    page = page_as(viewer)
    page.on("pageerror", lambda error: errors.append(str(error)))
    seen = {}
    for path, expected in pages.items():
        page.goto(path)
        seen[path] = charts_on(page, expected)
    replay_charts = [
        item["id"] for item in seen[f"/procedures/versions/{candidate.pk}/"] if item["id"].startswith("replay-")
    ]
    assert len(replay_charts) == 2  # shares, then steps and counts

    for path, found in seen.items():
        for item in found:
            assert item["drawn"], f"{item['id']} on {path} was not drawn"
            assert item["width"] > 100 and item["height"] > 100, f"{item['id']} on {path} is drawn too small"
            assert item["datasets"] >= 1
            assert item["table"], f"{item['id']} on {path} has no table beside it"
    assert not errors


def test_a_replay_finishing_while_the_page_is_open_brings_its_chart(page_as, viewer):  # noqa: F811
    held_out = ingest(*[refund_run() for _ in range(3)], refund_run("lookup_policy", "check", "issue_refund"))
    procedure = Procedure.objects.create(intent="refund request", title="refund_request")
    version = stored_version(procedure, "lookup_policy", "issue_refund", number=1, status="candidate")
    replay = queued_replay(version, compared_with=None, held_out=held_out.created_ids)
    page = page_as(viewer, f"/procedures/versions/{version.pk}/")
    assert page.locator("canvas[data-chart]").count() == 0
    assert page.get_by_text("No replay of this version has finished yet").is_visible()

    offline_replay_services.replay_offline_run(replay=replay)  # the section polls every 3 s and is swapped by htmx

    canvas = page.locator(f'canvas[data-chart="replay-{replay.pk}-shares"]')
    canvas.wait_for(timeout=15_000)
    found = charts_on(page, {f"replay-{replay.pk}-shares", f"replay-{replay.pk}-counts"})
    assert all(item["drawn"] and item["table"] for item in found)
    assert page.get_by_text("No replay of this version has finished yet").count() == 0
