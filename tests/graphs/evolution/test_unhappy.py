"""Runs that go wrong are recorded with their reason and leave nothing half-written: an evaluator that fails, a model
that replies garbage or refuses, a budget that runs out, an operator who cancels."""

import json

import pytest

from accounts.services import Actor
from graphs.core.twohop import ROUND_1_BUILD, SCRIPTED_REPLIES
from graphs.evolution.demo import run_inline
from graphs.evolution.services import EvolutionRefused, evolution_cancel, evolution_start, evolution_step
from graphs.models import EvolutionRun, Revision
from graphs.services import workspace_create
from llm.core import ModelRequestRejected
from llm.models import ModelCall

pytestmark = pytest.mark.django_db
TASK = "two-hop question answering over a small corpus"
EVALUATORS = {
    "exploding": "tests.graphs.evolution.evaluators.Exploding",
    "cancelling": "tests.graphs.evolution.evaluators.CancelsDuringEvaluation",
}


@pytest.fixture
def lab(settings):
    settings.WAYMARK_GRAPH_EVALUATORS = EVALUATORS
    return workspace_create(actor=Actor.system(), slug="lab", task_description=TASK).workspace


def start(workspace, operator, **options):
    options.setdefault("rounds", 4)
    options.setdefault("evaluator", "two-hop")
    return evolution_start(actor=Actor(user=operator), workspace=workspace, enqueue=False, **options)


def chain_lengths(workspace):
    return {kind: Revision.objects.filter(workspace=workspace, kind=kind).count() for kind in ("graph", "rejections")}


def test_an_evaluator_that_fails_fails_the_run_with_its_reason_and_records_no_round(lab, operator):
    run = run_inline(start(lab, operator, evaluator="exploding", script=[ROUND_1_BUILD]))
    assert (run.status, run.stopped_reason) == ("failed", "error")
    assert "the evaluation cluster is on fire" in run.error
    assert run.baseline_score == 0.5
    assert chain_lengths(lab) == {"graph": 1, "rejections": 0}
    assert run.rounds.count() == 0


def test_a_garbage_reply_is_a_recorded_structural_failure_with_its_diagnostics(lab, operator):
    run = run_inline(start(lab, operator, rounds=1, script=["I would rather not answer in JSON."]))
    assert run.status == "succeeded", run.error
    (round_,) = run.rounds.all()
    assert round_.outcome == "structural_failure"
    assert [d["code"] for d in round_.diagnostics] == ["malformed_edit"]
    call = ModelCall.objects.get(role="refiner")
    assert call.response_text == "I would rather not answer in JSON."
    assert chain_lengths(lab) == {"graph": 1, "rejections": 1}


def test_a_model_that_refuses_the_request_fails_the_run(lab, operator, monkeypatch):
    from llm.core import ScriptedChatModel

    def refuse(self, request):
        raise ModelRequestRejected("400: prompt is too long")

    monkeypatch.setattr(ScriptedChatModel, "complete", refuse)
    run = run_inline(start(lab, operator))
    assert run.status == "failed" and "prompt is too long" in run.error
    assert chain_lengths(lab) == {"graph": 1, "rejections": 0}
    assert ModelCall.objects.get(role="refiner").status == "failed"


def test_an_exhausted_budget_stops_before_the_evaluation_it_cannot_pay_for(lab, operator):
    run = run_inline(start(lab, operator, budget={"max_evaluations": 2}))
    assert (run.status, run.stopped_reason) == ("budget_exhausted", "budget_exhausted")
    assert list(run.rounds.values_list("outcome", flat=True)) == ["accepted", "structural_failure"]
    assert run.meter["evaluations"] == 2
    assert chain_lengths(lab) == {"graph": 2, "rejections": 2}


def test_a_budget_exhausted_at_the_baseline_leaves_the_chains_untouched(lab, operator):
    run = run_inline(start(lab, operator, budget={"max_evaluations": 0}))
    assert run.status == "budget_exhausted" and run.baseline is None
    assert chain_lengths(lab) == {"graph": 1, "rejections": 0}


def test_a_model_call_budget_stops_before_the_call(lab, operator):
    run = run_inline(start(lab, operator, budget={"max_model_calls": 2}))
    assert run.status == "budget_exhausted"
    assert run.rounds.count() == 2
    assert ModelCall.objects.filter(role="refiner").count() == 2


def test_cancelling_between_steps_stops_the_run_and_keeps_its_rounds(lab, operator):
    run = start(lab, operator)
    evolution_step(run_id=run.pk, worker="w")  # baseline
    evolution_step(run_id=run.pk, worker="w")  # round 1
    cancelled = evolution_cancel(actor=Actor(user=operator), run=run)
    assert cancelled.status == "cancelled" and cancelled.finished_at is not None
    assert evolution_step(run_id=run.pk, worker="w") is None
    assert run.rounds.count() == 1 and chain_lengths(lab) == {"graph": 2, "rejections": 1}
    with pytest.raises(EvolutionRefused, match="has ended"):
        evolution_cancel(actor=Actor(user=operator), run=run)


def test_cancelling_during_a_stage_stops_at_the_next_stage_and_keeps_what_was_recorded(lab, operator):
    run = run_inline(start(lab, operator, evaluator="cancelling", script=list(SCRIPTED_REPLIES)))
    assert (run.status, run.stopped_reason) == ("cancelled", "cancelled")
    # The cancel came while round 1 was measured: the round ends and is recorded, round 2 never starts.
    assert list(run.rounds.values_list("outcome", flat=True)) == ["accepted"]
    assert chain_lengths(lab) == {"graph": 2, "rejections": 1}
    assert ModelCall.objects.filter(role="refiner").count() == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rounds": 0}, "rounds must be"),
        ({"rounds": 51}, "rounds must be"),
        ({"evaluator": "nope"}, "unknown evaluator"),
        ({"gate": {"kind": "vibes"}}, "unknown gate"),
        ({"gate": {"kind": "paired", "min_win_probability": 2}}, "min_win_probability"),
        ({"budget": {"max_model_calls": -1}}, "max_model_calls"),
        ({"config": {"cycle_policy": "sometimes"}}, "cycle_policy"),
        ({"config": {"shell": "rm -rf /"}}, "unknown evolution settings"),
        ({"config": {"role_retries": "1"}}, "role_retries must be"),
    ],
)
def test_a_bad_start_is_refused_with_a_reason_and_starts_nothing(lab, operator, options, message):
    with pytest.raises(EvolutionRefused, match=message):
        start(lab, operator, **options)
    assert EvolutionRun.objects.count() == 0


def test_a_second_open_run_on_the_same_workspace_is_refused(lab, operator):
    start(lab, operator)
    with pytest.raises(EvolutionRefused, match="in progress"):
        start(lab, operator)
    assert EvolutionRun.objects.count() == 1


def test_a_garbage_budget_document_is_refused(lab, operator):
    with pytest.raises(EvolutionRefused):
        start(lab, operator, budget={"max_seconds": json.loads("1e999")})
