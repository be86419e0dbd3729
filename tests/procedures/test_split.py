"""The seeded split: its rule in Python (procedures.mining.split_ids) and in the database (procedures.versions.split),
which must agree, and the run-id lists a version gets from it."""

import pytest
from django.db import connection
from django.db.models.expressions import RawSQL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procedures.mining import held_out_count, split_ids, split_key, split_key_sql
from procedures.models import Procedure, ProcedureVersion, ReplayRun
from procedures.versions.split import RUN_LISTS, create_with_run_lists, split_runs
from tests.trajectories.factories import ingest, run_item, step_item
from trajectories.models import Run

from .factories import REFUND


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=60), max_size=50),
    st.floats(min_value=0.01, max_value=0.99),
    st.integers(min_value=0, max_value=1000),
    st.booleans(),
)
def test_the_split_partitions_the_ids_and_holds_out_the_lowest_keys(ids, share, seed, at_least_one):
    split = split_ids(ids, held_out_share=share, seed=seed, at_least_one=at_least_one)
    distinct = sorted(set(ids))
    assert sorted(split.training + split.held_out) == distinct
    assert list(split.training) == sorted(split.training) and list(split.held_out) == sorted(split.held_out)
    assert len(split.held_out) == held_out_count(len(distinct), held_out_share=share, at_least_one=at_least_one)
    if split.held_out and split.training:
        assert max(split_key(seed, pk) for pk in split.held_out) < min(split_key(seed, pk) for pk in split.training)
    assert split_ids(list(reversed(ids)), held_out_share=share, seed=seed, at_least_one=at_least_one) == split


@pytest.mark.parametrize("seed", [0, 17, 2**31 - 1])
def test_the_key_spreads_consecutive_ids_without_a_period(seed):
    # Runs arrive in id order and agents often cycle through tasks: the held-out fifth of 20,000 consecutive ids
    # must be a fifth of every block of ids and of every residue class of a short cycle, not a pattern.
    ids = range(1, 20_001)
    held = set(split_ids(ids, held_out_share=0.2, seed=seed).held_out)
    for start in range(1, 20_001, 2_000):
        assert 0.16 < len(held & set(range(start, start + 2_000))) / 2_000 < 0.24
    for period in range(2, 13):
        for residue in range(period):
            share = sum(1 for pk in held if pk % period == residue) / len(range(residue or period, 20_001, period))
            assert 0.17 < share < 0.23, (period, residue, share)
    assert split_ids(ids, held_out_share=0.2, seed=seed + 1).held_out != tuple(sorted(held))


@pytest.mark.django_db
def test_the_sql_key_is_the_python_key():
    ids = [1, 2, 3, 65_535, 65_536, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**40 + 12_345, 2**63 - 1]
    values = " UNION ALL ".join(f"SELECT CAST({pk} AS bigint) AS id" for pk in ids)
    for seed in (0, 17, 2**31 - 1):
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, {split_key_sql('ids.id', seed, vendor=connection.vendor)} FROM ({values}) ids")
            assert dict(cursor.fetchall()) == {pk: split_key(seed, pk) for pk in ids}
    assert all(0 <= split_key(17, pk) < 2**32 for pk in ids)


def test_held_out_count_rounds_like_python_and_keeps_one_on_each_side():
    assert held_out_count(5, held_out_share=0.5) == 2  # round(2.5) is 2
    assert held_out_count(7, held_out_share=0.5) == 4  # round(3.5) is 4
    assert held_out_count(2, held_out_share=0.1) == 0
    assert held_out_count(2, held_out_share=0.1, at_least_one=True) == 1
    assert held_out_count(2, held_out_share=0.9, at_least_one=True) == 1
    assert held_out_count(1, held_out_share=0.9, at_least_one=True) == 1  # one run cannot be on both sides


def _stored(outcomes):
    items = [
        run_item(intent=REFUND, outcome=outcome, steps=[step_item("a", ok=ok)] if ok is not None else [])
        for outcome, ok in outcomes
    ]
    return ingest(*items).created_ids


@pytest.mark.django_db
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    outcomes=st.lists(
        st.tuples(st.sampled_from(["success", "failure", "unknown"]), st.sampled_from([True, False, None])),
        max_size=25,
    ),
    share=st.sampled_from([0.1, 0.3, 0.5, 0.9]),
    seed=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_the_database_split_is_the_python_one(outcomes, share, seed):
    Run.objects.all().delete()
    _stored(outcomes)
    split = split_runs(Run.objects.filter(intent=REFUND), held_out_share=share, seed=seed)
    by_outcome = {
        outcome: list(Run.objects.filter(outcome=outcome).values_list("pk", flat=True))
        for outcome in ("success", "failure")
    }
    good = split_ids(by_outcome["success"], held_out_share=share, seed=seed, at_least_one=True)
    bad = split_ids(by_outcome["failure"], held_out_share=share, seed=seed)
    assert (split.successes, split.failures) == (len(by_outcome["success"]), len(by_outcome["failure"]))
    assert split.newest == max([*by_outcome["success"], *by_outcome["failure"], 0])
    lists = split.run_lists()
    assert lists["held_out_run_ids"] == sorted(good.held_out + bad.held_out)
    assert lists["training_run_ids"] == sorted(good.training + bad.training)
    assert _ids(split.training_success_ids()) == list(good.training)
    with_ok = set(Run.objects.filter(steps__ok=True).values_list("pk", flat=True))
    assert lists["source_run_ids"] == [pk for pk in good.training if pk in with_ok]
    assert lists["skipped_run_ids"] == [pk for pk in good.training if pk not in with_ok]


def _ids(query):
    """The ids a subquery of run ids selects (RawSQL over the split's table on PostgreSQL, else a queryset)."""
    if isinstance(query, RawSQL):
        with connection.cursor() as cursor:
            cursor.execute(query.sql, query.params)
            return sorted(pk for (pk,) in cursor.fetchall())
    return sorted(query.values_list("pk", flat=True))


def _table_exists(name):
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"pg_temp.{name}"])
        return cursor.fetchone()[0]


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the split's table is PostgreSQL's")
def test_the_split_table_is_dropped_on_close():
    _stored([("success", True)] * 4 + [("failure", True)] * 2)
    with split_runs(Run.objects.filter(intent=REFUND), held_out_share=0.3, seed=3) as split:
        assert split.table and _table_exists(split.table)
        assert split.run_lists()["held_out_run_ids"]
    assert not _table_exists(split.table)
    split.close()  # twice: nothing left to drop


@pytest.mark.django_db
def test_a_version_and_a_replay_get_the_lists_written_in_the_database():
    _stored([("success", True)] * 6 + [("success", False)] * 4 + [("failure", True)] * 4)  # 3 held out: one skipped
    split = split_runs(Run.objects.filter(intent=REFUND), held_out_share=0.3, seed=5)
    expected = split.run_lists()
    procedure = Procedure.objects.create(intent=REFUND, title=REFUND)
    version, sizes = create_with_run_lists(
        ProcedureVersion,
        split,
        procedure=procedure,
        number=2,
        steps=[{"tool": "a", "arguments": {}}],
        candidate_revision="sha256:x",
        content_revision="sha256:y",
    )
    stored = ProcedureVersion.objects.get(pk=version.pk)
    assert {name: getattr(stored, name) for name in RUN_LISTS} == expected
    assert version.held_out_run_ids == expected["held_out_run_ids"]  # the returned row reads them when asked
    assert sizes.sources == len(expected["source_run_ids"]) and sizes.held_out == len(expected["held_out_run_ids"])
    assert sizes.skipped == expected["skipped_run_ids"] != []
    replay, _ = create_with_run_lists(ReplayRun, split, ("held_out_run_ids",), version=version, mode="offline")
    assert ReplayRun.objects.get(pk=replay.pk).held_out_run_ids == expected["held_out_run_ids"]


@pytest.mark.django_db
def test_no_runs_split_into_nothing():
    split = split_runs(Run.objects.filter(intent=REFUND), held_out_share=0.3, seed=1)
    assert (split.successes, split.failures, split.newest) == (0, 0, 0)
    assert split.run_lists() == {name: [] for name in RUN_LISTS}


@pytest.mark.django_db
def test_once_mining_saw_ok_steps_in_every_training_run_the_lists_are_the_same_without_looking_again():
    _stored([("success", True)] * 7 + [("failure", True)] * 3)
    split = split_runs(Run.objects.filter(intent=REFUND), held_out_share=0.3, seed=11)
    procedure = Procedure.objects.create(intent=REFUND, title=REFUND)
    fields = {"procedure": procedure, "steps": [], "candidate_revision": "r"}
    looked, _ = create_with_run_lists(ProcedureVersion, split, number=1, content_revision="a", **fields)
    told, sizes = create_with_run_lists(
        ProcedureVersion, split.mined(split.training_successes), number=2, content_revision="b", **fields
    )
    assert split.mined(split.training_successes).none_skipped and not split.mined(0).none_skipped
    assert [getattr(told, name) for name in RUN_LISTS] == [getattr(looked, name) for name in RUN_LISTS]
    assert sizes.sources == split.training_successes == 5 and sizes.skipped == []
