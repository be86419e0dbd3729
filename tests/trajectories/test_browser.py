"""In Chromium: an operator searches runs by a word found only in an observation, filters, exports the filtered
runs, opens the waterfall and the side-by-side view (issue 11, item 4)."""

import json
import os
import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import browser_type_launch_args, page_as  # noqa: F401  (shared browser fixtures)

from .factories import ingest, run_item, step_item

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings(
        "ignore:Session-scoped fixtures defined as instance methods:pytest.PytestRemovedIn10Warning"
    ),
]
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"


def timed(tool, start, end, **overrides):
    return step_item(
        tool, started_at=f"2026-01-05T10:00:{start:02d}Z", ended_at=f"2026-01-05T10:00:{end:02d}Z", **overrides
    )


def test_an_operator_searches_filters_exports_and_compares_runs(page_as, operator):  # noqa: F811
    ids = ingest(
        run_item(
            external_id="found-ok",
            task="Refund the red scarf",
            outcome="success",
            started_at="2026-01-05T10:00:00Z",
            ended_at="2026-01-05T10:00:30Z",
            steps=[
                timed("lookup_policy", 0, 5, observation="courier reported quokkaphone damage"),
                timed("issue_refund", 5, 30),
            ],
        ),
        run_item(
            external_id="found-failed",
            task="Refund the green scarf",
            outcome="failure",
            steps=[step_item("lookup_policy", observation="another quokkaphone case"), step_item("escalate")],
        ),
        run_item(external_id="unrelated", task="Refund quickly", steps=[step_item("issue_refund")]),
    ).created_ids
    errors = []
    page = page_as(operator, "/trajectories/")
    page.on("pageerror", lambda error: errors.append(error))
    expect(page.locator("table.runs")).to_contain_text("Refund quickly")

    page.get_by_label("Search").fill("quokkaphone")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"q=quokkaphone"))
    rows = page.locator("table.runs tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("#totals")).to_contain_text("2 matching production runs")

    page.get_by_role("combobox", name="Outcome").select_option("success")  # htmx swaps the results on change
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Refund the red scarf")
    expect(page.locator("#totals")).to_contain_text("1 matching production run")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export these runs (JSONL)").click()
    with open(download_info.value.path(), encoding="utf-8") as exported:
        lines = [json.loads(line) for line in exported]
    assert [line["external_id"] for line in lines] == ["found-ok"]
    assert lines[0]["steps"][0]["observation"] == "courier reported quokkaphone damage"

    page.get_by_role("link", name=f"#{ids[0]}").click()
    expect(page.locator("figure.waterfall svg rect.wf-bar")).to_have_count(2)
    expect(page.locator("figure.waterfall")).to_contain_text("issue_refund")

    page.get_by_label("Compare with run").fill(str(ids[1]))
    page.get_by_role("button", name="Side by side").click()
    expect(page).to_have_url(re.compile(rf"/trajectories/compare\?a={ids[0]}&b={ids[1]}"))
    table = page.locator("table.compare")
    expect(table).to_contain_text("Refund the red scarf")
    expect(table).to_contain_text("Refund the green scarf")
    expect(table.locator("tr.align-replace")).to_contain_text("escalate")
    assert not errors
