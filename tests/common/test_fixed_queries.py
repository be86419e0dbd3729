"""Fixed reads compiled once per thread (common/fixed_queries.py): the rows are the QuerySet's, converters applied
(aware datetimes, decoded JSON), one query per run and none to compile after the first, and the same rows again
after the data changed; several in one round trip."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.fixed_queries import FixedQuery, rows_together
from tests.trajectories.factories import ingest, run_item, step_item
from trajectories.models import Run

pytestmark = pytest.mark.django_db
COLUMNS = ("id", "external_id", "tools", "created_at", "score")


def newest():
    return Run.objects.order_by("-id").values_list(*COLUMNS)[:3]


def test_rows_equal_the_querysets_with_converters_applied():
    ingest(*[run_item(steps=[step_item("lookup"), step_item("notify")]) for _ in range(4)])
    query = FixedQuery(newest)
    rows = query.rows()
    assert rows == list(newest())
    assert isinstance(rows[0][2], list) and rows[0][2] == ["lookup", "notify"]  # JSON decoded
    assert rows[0][3].tzinfo is not None  # an aware datetime, as the ORM gives


def test_later_runs_make_one_query_and_see_new_rows():
    ingest(run_item())
    query = FixedQuery(newest)
    query.rows()
    ingest(run_item(external_id="later"))
    with CaptureQueriesContext(connection) as captured:
        rows = query.rows()
    assert len(captured) == 1 and rows[0][1] == "later"


def test_each_thread_compiles_its_own():
    ingest(run_item())
    query = FixedQuery(newest)
    query.rows()
    seen = []
    worker = threading.Thread(target=lambda: seen.append(getattr(query._local, "compiled", None)))
    worker.start()
    worker.join()
    assert seen == [None]  # another thread's connection: compiled again there, on first use


@pytest.mark.postgres
def test_reads_sent_together_make_one_round_trip_and_get_their_own_rows():
    ingest(*[run_item(external_id=f"r{i}") for i in range(4)])
    oldest = FixedQuery(lambda: Run.objects.order_by("id").values_list("external_id", "created_at")[:2])
    query = FixedQuery(newest)
    with CaptureQueriesContext(connection) as captured:
        rows, first = rows_together(query, oldest)
    assert len(captured) == 1
    assert rows == list(newest()) and [external_id for external_id, _ in first] == ["r0", "r1"]
    assert first[0][1].tzinfo is not None  # each query's own converters
