"""A rare text search reads the GIN index first (trajectories.selectors.run_results): the probe tells rare from
common, the answers are the same under either plan, the rare plan is one condition of the page's own query (no
transaction, no planner setting), and the list page keeps a fixed number of queries under both plans."""

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.conftest import logged_in
from trajectories import selectors
from trajectories.selectors import RunFilters, run_page, run_results, run_totals, text_search_is_rare

from .factories import ingest, run_item, step_item

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the GIN plan exists on PostgreSQL only"),
]
SEARCH_FIRST = 'AS "matched" WHERE "matched"."search_vector" @@'


@pytest.fixture
def small_window(monkeypatch):
    """A probe window of 20 runs and 5 matches, so that a few dozen runs tell a rare word from a common one."""
    monkeypatch.setattr(selectors, "SEARCH_PROBE_WINDOW", 20)
    monkeypatch.setattr(selectors, "SEARCH_PROBE_MATCHES", 5)


@pytest.fixture
def corpus(small_window):
    """40 runs that all say "kettle"; the two oldest also say "zanzibarite"."""
    items = []
    for number in range(40):
        observation = "the kettle arrived" + (" zanzibarite" if number < 2 else "")
        items.append(run_item(external_id=f"r{number:02d}", steps=[step_item("lookup", observation=observation)]))
    ingest(*items)


def indexscan() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_indexscan")
        return cursor.fetchone()[0]


def test_the_probe_tells_a_rare_word_from_a_common_one(corpus):
    assert text_search_is_rare(RunFilters(search="zanzibarite"))
    assert not text_search_is_rare(RunFilters(search="kettle"))
    # the other filters count: "kettle" from a source no run has is rare
    assert text_search_is_rare(RunFilters(search="kettle", source="nobody"))


def test_a_table_smaller_than_the_window_is_probed_whole(small_window):
    ingest(*[run_item(steps=[step_item(observation="kettle" if n < 6 else "teapot")]) for n in range(10)])
    assert not text_search_is_rare(RunFilters(search="kettle"))  # six of ten: walked (cheap at this size)
    assert text_search_is_rare(RunFilters(search="teapot"))


def test_the_window_is_the_newest_ids(small_window):
    ingest(*[run_item(steps=[step_item(observation="kettle" if n < 25 else "teapot")]) for n in range(45)])
    assert text_search_is_rare(RunFilters(search="kettle"))  # none among the newest 20
    assert not text_search_is_rare(RunFilters(search="teapot"))  # all of the newest 20


@pytest.mark.parametrize("word, rare", [("zanzibarite", True), ("kettle", False)])
@pytest.mark.parametrize("sort", ["newest", "oldest", "cost_desc"])
def test_both_plans_answer_the_same(corpus, word, rare, sort):
    filters = RunFilters(search=word)
    with CaptureQueriesContext(connection) as ctx:
        page, totals = run_results(filters=filters, limit=10, sort=sort)
    queries = [query["sql"] for query in ctx.captured_queries]
    assert len(queries) == 3  # the probe, the page, the totals walk
    assert [SEARCH_FIRST in sql for sql in queries] == [False, rare, rare]
    expected = run_page(filters=filters, limit=10, sort=sort)
    assert [run.pk for run in page.runs] == [run.pk for run in expected.runs]
    assert page.next_cursor == expected.next_cursor
    assert totals == run_totals(filters=filters)
    assert totals.runs == (2 if rare else 40)
    assert indexscan() == "on"  # put back, even inside the test's transaction


def test_the_rare_plan_reads_the_gin_index_first(corpus):
    filters = selectors.planned(RunFilters(search="zanzibarite"))
    assert filters.search_first and not selectors.planned(RunFilters(search="kettle")).search_first
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # (a table this small is read whole otherwise)
        sql, params = run_page_query(filters)
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # the matches' ids from the GIN index, once, before the page reads its rows by id
    assert "InitPlan" in plan and "trajectories_run_search" in plan and "id = ANY" in plan


def run_page_query(filters):
    return filters.apply(selectors.Run.objects.all()).order_by("-id").values("id")[:26].query.sql_with_params()


def test_the_list_page_keeps_a_fixed_number_of_queries(corpus, viewer, django_assert_num_queries):
    client = logged_in(viewer)
    url = reverse("trajectories:list")
    # user, groups (nav), runs, rubric scores (the session from the cache; a search's totals come in their own
    # request); a search adds the probe
    with django_assert_num_queries(5):
        response = client.get(url, {"q": "kettle"})
    assert response.status_code == 200 and len(response.context["page"].runs) == 25
    # the session's user and roles are now kept (accounts.session_users): two fewer
    with django_assert_num_queries(3):  # the probe, the runs, the rubric scores: the user and roles are kept now
        response = client.get(url, {"q": "zanzibarite"})
    assert [run.external_id for run in response.context["page"].runs] == ["r01", "r00"]
    assert indexscan() == "on"  # no planner setting is touched
    # the totals on their own, under the same plan, the probe's answer kept from the page: the walk alone
    with django_assert_num_queries(1):
        response = client.get(reverse("trajectories:totals"), {"q": "zanzibarite"})
    assert response.context["totals"].runs == 2


def test_the_probes_answer_is_kept_for_a_minute_and_only_picks_the_plan(corpus, monkeypatch):
    filters = RunFilters(search="zanzibarite")
    assert selectors.planned(filters).search_first
    monkeypatch.setattr(selectors, "text_search_is_rare", lambda filters: pytest.fail("probed again"))
    assert selectors.planned(filters).search_first  # kept
    selectors.PROBE_ANSWERS.put(filters, False)  # a stale answer: the other plan, the same rows
    page, totals = run_results(filters=filters, limit=10)
    assert [run.external_id for run in page.runs] == ["r01", "r00"] and totals.runs == 2
    monkeypatch.undo()
    selectors.PROBE_ANSWERS.put(filters, False, read_at=time.monotonic() - 61)  # a minute old: asked again
    assert selectors.planned(filters).search_first
