"""The explorer's totals walk (selectors.run_totals over the newest matching runs) reads only columns the covering
index `trajectories_run_totals_walk` holds, so PostgreSQL can answer it from the index alone (migration 0009)."""

import re
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.trajectories.factories import ingest, run_item
from trajectories.models import TOTALS_WALK_COLUMNS
from trajectories.selectors import RunFilters, run_totals

pytestmark = pytest.mark.django_db
NOT_A_WHOLE_DAY = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
# Every filter but the text search and the tool (a JSON array; their walks read the table), alone and together,
# with a time bound that is not a whole day so the day rows cannot answer.
WALKED = {
    "score": RunFilters(kind="production", score_min=0.1, score_max=0.9),
    "cost": RunFilters(kind="evaluation", cost_min=0.0, cost_max=5.0),
    "steps and duration": RunFilters(steps_min=1, steps_max=9, duration_min=0.0, duration_max=100.0),
    "everything at once": RunFilters(
        kind="production",
        outcome="success",
        source="test-agent",
        intent="refund_request",
        received_from=NOT_A_WHOLE_DAY,
        score_min=0.0,
        cost_max=10.0,
        steps_min=1,
        duration_max=1000.0,
    ),
}


def columns_read(sql: str) -> set[str]:
    return set(re.findall(r'"trajectories_run"\."(\w+)"', sql))


@pytest.mark.parametrize("name", list(WALKED))
def test_the_walk_reads_only_what_the_covering_index_holds(name):
    ingest(run_item(), run_item(outcome="failure"))
    with CaptureQueriesContext(connection) as captured:
        run_totals(filters=WALKED[name])
    (query,) = [q["sql"] for q in captured if '"trajectories_run"' in q["sql"]]
    assert "LIMIT 1001" in query  # the walk, not the day rows
    assert columns_read(query) <= {"id", *TOTALS_WALK_COLUMNS}, columns_read(query) - {"id", *TOTALS_WALK_COLUMNS}


@pytest.mark.postgres
def test_the_covering_index_includes_those_columns_on_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("a covering index (INCLUDE) is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'trajectories_run_totals_walk'")
        (definition,) = cursor.fetchone()
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'trajectories_run'")
        (options,) = cursor.fetchone()
    included = re.search(r"INCLUDE \((.*)\)", definition).group(1)
    assert {column.strip() for column in included.split(",")} == set(TOTALS_WALK_COLUMNS)
    assert "autovacuum_vacuum_insert_scale_factor=0.01" in (options or [])
