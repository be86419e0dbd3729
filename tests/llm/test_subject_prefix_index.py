"""The calls of every round of an evolution run are found by their subject id's prefix ("12:") from the ledger's
subject index (llm 0003, pattern operator classes: PostgreSQL takes LIKE 'prefix%' from it under any collation), not by
reading every evolution call there is; and the migration goes back and forth."""

import pytest
from django.db import connection, transaction

from llm.selectors import calls_for_subject_prefix
from tests.helpers.migrations import leaves, migrate

pytestmark = pytest.mark.postgres


def plan() -> str:
    calls = calls_for_subject_prefix("graphs.evolutionround", "12:").order_by().values_list("id")
    sql, params = calls.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan TO off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_subject_prefix_is_read_from_the_index(db):
    found = plan()
    assert "llm_call_subject_prefix" in found and "~>=~ '12:'" in found, found


def test_the_migration_goes_back_and_forth(transactional_db):
    try:
        migrate([("llm", "0002_model_call_diagnostics")])
        assert "llm_call_subject_prefix" not in plan()
    finally:
        migrate(leaves())
    assert "llm_call_subject_prefix" in plan()
