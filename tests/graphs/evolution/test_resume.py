"""Resume equals no crash (issue 30): a step that dies at any point and is run again once its lease runs out ends the
run with the decisions, scores and chains of the same run without the crash. In process: the worker's death is an
exception no handler catches, raised once at a chosen point; the fault test in test_worker.py does it with SIGKILL."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import Actor
from graphs.core.twohop import ROUND_3_DROP_SECOND_HOP, TwoHopEnvironment
from graphs.evolution import services, stores
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_cancel, evolution_start
from graphs.models import EvolutionRun, Workspace
from graphs.services import workspace_create
from tests.helpers.evolution_crashes import (
    WorkerDied,
    always,
    assert_ledger_of_the_scenario,
    die_once,
    recording,
    run_through_one_crash,
)

from .records import run_record

pytestmark = pytest.mark.django_db
TASK = "two-hop question answering over a small corpus"


@pytest.fixture
def evaluations(monkeypatch):
    """The purpose:iteration of every evaluation the two-hop environment completes."""
    done: list[str] = []
    original = TwoHopEnvironment.evaluate

    def counted(self, ref, graph, *, iteration, purpose):
        evaluation = original(self, ref, graph, iteration=iteration, purpose=purpose)
        done.append(f"{purpose}:{iteration}")
        return evaluation

    monkeypatch.setattr(TwoHopEnvironment, "evaluate", counted)
    return done


def start(slug: str, operator, **options) -> EvolutionRun:
    """A two-hop run (four rounds unless told) on a new workspace."""
    workspace_create(actor=Actor.system(), slug=slug, task_description=TASK)
    return start_on(slug, operator, **options)


def start_on(slug: str, operator, **options) -> EvolutionRun:
    options.setdefault("rounds", 4)
    workspace = Workspace.objects.get(slug=slug)
    return evolution_start(
        actor=Actor(user=operator), workspace=workspace, evaluator="two-hop", enqueue=False, **options
    )


def test_it_rejects_round_3_after_the_worker_died_right_after_round_1_was_recorded(operator, monkeypatch):
    control = run_inline(start("control", operator))
    die_once(monkeypatch, stores.RunRejectionStore, "save", when=recording(1))

    run = run_through_one_crash(start("lab", operator))

    outcomes = list(run.rounds.order_by("iteration").values_list("outcome", "retained_score", "candidate_score"))
    assert outcomes == [
        ("accepted", 0.5, 1.0),
        ("structural_failure", None, None),
        ("rejected", 1.0, 0.5),
        ("duplicate_candidate", None, None),
    ]
    assert (run.baseline_score, run.best_score) == (0.5, 1.0)
    assert run_record(run) == run_record(control)
    assert_ledger_of_the_scenario(run)


@pytest.mark.parametrize(
    ("options", "owner", "name", "before", "when"),
    [
        pytest.param({}, services, "_settle", True, always, id="after-the-baseline-was-measured"),
        pytest.param(
            {"budget": {"max_evaluations": 2}},
            stores.RunGraphStore,
            "accept",
            False,
            always,
            id="after-round-1-was-accepted-on-a-budget-of-two-evaluations",
        ),
        pytest.param(
            {"config": {"max_rejected_streak": 2}},
            stores.RunRejectionStore,
            "save",
            False,
            recording(3),
            id="after-the-round-that-reached-the-rejected-streak-was-recorded",
        ),
        pytest.param({}, stores.RunRejectionStore, "save", False, recording(4), id="after-the-last-round-was-recorded"),
        pytest.param(
            {"rounds": 1, "gate": {"kind": "tie", "perfect": 1.0}},
            stores.RunRejectionStore,
            "save",
            False,
            recording(1),
            id="after-a-last-round-that-reached-a-perfect-score-was-recorded",
        ),
        pytest.param({}, services, "_end", True, always, id="while-the-run-was-being-ended"),
    ],
)
def test_it_ends_a_run_whose_worker_died_as_the_same_run_without_the_crash(
    operator, monkeypatch, evaluations, options, owner, name, before, when
):
    control = run_inline(start("control", operator, **options))
    control_evaluations = list(evaluations)
    evaluations.clear()
    die_once(monkeypatch, owner, name, before=before, when=when)

    run = run_through_one_crash(start("lab", operator, **options))

    assert run_record(run) == run_record(control)
    assert evaluations == control_evaluations, "an evaluation was made again after the crash"


def a_perfect_head_with_a_pending_round(slug: str, operator, monkeypatch) -> None:
    """A workspace whose head scores 1.0 (round 1 built it) and whose round 2 is pending: an earlier run got the
    refiner's reply (drop the second hop) and died before measuring it, and was cancelled."""
    run_inline(start(slug, operator, rounds=1))
    die_once(monkeypatch, services.RunHooks, "stage", before=True, when=lambda hooks, name: name == "validation:2")
    died = start_on(slug, operator, script=[ROUND_3_DROP_SECOND_HOP], rounds=1)
    with pytest.raises(WorkerDied):
        run_inline(died)
    EvolutionRun.objects.filter(pk=died.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    evolution_cancel(actor=Actor(user=operator), run=died)


def test_it_ends_with_the_gate_stop_the_last_round_called_for_when_the_worker_died_after_recording_it(
    operator, monkeypatch
):
    perfect_gate = {"kind": "tie", "perfect": 1.0}
    a_perfect_head_with_a_pending_round("control", operator, monkeypatch)
    control = run_inline(start_on("control", operator, gate=perfect_gate, rounds=3))
    assert (control.status, control.stopped_reason) == ("succeeded", "gate_stop")
    a_perfect_head_with_a_pending_round("lab", operator, monkeypatch)
    die_once(monkeypatch, stores.RunRejectionStore, "save", when=recording(2))

    run = run_through_one_crash(start_on("lab", operator, gate=perfect_gate, rounds=3))

    assert list(run.rounds.values_list("outcome", flat=True)) == ["rejected"]
    assert run_record(run) == run_record(control)
