"""The dashboard's charts: runs per day by outcome, success rate per intent, tokens and cost per day, over the last
30 days of production runs, each with its table, in a fixed number of queries."""

import datetime as dt
import json
import re

import pytest
from django.utils import timezone

from common import charts
from tests.conftest import logged_in
from tests.trajectories.factories import ingest, run_item, step_item
from trajectories import rollup
from trajectories.models import EVALUATION_SOURCE, Run

DASHBOARD = "/"
# Every factory step: 10 input + 2 cached + 5 output tokens, 0.001 USD.
STEP_TOKENS, STEP_COST = 17, 0.001


def today() -> dt.date:
    return timezone.localdate()


def received(ids, days_ago: int, hour: int = 12) -> None:
    """Move runs to `hour` o'clock (local time) `days_ago` days before today (test set-up only)."""
    moment = timezone.make_aware(dt.datetime.combine(today() - dt.timedelta(days=days_ago), dt.time(hour)))
    Run.objects.filter(pk__in=list(ids)).update(created_at=moment)
    rollup.rebuild()  # written behind ingest's back: the daily totals follow


def runs(days_ago: int, *, outcome: str = "success", intent: str = "refund_request", count: int = 1, **extra):
    ids = ingest(*[run_item(outcome=outcome, intent=intent, **extra) for _ in range(count)]).created_ids
    received(ids, days_ago)
    return ids


def island(response, name: str) -> dict:
    match = re.search(rf'<script id="{name}" type="application/json">(.*?)</script>', response.content.decode(), re.S)
    assert match, f"no JSON island {name}"
    return json.loads(match.group(1))


def table_rows(response, table_id: str) -> list[list[str]]:
    html = response.content.decode()
    body = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)
    assert body, f"no table {table_id}"
    rows = re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows
    ]


def day(days_ago: int) -> str:
    return (today() - dt.timedelta(days=days_ago)).isoformat()


def label(days_ago: int) -> str:
    """How a chart's axis names the day (the tables use ISO dates)."""
    moment = today() - dt.timedelta(days=days_ago)
    return f"{moment:%b} {moment.day}"


def test_runs_per_day_by_outcome_fill_the_window_with_zeros(operator):
    runs(0, count=2)
    runs(0, outcome="failure")
    runs(3, outcome="unknown")
    runs(29, count=3)
    runs(30, count=5)  # one day too old: outside the window

    response = logged_in(operator).get(DASHBOARD)

    spec = island(response, "outcome-chart-data")
    assert spec["labels"] == [label(offset) for offset in range(29, -1, -1)]
    assert (spec["kind"], spec["stacked"], spec["y_range"]) == ("bar", True, [0, None])
    data = {item["label"]: item["data"] for item in spec["series"]}
    assert set(data) == {"success", "failure", "unknown"}
    assert data["success"][-1] == 2 and data["failure"][-1] == 1 and data["unknown"][-1] == 0
    assert data["unknown"][-4] == 1
    assert data["success"][0] == 3
    assert sum(sum(values) for values in data.values()) == 2 + 1 + 1 + 3
    rows = table_rows(response, "outcome-table")  # newest first
    assert len(rows) == 30
    assert rows[0] == [day(0), "2", "1", "0", "3"]
    assert rows[-1] == [day(29), "3", "0", "0", "3"]
    assert rows[1] == [day(1), "0", "0", "0", "0"]
    assert rows[3] == [day(3), "0", "0", "1", "1"]


def test_tokens_and_cost_per_day_on_two_axes(operator):
    runs(0, count=2)  # two steps each
    runs(1, steps=[step_item("lookup_policy")])

    response = logged_in(operator).get(DASHBOARD)

    spec = island(response, "usage-chart-data")
    tokens, cost = spec["series"]
    assert tokens["label"] == "tokens" and tokens["data"][-2:] == [STEP_TOKENS, 4 * STEP_TOKENS]
    assert (cost["kind"], cost["axis"]) == ("line", "y2")
    assert cost["data"][-2:] == [pytest.approx(STEP_COST), pytest.approx(4 * STEP_COST)]
    assert spec["y2_title"] == "cost (USD)"
    assert sum(tokens["data"][:-2]) == 0
    rows = table_rows(response, "usage-table")
    assert rows[0] == [day(0), "2", str(4 * STEP_TOKENS), "0.0040"]
    assert rows[1] == [day(1), "1", str(STEP_TOKENS), "0.0010"]


def test_success_rate_per_intent_for_the_five_intents_with_most_runs(operator):
    runs(0, intent="refund_request", count=3)
    runs(0, intent="refund_request", outcome="failure")
    runs(2, intent="refund_request", outcome="failure")
    for rank, intent in enumerate(["cancel_order", "change_address", "order_status", "damaged_item"]):
        runs(1, intent=intent, count=4 - rank)
    runs(1, intent="rare_intent")  # sixth by volume: left out
    runs(1, intent="", count=9)  # no intent: not charted

    response = logged_in(operator).get(DASHBOARD)

    spec = island(response, "intent-chart-data")
    assert [item["label"] for item in spec["series"]] == [
        "refund_request",
        "cancel_order",
        "change_address",
        "order_status",
        "damaged_item",
    ]
    assert spec["y_range"] == [0, 1]
    refunds = spec["series"][0]["data"]
    assert len(refunds) == 30
    assert refunds[-1] == 0.75 and refunds[-3] == 0.0 and refunds[-2] is None
    assert spec["series"][1]["data"][-2] == 1.0
    rows = table_rows(response, "intent-table")
    assert rows[0][0] == day(0) and rows[0][1] == "0.75 (3/4)" and rows[0][2] == "–"
    assert rows[2][1] == "0.00 (0/1)"
    assert rows[1][1] == "–" and rows[1][2] == "1.00 (4/4)"
    assert "rare_intent" not in response.content.decode()


def test_evaluation_runs_are_left_out_and_counted_apart(operator):
    runs(0, count=2)
    runs(0, count=3, source=EVALUATION_SOURCE, outcome="failure")

    response = logged_in(operator).get(DASHBOARD)

    counts = {stat.label: stat.value for stat in response.context["counts"]}
    assert (counts["Runs"], counts["Failed runs"]) == (2, 0)
    data = {item["label"]: item["data"] for item in island(response, "outcome-chart-data")["series"]}
    assert (data["success"][-1], data["failure"][-1]) == (2, 0)
    assert island(response, "usage-chart-data")["series"][0]["data"][-1] == 2 * 2 * STEP_TOKENS
    assert all(run.source != EVALUATION_SOURCE for run in response.context["recent_runs"])
    note = re.search(r'<p class="muted" id="evaluation-note">(.*?)</p>', response.content.decode(), re.S).group(1)
    assert "3 evaluation runs not counted" in note
    assert 'href="/trajectories/?kind=evaluation"' in note


def test_no_run_in_the_window_gives_a_sentence_and_no_canvas(operator):
    runs(45, count=2)

    response = logged_in(operator).get(DASHBOARD)

    html = response.content.decode()
    assert "No production run was received in the last 30 days" in html
    assert "<canvas" not in html
    assert "outcome-chart-data" not in html


def test_runs_without_an_intent_chart_outcomes_but_say_so_for_intents(operator):
    runs(0, intent="")

    html = logged_in(operator).get(DASHBOARD).content.decode()

    assert 'data-chart="outcome-chart-data"' in html
    assert 'data-chart="intent-chart-data"' not in html
    assert "No run in these days names an intent." in html


def test_days_are_local_days_of_the_configured_time_zone(operator, settings):
    settings.TIME_ZONE = "Asia/Tokyo"  # UTC+9, no daylight saving
    ids = ingest(run_item(), run_item()).created_ids
    local_today = timezone.localdate()
    first_hour = timezone.make_aware(dt.datetime.combine(local_today, dt.time(1)))  # yesterday 16:00 UTC
    last_hour = timezone.make_aware(dt.datetime.combine(local_today - dt.timedelta(days=1), dt.time(23)))
    Run.objects.filter(pk=ids[0]).update(created_at=first_hour)
    Run.objects.filter(pk=ids[1]).update(created_at=last_hour)
    rollup.rebuild()

    response = logged_in(operator).get(DASHBOARD)

    spec = island(response, "outcome-chart-data")
    assert spec["labels"][-1] == f"{local_today:%b} {local_today.day}"
    success = spec["series"][0]["data"]
    assert (success[-2], success[-1]) == (1, 1)


@pytest.mark.parametrize("size", [1, 12])
def test_the_charts_take_the_same_queries_whatever_the_data(operator, size, django_assert_num_queries):
    for offset in range(size):
        runs(offset % 30, intent=f"intent-{offset % 7}", count=2)
        runs(offset % 30, outcome="failure", source=EVALUATION_SOURCE)
    client = logged_in(operator)

    with django_assert_num_queries(9):  # tests/dashboard/test_dashboard.py names them (cold: the closed days too)
        response = client.get(DASHBOARD)
    with django_assert_num_queries(6):  # the closed days and the session's user and roles kept
        again = client.get(DASHBOARD)

    assert sum(island(response, "outcome-chart-data")["series"][0]["data"]) == 2 * size
    assert island(again, "outcome-chart-data") == island(response, "outcome-chart-data")


def test_the_window_helpers_refuse_nonsense_and_leave_gaps_for_rates():
    assert charts.window_days(3, today=dt.date(2026, 3, 1)) == [
        dt.date(2026, 2, 27),
        dt.date(2026, 2, 28),
        dt.date(2026, 3, 1),
    ]
    assert charts.rate(0, 0) is None and charts.rate(1, 3) == 0.3333
    with pytest.raises(ValueError, match="at least one day"):
        charts.window_days(0)
    with pytest.raises(ValueError, match="line or a bar"):
        charts.chart_spec(labels=[], series_list=[], x_title="", y_title="", kind="pie")
