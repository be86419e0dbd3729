"""A rare text search reads the GIN index first (trajectories.selectors.run_results): the probe tells rare from
common, the answers are the same under either plan, the planner setting never outlives the block, and the list page
keeps a fixed number of queries under both plans."""

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
SET_OFF = "set_config('enable_indexscan', 'off', true)"


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


def test_a_table_smaller_than_the_window_reads_the_index_first(small_window):
    ingest(*[run_item(steps=[step_item(observation="kettle")]) for _ in range(10)])
    assert text_search_is_rare(RunFilters(search="kettle"))


@pytest.mark.parametrize("word, rare", [("zanzibarite", True), ("kettle", False)])
@pytest.mark.parametrize("sort", ["newest", "oldest", "cost_desc"])
def test_both_plans_answer_the_same(corpus, word, rare, sort):
    filters = RunFilters(search=word)
    with CaptureQueriesContext(connection) as ctx:
        page, totals = run_results(filters=filters, limit=10, sort=sort)
    assert any(SET_OFF in query["sql"] for query in ctx.captured_queries) is rare
    expected = run_page(filters=filters, limit=10, sort=sort)
    assert [run.pk for run in page.runs] == [run.pk for run in expected.runs]
    assert page.next_cursor == expected.next_cursor
    assert totals == run_totals(filters=filters)
    assert totals.runs == (2 if rare else 40)
    assert indexscan() == "on"  # put back, even inside the test's transaction


def test_the_setting_is_put_back_when_the_block_fails(corpus):
    with pytest.raises(selectors.InvalidCursor):
        run_results(filters=RunFilters(search="zanzibarite"), cursor="not-a-cursor")
    assert indexscan() == "on"


def test_the_list_page_keeps_a_fixed_number_of_queries(corpus, viewer, django_assert_num_queries):
    client = logged_in(viewer)
    url = reverse("trajectories:list")
    # user, groups (nav), runs, rubric scores (the session from the cache; a search's totals come in their own
    # request); a search adds the probe, and a rare one the setting and its restoring
    with django_assert_num_queries(5):
        response = client.get(url, {"q": "kettle"})
    assert response.status_code == 200 and len(response.context["page"].runs) == 25
    # the session's user and roles are now kept (accounts.session_users): two fewer
    with django_assert_num_queries(5 + 2):  # + BEGIN and COMMIT (SAVEPOINT and RELEASE within the test's transaction)
        response = client.get(url, {"q": "zanzibarite"})
    assert [run.external_id for run in response.context["page"].runs] == ["r01", "r00"]
    assert indexscan() == "on"
    # the totals on their own, under the same plan: the probe, the setting, the walk, its restoring
    with django_assert_num_queries(4 + 2):
        response = client.get(reverse("trajectories:totals"), {"q": "zanzibarite"})
    assert response.context["totals"].runs == 2 and indexscan() == "on"
