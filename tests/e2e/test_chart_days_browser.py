"""In Chromium: a 30-day chart has its 30 days on the axis even when every run is from today, and names today; a
table beside a chart shows all its columns, beside the chart when there is room and under it when not (issue 24,
smaller findings)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.graphs.factories import make_demo_workspace
from tests.trajectories.factories import ingest, run_item

pytestmark = pytest.mark.e2e

SIZES = [(1280, 720), (1280, 800), (1920, 1080)]  # Playwright's default window, a laptop, a desktop
INTENTS = ["refund_request_after_delivery", "cancel_order_before_shipping", "change_shipping_address", "order_status"]
INTENTS += ["report_a_damaged_item_with_photos"]
# Each daily chart as Chart.js drew it: its slots on the x axis and the names written under them.
AXES = """() => Array.from(document.querySelectorAll("canvas[data-chart]")).map((canvas) => {
  const x = window.Chart.getChart(canvas).scales.x;
  return {id: canvas.dataset.chart, slots: x.ticks.length, names: x.ticks.map((tick) => tick.label)};
})"""
# Every table in a chart's block: how much wider its columns are than the box that shows them.
TABLES = """() => Array.from(document.querySelectorAll(".chart-block table")).map((table) => {
  const box = table.closest(".table-wrap") || table;
  const chart = box.parentElement.querySelector(".chart").getBoundingClientRect();
  return {id: table.id || table.getAttribute("aria-label"), overflow: table.scrollWidth - box.clientWidth,
          besideChart: box.getBoundingClientRect().top < chart.bottom};
})"""
DRAWN = (
    "() => window.Chart !== undefined && Array.from(document.querySelectorAll('canvas[data-chart]'))"
    ".every((canvas) => window.Chart.getChart(canvas) !== undefined)"
)


@pytest.fixture
def today_only():
    """Runs all received today (five intents, some guided by the demo workspace): nothing on the 29 days before."""
    make_demo_workspace()
    items = [run_item(intent=intent, outcome="success") for intent in INTENTS for _ in range(2)]
    items += [run_item(intent=INTENTS[0], outcome="failure", graph_workspace="two-hop-qa") for _ in range(3)]
    ingest(*items)


def today_label() -> str:
    today = timezone.localdate()
    return f"{today:%b} {today.day}"


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_thirty_day_charts_keep_their_thirty_days_and_name_today(page_as, viewer, today_only, size):
    page = page_as(viewer)
    page.set_viewport_size({"width": size[0], "height": size[1]})
    for path, expected in (("/", 3), ("/graphs/two-hop-qa/", 1)):
        page.goto(path)
        page.wait_for_function(DRAWN, timeout=15_000)
        axes = page.evaluate(AXES)
        assert len(axes) == expected
        for axis in axes:
            assert axis["slots"] == 30, axis  # days without runs included
            assert axis["names"][-1] == today_label(), axis  # the one day with runs is named
            assert sum(1 for name in axis["names"] if name) >= 6, axis  # and the axis reads as 30 days
        rows = page.locator(".chart-block table tbody").first.locator("tr")
        assert rows.count() == 30


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_tables_beside_charts_show_all_their_columns(page_as, viewer, today_only, size):
    page = page_as(viewer)
    page.set_viewport_size({"width": size[0], "height": size[1]})
    for path in ("/", "/graphs/two-hop-qa/"):
        page.goto(path)
        page.wait_for_function(DRAWN, timeout=15_000)
        tables = page.evaluate(TABLES)
        assert tables
        cut = [table for table in tables if table["overflow"] > 0]
        assert not cut, f"{path}: tables losing columns: {cut}"
    # The narrow tables stay beside their charts; the five intents' table goes under its chart.
    found = {table["id"]: table["besideChart"] for table in page.evaluate(TABLES)}
    assert found.get("workspace-trends-table") is True
    page.goto("/")
    page.wait_for_function(DRAWN, timeout=15_000)
    found = {table["id"]: table["besideChart"] for table in page.evaluate(TABLES)}
    assert found["outcome-table"] is True and found["usage-table"] is True
