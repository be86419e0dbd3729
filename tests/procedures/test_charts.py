"""Charts on the version page: a replay's metrics beside the active version's (grouped bars with their table), and
the procedure's history (each version's replay metrics over version numbers), in a fixed number of queries."""

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from procedures import charts
from procedures.models import Procedure, ReplayRun
from procedures.replay.services import offline as offline_replay_services
from tests.conftest import logged_in
from tests.promote import promote_procedure_version
from tests.trajectories.factories import ingest

from .factories import queued_replay, refund_run, stored_version

pytestmark = pytest.mark.django_db


def version_url(version) -> str:
    return reverse("procedures:version", args=[version.pk])


def island(html: str, name: str) -> dict:
    match = re.search(rf'<script id="{name}" type="application/json">(.*?)</script>', html, re.S)
    assert match, f"no JSON island {name}"
    return json.loads(match.group(1))


def table(html: str, table_id: str) -> list[list[str]]:
    found = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)
    assert found, f"no table {table_id}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in rows]
    return [[" ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in row] for row in cells]


def held_out_cases() -> list[int]:
    """Four successful refunds: three lookup_policy → issue_refund, one lookup_policy → check → issue_refund."""
    return ingest(*[refund_run() for _ in range(3)], refund_run("lookup_policy", "check", "issue_refund")).created_ids


def scenario(title: str = "refund_request"):
    """Active v1 (lookup_policy → issue_refund) and candidate v2 (… → check → …) replayed on the same four cases:
    v1 passes all four, v2 only the last (task_success 1.0 vs 0.25, three regressions)."""
    held_out = held_out_cases()
    procedure = Procedure.objects.create(intent=title.replace("_", " "), title=title)
    active = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
    promote_procedure_version(active)
    candidate = stored_version(procedure, "lookup_policy", "check", "issue_refund", number=2, status="candidate")
    replay = queued_replay(candidate, compared_with=active, held_out=held_out)
    offline_replay_services.replay_offline_run(replay=replay)
    return procedure, active, candidate, replay


def test_a_replay_is_charted_beside_the_active_version_on_the_same_cases(viewer):
    _, _, candidate, replay = scenario()

    html = logged_in(viewer).get(version_url(candidate)).content.decode()

    spec = island(html, f"replay-{replay.pk}-shares")
    assert spec["kind"] == "bar" and spec["y_range"] == [0, 1]
    assert [item["label"] for item in spec["series"]] == ["v2", "active v1 (same cases)"]
    pairs = zip(spec["series"][0]["data"], spec["series"][1]["data"], strict=True)
    values = dict(zip(spec["labels"], pairs, strict=True))
    assert values["task_success"] == (0.25, 1.0)
    assert values["tool_correctness"] == (0.25, 1.0)
    assert values["outcome_success"] == (1.0, 1.0)
    assert values["answered_rate"] == (1.0, 1.0)
    counts = island(html, f"replay-{replay.pk}-counts")
    assert counts["y_range"] == [0, None]
    count_pairs = zip(counts["series"][0]["data"], counts["series"][1]["data"], strict=True)
    count_values = dict(zip(counts["labels"], count_pairs, strict=True))
    assert count_values["regressions"] == (3, None)
    assert count_values["mean_steps"] == (2.25, 2.25)
    rows = {row[0]: row[1:] for row in table(html, f"replay-{replay.pk}-shares-table")}
    assert rows["task_success"] == ["0.250", "1"]
    assert set(rows) == set(spec["labels"])
    count_rows = {row[0]: row[1:] for row in table(html, f"replay-{replay.pk}-counts-table")}
    assert count_rows["regressions"] == ["3", "–"]
    assert count_rows["mean_steps"] == ["2.250", "2.250"]
    assert f'data-chart="replay-{replay.pk}-shares"' in html


def test_without_a_comparison_on_the_replay_the_active_versions_latest_replay_is_used(viewer):
    held_out = held_out_cases()
    procedure = Procedure.objects.create(intent="refund request", title="refund_request")
    active = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
    own = queued_replay(active, compared_with=None, held_out=held_out)
    offline_replay_services.replay_offline_run(replay=own)
    promote_procedure_version(active)
    candidate = stored_version(procedure, "lookup_policy", "check", "issue_refund", number=2, status="candidate")
    replay = queued_replay(candidate, compared_with=None, held_out=held_out)
    offline_replay_services.replay_offline_run(replay=replay)

    html = logged_in(viewer).get(version_url(candidate)).content.decode()

    spec = island(html, f"replay-{replay.pk}-shares")
    assert spec["series"][1]["label"] == f"active v1 (its replay #{own.pk})"
    values = dict(zip(spec["labels"], spec["series"][1]["data"], strict=True))
    assert values["task_success"] == 1.0
    assert table(html, f"replay-{replay.pk}-shares-table")[0][2] != "–"


def test_with_no_active_version_only_the_candidate_is_charted(viewer):
    held_out = held_out_cases()
    procedure = Procedure.objects.create(intent="refund request", title="refund_request")
    first = stored_version(procedure, "lookup_policy", "issue_refund", number=1, status="candidate")
    replay = queued_replay(first, compared_with=None, held_out=held_out)
    offline_replay_services.replay_offline_run(replay=replay)

    html = logged_in(viewer).get(version_url(first)).content.decode()

    spec = island(html, f"replay-{replay.pk}-shares")
    assert [item["label"] for item in spec["series"]] == ["v1"]
    assert "beside no active version" in html
    assert all(len(row) == 2 for row in table(html, f"replay-{replay.pk}-shares-table"))


def test_an_unfinished_replay_gives_a_sentence_and_no_canvas(viewer):
    procedure = Procedure.objects.create(intent="refund request", title="refund_request")
    version = stored_version(procedure, "lookup_policy", "issue_refund", number=1, status="candidate")
    queued_replay(version, compared_with=None, held_out=held_out_cases())

    html = logged_in(viewer).get(version_url(version)).content.decode()

    assert "No replay of this version has finished yet" in html
    assert "No version of this procedure has a finished replay yet" in html
    assert "<canvas" not in html


def test_the_replay_chart_comes_with_the_polled_fragment_too(viewer):
    _, _, candidate, replay = scenario()

    fragment = logged_in(viewer).get(version_url(candidate), headers={"HX-Request": "true"}).content.decode()

    assert fragment.lstrip().startswith('<div id="replays"')
    assert island(fragment, f"replay-{replay.pk}-shares")["series"][0]["label"] == "v2"
    assert "procedure-trends-data" not in fragment  # the history is outside the polled section


def test_the_history_charts_each_versions_latest_replay_over_version_numbers(viewer):
    procedure, active, candidate, _ = scenario()
    ReplayRun.objects.create(
        version=active,
        status="done",
        metrics={"candidate": {"task_success": 1.0, "tool_correctness": 1.0, "answered_rate": 1.0}},
    )
    stored_version(procedure, "issue_refund", number=3, status="candidate")  # no replay: not in the history
    # A newer live replay of v2 does not replace its offline one; a version with only a live replay shows that one.
    ReplayRun.objects.create(
        version=candidate, mode="live", status="done", metrics={"candidate": {"task_success": 0.5}}
    )
    v4 = stored_version(procedure, "lookup_policy", "notify", number=4, status="failed")
    ReplayRun.objects.create(
        version=v4, mode="live", status="done", metrics={"candidate": {"task_success": 0.125, "answered_rate": 0.5}}
    )

    html = logged_in(viewer).get(version_url(candidate)).content.decode()

    spec = island(html, "procedure-trends-data")
    assert spec["labels"] == ["v1", "v2", "v4"]
    data = {item["label"]: item["data"] for item in spec["series"]}
    assert data["task_success"] == [1.0, 0.25, 0.125]
    assert data["answered_rate"] == [1.0, 1.0, 0.5]
    assert data["tool_correctness"] == [1.0, 0.25, None]
    rows = table(html, "procedure-trends-table")
    assert [row[0] for row in rows] == ["v1 active", "v2 failed", "v4 failed"]
    assert rows[1][2] == "0.250" and rows[2][1].endswith("live") and rows[2][3] == "–"
    assert 'aria-current="true" class="current"><td><a href="' + version_url(candidate) in html


@pytest.mark.parametrize("versions", [1, 6])
def test_the_history_is_one_query_whatever_the_number_of_versions(versions, django_assert_num_queries):
    procedure = Procedure.objects.create(intent="refund request", title="refund_request")
    for number in range(1, versions + 1):
        version = stored_version(procedure, f"tool_{number}", number=number)
        for mode in ("offline", "live"):
            ReplayRun.objects.create(
                version=version, mode=mode, status="done", metrics={"candidate": {"task_success": number / 10}}
            )

    with django_assert_num_queries(1):
        trends = charts.procedure_trends(procedure)

    assert [row.number for row in trends.rows] == list(range(1, versions + 1))
    assert [row.mode for row in trends.rows] == ["offline"] * versions


def test_the_history_keeps_the_last_versions_only():
    procedure = Procedure.objects.create(intent="refund request", title="refund_request")
    for number in range(1, 6):
        version = stored_version(procedure, f"tool_{number}", number=number)
        ReplayRun.objects.create(version=version, status="done", metrics={"candidate": {"task_success": 1.0}})

    assert [row.number for row in charts.procedure_trends(procedure, versions=3).rows] == [3, 4, 5]


def test_the_version_page_queries_do_not_grow_with_versions_and_replays(viewer):
    counts = []
    for size in (1, 4):
        procedure, _, candidate, _ = scenario(title=f"intent_{size}")
        for number in range(3, 3 + size):
            extra = stored_version(procedure, f"tool_{number}", number=number)
            ReplayRun.objects.create(version=extra, status="done", metrics={"candidate": {"task_success": 0.5}})
        client = logged_in(viewer)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(version_url(candidate)).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
