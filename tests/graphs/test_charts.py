"""The workspace page's trend: production runs its graph guided per day of the last 30, with their success rate, a
chart with its table, one query whatever the data."""

import datetime as dt
import json
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from graphs import charts
from tests.conftest import logged_in
from tests.graphs.factories import make_demo_workspace, make_empty_workspace
from tests.trajectories.factories import ingest, run_item
from trajectories.models import EVALUATION_SOURCE, Run

pytestmark = pytest.mark.django_db
SLUG = "two-hop-qa"


def guided(days_ago: int, *, outcome: str = "success", count: int = 1, workspace: str = SLUG, **extra) -> None:
    items = [run_item(outcome=outcome, graph_workspace=workspace, **extra) for _ in range(count)]
    ids = ingest(*items).created_ids
    moment = timezone.make_aware(dt.datetime.combine(timezone.localdate() - dt.timedelta(days=days_ago), dt.time(12)))
    Run.objects.filter(pk__in=ids).update(created_at=moment)


def day(days_ago: int) -> str:
    return (timezone.localdate() - dt.timedelta(days=days_ago)).isoformat()


def label(days_ago: int) -> str:
    moment = timezone.localdate() - dt.timedelta(days=days_ago)
    return f"{moment:%b} {moment.day}"


def page(user, slug: str = SLUG) -> str:
    return logged_in(user).get(reverse("graphs:workspace", args=[slug])).content.decode()


def island(html: str, name: str) -> dict:
    match = re.search(rf'<script id="{name}" type="application/json">(.*?)</script>', html, re.S)
    assert match, f"no JSON island {name}"
    return json.loads(match.group(1))


def table(html: str, table_id: str) -> list[list[str]]:
    found = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)
    assert found, f"no table {table_id}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.S)
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows
    ]


def test_guided_runs_per_day_with_their_success_rate(viewer):
    make_demo_workspace()
    guided(0, count=3)
    guided(0, outcome="failure")
    guided(2, outcome="failure", count=2)
    guided(0, count=5, workspace="elsewhere")  # another workspace
    guided(0, count=7, source=EVALUATION_SOURCE)  # evaluation runs: not production
    guided(31, count=2)  # too old

    html = page(viewer)

    spec = island(html, "workspace-trends-data")
    assert spec["labels"] == [label(offset) for offset in range(29, -1, -1)]
    rate, runs = spec["series"]
    assert (rate["label"], runs["label"], runs["kind"], runs["axis"]) == (
        "success rate",
        "guided runs",
        "bar",
        "y2",
    )
    assert spec["y_range"] == [0, 1] and spec["y2_integer"] is True
    assert runs["data"][-1] == 4 and runs["data"][-3] == 2 and sum(runs["data"]) == 6
    assert rate["data"][-1] == 0.75 and rate["data"][-3] == 0.0 and rate["data"][-2] is None
    rows = table(html, "workspace-trends-table")  # newest first
    assert len(rows) == 30
    assert rows[0] == [day(0), "4", "3", "0.75"]
    assert rows[1] == [day(1), "0", "0", "–"]
    assert rows[2] == [day(2), "2", "0", "0.00"]


def test_no_guided_run_gives_a_sentence_and_no_trend_canvas(viewer):
    make_empty_workspace()
    guided(0, count=3, workspace="other")
    guided(40, workspace="empty")

    html = page(viewer, "empty")

    assert "No production run guided by this workspace was received in the last 30 days" in html
    assert "workspace-trends-data" not in html


@pytest.mark.parametrize("size", [1, 15])
def test_the_trend_is_one_query_whatever_the_data(size, django_assert_num_queries):
    workspace = make_demo_workspace()
    for offset in range(size):
        guided(offset, count=2)
        guided(offset, outcome="failure")

    with django_assert_num_queries(1):
        trends = charts.workspace_trends(workspace)

    assert trends.runs == 3 * size
    assert trends.days[-1].rate == pytest.approx(0.6667)
