"""The trace explorer (issue 11, item 4): full-text search, every filter, sorting with keyset pages, totals,
evaluation runs kept apart, the JSONL export round trip, odd input and fixed query counts."""

import json
from datetime import timedelta
from unittest import mock

import pytest
from django.apps import apps
from django.db import connection, connections
from django.urls import reverse
from django.utils import timezone

from tests.conftest import logged_in
from trajectories import rollup
from trajectories.core.search import MAX_DOCUMENT_CHARS, SearchStep, search_document
from trajectories.models import EVALUATION_SOURCE, Run, Step
from trajectories.selectors import RunFilters, run_page

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.django_db
LIST = reverse("trajectories:list")
EXPORT = reverse("trajectories:export")
TOTALS = reverse("trajectories:totals")


def shown(client, query: str) -> list[str]:
    """The external ids of the runs the list shows for a query string (in page order)."""
    response = client.get(f"{LIST}?{query}")
    assert response.status_code == 200, response.content[:500]
    return [run.external_id for run in response.context["page"].runs]


@pytest.fixture
def fleet():
    """Five production runs with distinct numbers and one evaluation run."""
    ingest(
        run_item(
            external_id="alpha",
            task="Refund the blue shoes",
            outcome="success",
            score=0.9,
            started_at="2026-01-05T10:00:00Z",
            ended_at="2026-01-05T10:00:10Z",
            steps=[
                step_item("lookup_policy", observation="the parcel was marked zanzibarite damaged", cost=0.5),
                step_item("issue_refund", arguments={"order_id": "Q-77"}, cost=0.5),
            ],
        ),
        run_item(
            external_id="bravo",
            task="Cancel my order",
            intent="cancel_order",
            outcome="failure",
            score=0.2,
            started_at="2026-01-05T10:00:00Z",
            ended_at="2026-01-05T10:05:00Z",
            steps=[step_item("cancel_order", cost=2.0)],
        ),
        run_item(
            external_id="charlie",
            task="Change my address",
            intent="change_address",
            source="other",
            outcome="unknown",
            score=None,
            started_at=None,
            ended_at=None,
            steps=[step_item("lookup_account"), step_item("update_address"), step_item("notify")],
        ),
        run_item(
            external_id="delta",
            task="Where is my parcel",
            intent="order_status",
            outcome="success",
            score=0.5,
            started_at="2026-01-05T10:00:00Z",
            ended_at="2026-01-05T10:01:00Z",
            steps=[step_item("order_status", cost=0.01)],
        ),
        run_item(external_id="job-1", source=EVALUATION_SOURCE, task="Refund under evaluation", outcome="success"),
    )
    # "received" a week apart: bravo last week
    Run.objects.filter(external_id="bravo").update(created_at=timezone.now() - timedelta(days=7))
    rollup.rebuild()  # written behind ingest's back: the daily totals follow


# --- search --------------------------------------------------------------------------------------------------------


def test_the_search_document_is_filled_at_ingest_from_task_tools_arguments_and_observations(fleet):
    document = Run.objects.get(external_id="alpha").search_document
    for word in ("blue shoes", "lookup_policy", "issue_refund", "order_id", "Q-77", "zanzibarite"):
        assert word in document


def test_the_search_document_is_bounded_and_shares_room_between_steps():
    steps = [SearchStep(f"tool_{n}", {"n": n}, f"obs{n} " + "x" * 5000) for n in range(50)]
    document = search_document("task " * 1000, steps)
    assert len(document) <= MAX_DOCUMENT_CHARS
    assert "obs49" in document  # the last step still has its share
    assert "\x00" not in search_document("a\x00b", [])


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("q=zanzibarite", ["alpha"]),  # only in an observation
        ("q=Q-77", ["alpha"]),  # an argument value
        ("q=update_address", ["charlie"]),  # a tool name
        ("q=parcel", ["delta", "alpha"]),  # the task of one, the observation of the other
        ("q=parcel+blue", ["alpha"]),  # every word
        ("q=nothing-like-this", []),
    ],
)
def test_full_text_search_finds_words_in_tasks_tools_arguments_and_observations(viewer, fleet, query, expected):
    assert shown(logged_in(viewer), query) == expected


def test_the_sqlite_fallback_matches_every_term_in_the_search_document(viewer, fleet):
    with mock.patch.object(connections["default"], "vendor", "sqlite"):
        found = list(RunFilters(search="ZANZIBARITE blue").apply(Run.objects.all()).values_list("external_id"))
        assert found == [("alpha",)]
        assert not RunFilters(search="zanzibarite cancel").apply(Run.objects.all()).exists()


@pytest.mark.postgres
def test_on_postgresql_search_is_one_query_on_the_gin_index(fleet):
    if connection.vendor != "postgresql":
        pytest.skip("the suite runs on SQLite")
    runs = RunFilters(search='"marked zanzibarite"').apply(Run.objects.all())
    assert list(runs.values_list("external_id", flat=True)) == ["alpha"]  # a phrase (websearch syntax)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = runs.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "trajectories_run_search" in plan


def test_existing_runs_get_their_search_document_from_the_data_migration(fleet):
    from importlib import import_module

    migration = import_module("trajectories.migrations.0004_explorer")
    Run.objects.update(search_document="", duration_seconds=None)
    schema_editor = mock.Mock(connection=connection)
    migration.backfill(apps, schema_editor)
    alpha = Run.objects.get(external_id="alpha")
    assert "zanzibarite" in alpha.search_document and alpha.duration_seconds == 10.0
    assert RunFilters(search="zanzibarite").apply(Run.objects.all()).get() == alpha


# --- filters -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("outcome=failure", ["bravo"]),
        ("source=other", ["charlie"]),
        ("intent=order_status", ["delta"]),
        ("tool=Update_Address", ["charlie"]),  # normalized like ingest
        ("score_min=0.5", ["delta", "alpha"]),
        ("score_max=0.5", ["delta", "bravo"]),
        ("score_min=0.3&score_max=0.6", ["delta"]),
        ("duration_min=30", ["delta", "bravo"]),
        ("duration_max=60", ["delta", "alpha"]),
        ("cost_min=1.5", ["bravo"]),
        ("cost_max=0.01", ["delta", "charlie"]),
        ("steps_min=3", ["charlie"]),
        ("steps_max=1", ["delta", "bravo"]),
        ("steps_min=2&steps_max=2", ["alpha"]),
        ("outcome=success&score_min=0.8", ["alpha"]),
    ],
)
def test_each_filter_narrows_the_list(viewer, fleet, query, expected):
    assert shown(logged_in(viewer), query) == expected


def test_received_time_range(viewer, fleet):
    client = logged_in(viewer)
    today = timezone.localdate()
    week_ago = today - timedelta(days=7)
    assert shown(client, f"received_to={week_ago.isoformat()}") == ["bravo"]
    assert shown(client, f"received_from={(week_ago + timedelta(days=1)).isoformat()}") == [
        "delta",
        "charlie",
        "alpha",
    ]
    # within a received range "newest" is by received time: bravo, received a week ago, comes last
    assert shown(client, f"received_from={week_ago}&received_to={today}") == ["delta", "charlie", "alpha", "bravo"]


def test_a_source_filter_is_compared_in_nfc_like_ingest(viewer):
    ingest(run_item(source="caf\u00e9-agent", external_id="nfc"), run_item(external_id="other"))
    assert shown(logged_in(viewer), "source=cafe%CC%81-agent") == ["nfc"]  # e + combining acute, decomposed


# --- evaluation runs -----------------------------------------------------------------------------------------------


def the_evaluation_run() -> str:
    """The fleet's evaluation run, as the job protocol named it ("job-<id>")."""
    (external_id,) = Run.objects.filter(source=EVALUATION_SOURCE).values_list("external_id", flat=True)
    return external_id


def test_evaluation_runs_are_left_out_of_the_list_and_its_counts_unless_asked(viewer, fleet):
    client = logged_in(viewer)
    answer = the_evaluation_run()
    assert answer not in shown(client, "")
    assert client.get(LIST).context["totals"].runs == 4
    assert shown(client, "kind=evaluation") == [answer]
    everything = client.get(f"{LIST}?kind=all")
    assert everything.context["totals"].runs == 5 and answer in [r.external_id for r in everything.context["page"].runs]
    assert shown(client, "q=evaluation") == []
    assert shown(client, "q=evaluation&kind=evaluation") == [answer]


# --- totals --------------------------------------------------------------------------------------------------------


def test_totals_count_the_matching_runs_success_rate_tokens_and_cost(viewer, fleet):
    client = logged_in(viewer)
    page = client.get(f"{LIST}?steps_max=2")
    assert page.context["totals"] is None  # a walk of the matching runs: asked for once the page is shown
    assert f'hx-get="{TOTALS}?steps_max=2" hx-trigger="load"' in page.content.decode()
    response = client.get(f"{TOTALS}?steps_max=2")
    totals = response.context["totals"]
    assert (totals.runs, totals.successes) == (3, 2)  # alpha, bravo, delta
    assert totals.success_rate == pytest.approx(2 / 3)
    assert totals.tokens == 4 * 17
    assert totals.cost == pytest.approx(1.0 + 2.0 + 0.01)
    content = response.content.decode()
    assert content.startswith('\n<p class="explorer-totals" id="totals">')  # the fragment alone, no layout
    assert "3</strong> matching production runs" in content and "67%" in content


def test_totals_the_daily_totals_answer_come_with_the_page(viewer, fleet):
    response = logged_in(viewer).get(f"{LIST}?outcome=success")
    assert response.context["totals"].runs == 2
    assert f'hx-get="{TOTALS}' not in response.content.decode()


def test_totals_of_nothing_say_so(viewer, fleet):
    client = logged_in(viewer)
    assert "No runs match these filters." in client.get(f"{LIST}?q=nothing-like-this").content.decode()
    response = client.get(f"{TOTALS}?q=nothing-like-this")
    assert response.context["totals"].runs == 0 and response.context["totals"].success_rate is None
    assert "<strong>0</strong> matching production runs" in response.content.decode()


def test_the_totals_need_a_login_and_ignore_bad_filters(client, viewer, fleet):
    assert client.get(f"{TOTALS}?steps_max=2").status_code == 302
    response = logged_in(viewer).get(f"{TOTALS}?steps_max=-1&outcome=success")
    assert response.status_code == 200 and response.context["totals"].runs == 2  # as the list: the bad one ignored


# --- sorting and keyset pages --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("newest", ["delta", "charlie", "bravo", "alpha"]),
        ("oldest", ["alpha", "bravo", "charlie", "delta"]),
        ("score_desc", ["alpha", "delta", "bravo", "charlie"]),  # no score last
        ("score_asc", ["bravo", "delta", "alpha", "charlie"]),
        ("cost_desc", ["bravo", "alpha", "delta", "charlie"]),
        ("cost_asc", ["charlie", "delta", "alpha", "bravo"]),
        ("steps_desc", ["charlie", "alpha", "delta", "bravo"]),
        ("steps_asc", ["bravo", "delta", "alpha", "charlie"]),  # ties by id
        ("duration_desc", ["bravo", "delta", "alpha", "charlie"]),
        ("duration_asc", ["alpha", "delta", "bravo", "charlie"]),
    ],
)
def test_sorting(viewer, fleet, sort, expected):
    assert shown(logged_in(viewer), f"sort={sort}") == expected


@pytest.mark.parametrize("sort", ["newest", "score_desc", "score_asc", "cost_desc", "duration_desc", "steps_asc"])
def test_keyset_pages_walk_every_run_once_in_the_sort_order(sort):
    items = []
    for n in range(23):
        has_value = n % 4 != 0  # some runs without a score or duration
        items.append(
            run_item(
                external_id=f"k{n}",
                score=float(n % 5) if has_value else None,  # ties on the sort key
                started_at="2026-01-05T10:00:00Z" if has_value else None,
                ended_at=f"2026-01-05T10:00:{n % 3:02d}Z" if has_value else None,
                steps=[step_item(cost=float(n % 2))] * (1 + n % 3),
            )
        )
    ingest(*items)
    everything = run_page(filters=RunFilters(), sort=sort, limit=200).runs
    walked, cursor = [], None
    while True:
        page = run_page(filters=RunFilters(), sort=sort, limit=4, cursor=cursor)
        walked.extend(page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [r.pk for r in walked] == [r.pk for r in everything] and len(walked) == 23


def test_paging_links_keep_the_filters_and_the_sort(viewer):
    ingest(*[run_item(task=f"Task number {n:03d}", score=float(n)) for n in range(30)])
    client = logged_in(viewer)
    first = client.get(f"{LIST}?sort=score_asc&score_min=2")
    assert "sort=score_asc" in first.context["next_query"] and "score_min=2" in first.context["next_query"]
    second = client.get(f"{LIST}?{first.context['next_query']}")
    scores = [run.score for run in second.context["page"].runs]
    assert scores == [float(n) for n in range(27, 30)]
    assert "First page" in second.content.decode()


# --- odd input -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("received_from=2026-13-45", "Received from: Enter a date as YYYY-MM-DD."),
        ("received_to=yesterday", "Received until: Enter a date as YYYY-MM-DD."),
        ("received_to=0001-01-01", "between 1900-01-01 and 9999-12-30"),
        ("cost_min=-1", "Cost from: Ensure this value is greater than or equal to 0"),
        ("steps_min=-3", "Steps from"),
        ("duration_max=-0.5", "Duration to (s)"),
        ("score_min=nan", "Score from"),
        ("score_max=inf", "Score to"),
        ("steps_max=99999999999999999999999", "Steps to"),
        ("cost_min=5&cost_max=1", "Cost to: must not be below “Cost from”."),
        ("received_from=2026-02-01&received_to=2026-01-01", "Received until: must not be below"),
        ("sort=sideways", "Sort: Select a valid choice."),
        ("kind=staging", "Runs: Select a valid choice."),
        ("q=" + "x" * 201, "Search: Ensure this value has at most 200 characters"),
        ("source=" + "s" * 101, "Source: Ensure this value has at most 100 characters"),
    ],
)
def test_odd_filters_give_a_message_and_are_ignored_never_a_500(viewer, fleet, query, message):
    response = logged_in(viewer).get(f"{LIST}?{query}")
    assert response.status_code == 200
    content = response.content.decode()
    assert "Some filters were not valid and were ignored." in content
    assert message.replace("“", "&ldquo;").replace("”", "&rdquo;") in content or message in content
    assert len(response.context["page"].runs) == 4  # the production runs, unfiltered


def test_a_valid_filter_still_applies_beside_an_invalid_one(viewer, fleet):
    assert shown(logged_in(viewer), "outcome=failure&cost_min=-1") == ["bravo"]


def test_an_overlong_address_is_refused_with_a_message(viewer, fleet):
    client = logged_in(viewer)
    response = client.get(f"{LIST}?q={'x' * 5_000}")
    assert response.status_code == 200
    assert "These filters are too long (5,002 characters" in response.content.decode()
    assert len(response.context["page"].runs) == 4
    assert client.get(f"{EXPORT}?q={'x' * 5_000}").status_code == 400
    # beyond the site-wide limit (config.middleware), the styled 414 page: never a 500 nor the bare server answer
    assert client.get(f"{LIST}?q={'x' * 100_000}").status_code == 414


def test_the_form_keeps_typed_values_short(viewer):
    content = logged_in(viewer).get(LIST).content.decode()
    for name, length in (("q", 200), ("source", 100), ("tool", 60), ("intent", 200)):
        assert f'name="{name}"' in content and f'maxlength="{length}"' in content


def test_a_cursor_of_another_sort_is_refused_with_a_message(viewer, fleet):
    client = logged_in(viewer)
    ingest(*[run_item(score=float(n)) for n in range(30)])
    cursor = client.get(f"{LIST}?sort=score_desc").context["page"].next_cursor
    response = client.get(f"{LIST}?sort=cost_desc&cursor={cursor}")
    assert response.status_code == 200 and "no longer valid" in response.content.decode()


# --- export --------------------------------------------------------------------------------------------------------

FIELDS = (
    "source",
    "external_id",
    "task",
    "intent",
    "outcome",
    "score",
    "graph_workspace",
    "graph_revision",
    "metadata",
    "started_at",
    "ended_at",
    "step_count",
    "total_tokens",
    "cost",
    "tools",
    "duration_seconds",
    "search_document",
)
STEP_FIELDS = (
    "ordinal",
    "tool",
    "action_family",
    "arguments",
    "observation",
    "ok",
    "started_at",
    "ended_at",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "cost",
)


def snapshot():
    runs = {(r.source, r.external_id): tuple(getattr(r, f) for f in FIELDS) for r in Run.objects.all()}
    steps = {
        (s.run.source, s.run.external_id, s.ordinal): tuple(getattr(s, f) for f in STEP_FIELDS)
        for s in Step.objects.select_related("run")
    }
    return runs, steps


def export_lines(client, query: str = "") -> list[dict]:
    response = client.get(f"{EXPORT}?{query}")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert "attachment" in response["Content-Disposition"]
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def test_the_export_round_trips_through_the_ingest_api(viewer, fleet, api_client, make_agent_token):
    Run.objects.filter(external_id="alpha").update(metadata={"model": "demo", "nested": {"k": [1, "é"]}})
    lines = export_lines(logged_in(viewer))
    assert [line["external_id"] for line in lines] == ["alpha", "bravo", "charlie", "delta"]
    before = snapshot()
    Run.objects.exclude(source=EVALUATION_SOURCE).delete()  # the evaluation run stays (its job holds it)
    token = make_agent_token("trajectories:write")
    response = api_client.post("/api/v1/trajectories", {"runs": lines}, token=token)
    assert response.status_code == 201, response.content
    assert snapshot() == before


def test_an_export_holding_evaluation_runs_is_refused_by_the_ingest_whole(viewer, fleet, api_client, make_agent_token):
    lines = export_lines(logged_in(viewer), "kind=all")
    assert [line["external_id"] for line in lines] == ["alpha", "bravo", "charlie", "delta", the_evaluation_run()]
    token = make_agent_token("trajectories:write")
    before = Run.objects.count()
    response = api_client.post("/api/v1/trajectories", {"runs": lines}, token=token)
    assert response.status_code == 422, response.content
    errors = response.json()["details"]["errors"]
    assert [(e["loc"], e["type"]) for e in errors] == [
        (["runs", 4, "source"], "reserved_source"),
        (["runs", 4, "external_id"], "reserved_external_id"),
    ]
    assert Run.objects.count() == before


def test_the_export_carries_the_filters_and_leaves_evaluation_runs_out_by_default(viewer, fleet):
    client = logged_in(viewer)
    assert [line["external_id"] for line in export_lines(client)] == ["alpha", "bravo", "charlie", "delta"]
    assert [line["external_id"] for line in export_lines(client, "q=zanzibarite")] == ["alpha"]
    totals = client.get(f"{TOTALS}?q=zanzibarite&outcome=success").content.decode()
    assert f'href="{EXPORT}?q=zanzibarite&amp;outcome=success"' in totals
    page = client.get(f"{LIST}?outcome=success").content.decode()  # totals with the page
    assert f'href="{EXPORT}?outcome=success"' in page


def test_the_export_needs_a_login_and_refuses_bad_filters(client, viewer, fleet):
    assert client.get(EXPORT).status_code == 302
    response = logged_in(viewer).get(f"{EXPORT}?cost_min=-1")
    assert response.status_code == 400 and b"Cost from" in response.content


def test_the_export_reads_runs_in_chunks_with_a_fixed_number_of_queries_each(
    viewer, django_assert_max_num_queries, monkeypatch
):
    monkeypatch.setattr("trajectories.selectors.EXPORT_CHUNK", 5)
    ingest(*[run_item() for _ in range(12)])
    client = logged_in(viewer)
    response = client.get(EXPORT)
    with django_assert_max_num_queries(3 * 2):  # three chunks: runs, their steps
        lines = list(response.streaming_content)
    assert len(lines) == 12


# --- query counts --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [3, 30])
@pytest.mark.parametrize(
    "query",
    [
        "",
        "tool=notify",
        "q=refunds",
        "sort=score_desc&score_min=0&cost_max=10&steps_min=1&duration_min=0&received_from=2020-01-01&kind=all",
    ],
)
def test_the_list_costs_a_fixed_number_of_queries(viewer, django_assert_num_queries, size, query):
    ingest(*[run_item(steps=[step_item(), step_item("notify")]) for _ in range(size)])
    client = logged_in(viewer)
    walked = query != ""  # totals the daily totals cannot answer come in a request of their own
    expected = 4 if walked else 5  # user, groups (nav), runs, [totals,] rubric scores (the session from the cache)
    searched = 0
    if query.startswith("q=") and connection.vendor == "postgresql":
        searched = 1  # the probe (these small tables read the GIN index first: tests/trajectories/test_search_plan.py)
    with django_assert_num_queries(expected + searched):
        response = client.get(f"{LIST}?{query}")
    assert response.status_code == 200
    if walked:  # the walk (the user and roles, and a search's plan, are kept since the page)
        with django_assert_num_queries(1):
            response = client.get(f"{TOTALS}?{query}")
    assert response.context["totals"].runs == size


def test_a_listed_run_holds_every_field_the_apis_runs_list_answers():
    from trajectories.schemas import RunOut
    from trajectories.selectors import LISTED_COLUMNS

    assert set(RunOut.model_fields) <= set(LISTED_COLUMNS)  # the API's list serializes ListedRun rows
