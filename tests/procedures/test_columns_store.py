"""Mining and offline replay over stored runs read as streamed columns: the version holds exactly the candidate
learn_procedure gives on the same stored runs, and the replay stores exactly replay_procedure's cases and metrics."""

import dataclasses
import json
from unittest.mock import ANY

import pytest
from django.db.models.expressions import RawSQL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.services import Actor
from procedures import core, errors
from procedures.mining import services as mining_services
from procedures.mining import split_ids, trajectory_id
from procedures.models import ReplayCase, ReplayStatus
from procedures.replay import spooled_cases
from procedures.replay.services import lifecycle as replay_services
from procedures.replay.services import live as live_replay_services
from procedures.replay.services import offline as offline_replay_services
from procedures.versions import split as version_split
from tests.procedures.core.reference import reference_learn_procedure
from tests.trajectories.factories import ingest, run_item, step_item
from trajectories.core import TrajectoryStep
from trajectories.models import Run, Step
from trajectories.selectors import run_columns, step_columns

from .factories import REFUND

pytestmark = pytest.mark.django_db

TOOLS = ["lookup_policy", "check_account", "search", "issue_refund", "notify"]
ARGUMENTS = [{}, {"order_id": "A-1"}, {"order_id": "A-2"}, {"n": 1}, {"n": 1.0}, {"n": True}, {"n": 1, "m": None}]


def orm_steps(run_ids, *, only_ok):
    """The runs' steps as TrajectoryStep read through the ORM (how mining read them before the columns)."""
    steps = {pk: [] for pk in run_ids}
    rows = Step.objects.filter(run_id__in=run_ids).order_by("run_id", "ordinal")
    if only_ok:
        rows = rows.filter(ok=True)
    for step in rows:
        steps[step.run_id].append(
            TrajectoryStep(step.ordinal, step.tool, step.action_family, step.arguments or {}, ok=step.ok)
        )
    return steps


@st.composite
def stored_runs(draw):
    items = []
    for _ in range(draw(st.integers(min_value=2, max_value=9))):
        steps = [
            step_item(tool, arguments=draw(st.sampled_from(ARGUMENTS)), ok=draw(st.sampled_from([True, True, False])))
            for tool in draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=6))
        ]
        outcome = draw(st.sampled_from(["success", "success", "failure"]))
        items.append(run_item(intent=REFUND, outcome=outcome, steps=steps))
    return items


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=stored_runs(), seed=st.integers(min_value=0, max_value=5))
def test_mining_stored_runs_as_columns_gives_the_candidate_of_learn_procedure(operator, items, seed):
    Run.objects.all().delete()
    ingest(*items)
    successes = sorted(Run.objects.filter(intent=REFUND, outcome="success").values_list("pk", flat=True))
    if len(successes) < 2:
        return
    training = split_ids(successes, held_out_share=0.3, seed=seed, at_least_one=True).training
    ok_steps = orm_steps(training, only_ok=True)
    mapping = {trajectory_id(pk): steps for pk, steps in ok_steps.items() if steps}
    try:
        expected = core.learn_procedure(mapping, intent="refund request") if mapping else None
    except ValueError as error:
        expected = str(error)
    if mapping:
        try:
            reference = reference_learn_procedure(mapping, intent="refund request")
        except ValueError as error:
            reference = str(error)
        assert reference == expected
    split = version_split.split_runs(Run.objects.filter(intent=REFUND), held_out_share=0.3, seed=seed)
    try:
        learnt = mining_services.learn_from_split("refund request", split)
    except errors.MiningError as error:
        assert not isinstance(expected, core.ProcedureCandidate), error
        return
    # Mining keeps no source ids in the candidate (the version's list is written from the database).
    assert learnt.candidate == dataclasses.replace(expected, source_trajectory_ids=())
    lists = split.run_lists()
    assert lists["source_run_ids"] == sorted(pk for pk, steps in ok_steps.items() if steps)
    assert lists["skipped_run_ids"] == sorted(pk for pk, steps in ok_steps.items() if not steps)


def test_step_and_run_columns_stream_what_the_orm_reads(operator):
    ids = ingest(
        run_item(steps=[step_item("a", arguments={"x": 1}), step_item("b", ok=False), step_item("c", arguments={})]),
        run_item(steps=[step_item("b", ok=False)]),
        run_item(steps=[]),
        run_item(outcome="failure", steps=[step_item("c", arguments={"y": "z"})]),
    ).created_ids
    asked = [*ids, 10**9]  # a run that does not exist is left out
    ok = [(pk, tools, [json.loads(text) for text in texts]) for pk, tools, texts in step_columns(asked, only_ok=True)]
    assert ok == [
        (ids[0], ["a", "c"], [{"x": 1}, {}]),
        (ids[3], ["c"], [{"y": "z"}]),
    ]
    every = [(pk, tools) for pk, tools, _ in step_columns(reversed(asked), chunk_size=1)]
    assert every == [(ids[0], ["a", "b", "c"]), (ids[1], ["b"]), (ids[3], ["c"])]
    runs = [(row[0], row[1], row[4]) for row in run_columns(asked, chunk_size=2)]
    assert runs == [(ids[0], "success", ["a", "b", "c"]), (ids[1], "success", ["b"]), (ids[2], "success", []),
                    (ids[3], "failure", ["c"])]  # fmt: skip
    totals = {row[0]: (row[2], row[3]) for row in run_columns(ids)}
    assert totals == {run.pk: (run.total_tokens, run.cost) for run in Run.objects.filter(pk__in=ids)}
    # The runs given as a queryset of ids (a subquery on PostgreSQL): the same columns.
    as_query = Run.objects.filter(pk__in=[ids[0], ids[1], ids[3]]).values("pk")
    assert list(step_columns(as_query, only_ok=True, chunk_size=1)) == list(step_columns(asked, only_ok=True))
    assert list(step_columns(Run.objects.none().values("pk"))) == []
    # With the missing runs: every id asked once, in ascending order, a missing run's columns empty.
    with_missing = [(row[0], row[1], row[4], row[5]) for row in run_columns(as_query, with_missing=True)]
    assert with_missing == [(ids[0], "success", ["a", "b", "c"], ANY), (ids[1], "success", ["b"], ANY),
                            (ids[3], "failure", ["c"], ANY)]  # fmt: skip
    gone = [(row[0], row[1:]) for row in run_columns([10**9, ids[2], ids[2]], with_missing=True)]
    assert gone == [(ids[2], ("success", ANY, ANY, [], [])), (10**9, (None, None, None, [], []))]
    # Read from a RawSQL query of ids, too (say, a temporary table's).
    raw = RawSQL(f"SELECT id FROM {Run._meta.db_table} WHERE outcome = %s", ["failure"])
    assert [row[0] for row in step_columns(raw)] == [ids[3]]


@pytest.mark.parametrize("order", ["ascending", "shuffled"])
def test_an_offline_replay_over_columns_stores_the_cases_and_metrics_of_replay_procedure(operator, order):
    items = [run_item(intent=REFUND, steps=[step_item("lookup_policy"), step_item("issue_refund")]) for _ in range(4)]
    items.append(run_item(intent=REFUND, outcome="failure", steps=[step_item("lookup_policy", ok=False)]))
    items.append(run_item(intent=REFUND, steps=[step_item("issue_refund", arguments={"order_id": "B"})]))
    ids = ingest(*items).created_ids
    result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=False)
    (replay,) = result.replays
    held_out = [*ids[2:], 10**9]  # a deleted run: an unanswered case
    if order == "shuffled":
        held_out = [held_out[3], held_out[0], held_out[4], held_out[1], held_out[2]]
    type(replay).objects.filter(pk=replay.pk).update(held_out_run_ids=held_out)
    replay.refresh_from_db()

    done = offline_replay_services.replay_offline_run(replay=replay)

    recorded = live_replay_services._recorded_runs(held_out)
    expected = core.replay_procedure(
        replay_services.procedure_steps(done.version),
        [core.ReplayCase(case_id=str(pk), run=recorded.get(pk)) for pk in held_out],
        mode="offline",
    )
    assert done.status == ReplayStatus.DONE
    assert done.metrics["candidate"] == expected.metrics
    assert done.report["unanswered"] == [10**9]
    stored = list(ReplayCase.objects.filter(replay=done).order_by("pk").values_list("case_run_id", "result"))
    assert [pk for pk, _ in stored] == held_out
    assert [result for _, result in stored] == [
        {**case.candidate.to_dict(), "regression": case.regression, "improvement": case.improvement}
        for case in expected.cases
    ]


def test_an_offline_replay_with_a_repeated_case_fails_with_the_reason(operator):
    ids = ingest(*[run_item(intent=REFUND) for _ in range(4)]).created_ids
    (replay,) = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=False).replays
    for held_out in ([ids[0], ids[0]], [ids[1], ids[0], ids[1]]):
        type(replay).objects.filter(pk=replay.pk).update(
            held_out_run_ids=held_out, status=ReplayStatus.QUEUED, lease_owner="", lease_expires_at=None
        )
        done = offline_replay_services.replay_offline_run(replay=replay)
        assert done.status == ReplayStatus.FAILED
        assert f"replay case '{held_out[-1] if held_out[0] == held_out[1] else ids[1]}' is repeated" in done.error


def test_spooled_case_rows_hold_exactly_the_payloads_of_the_case_rows():
    procedure = [core.ProcedureStep(tool="a", arguments={"k": 1}), core.ProcedureStep(tool="b")]
    active = [core.ProcedureStep(tool="b")]
    cases = [
        core.ReplayCase(case_id="7", run=None),
        core.ReplayCase(case_id="8", run=core.CaseRun(outcome="success", steps=[], tokens=0, cost=0.0)),
        core.ReplayCase(
            case_id="9",
            run=core.CaseRun(
                outcome="failure",
                steps=[TrajectoryStep(0, "a", "x", {"k": 1}), TrajectoryStep(1, "b", "x")],
                tokens=12,
                cost=0.1 + 0.2,
            ),
        ),
        core.ReplayCase(
            case_id="10", run=core.CaseRun(outcome="success", steps=[TrajectoryStep(0, "b", "x")], tokens=3, cost=1e-7)
        ),
    ]
    report = core.replay_procedure(procedure, cases, active=active)
    spooled = spooled_cases.SpooledCases(5)
    try:
        for case in report.cases:
            spooled.add(case)
        rows = [(row.replay_id, row.arm, row.case_run_id, row.result, row.answered) for row in spooled]
    finally:
        spooled.close()
    expected = [
        (5, row.arm, row.case_run_id, row.result, row.answered)
        for row in live_replay_services._case_rows(None, report, result_runs={})
    ]
    assert rows == expected
    assert len(rows) == 8 and rows[5][3]["cost"] == 0.1 + 0.2
