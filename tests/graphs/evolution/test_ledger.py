"""A round's model calls on the ledger (issue 29): each call's row is written before the call, as every model call's
is; its reply is written with the round's checkpoint #1, the write that first uses it, instead of a commit of its own,
and by itself when the step fails before that write (the call was paid for)."""

import json

import pytest

from accounts.services import Actor
from graphs.demo import TWO_HOP_GRAPH
from graphs.evolution import services, stores
from graphs.evolution.services import evolution_start, evolution_step
from graphs.models import EvolutionRun
from graphs.services import workspace_create
from llm.core import ModelResponse, Usage
from llm.models import ModelCall

from .records import chain, revised_edge

pytestmark = pytest.mark.django_db
EDIT = revised_edge("Read the top hit before answering.")


class Refiner:
    provider = "scripted"
    model_id = "refiner-under-test"

    def __init__(self, seen=None) -> None:
        self.seen = seen

    def complete(self, request):
        if self.seen is not None:
            self.seen()
        return ModelResponse(text=json.dumps(EDIT), usage=Usage(input_tokens=300, output_tokens=40))


@pytest.fixture
def run(settings, monkeypatch):
    settings.WAYMARK_GRAPH_EVALUATORS = {"steady": "tests.graphs.evolution.evaluators.EveryRoundANewCandidate"}
    monkeypatch.setattr(services, "_enqueue_on_commit", lambda run_id, countdown=None: None)
    workspace = workspace_create(actor=Actor.system(), slug="lab", graph=TWO_HOP_GRAPH).workspace
    run = evolution_start(
        actor=Actor.system(),
        workspace=workspace,
        rounds=3,
        evaluator="steady",
        config={"cycle_policy": "allow"},
        enqueue=False,
    )
    evolution_step(run_id=run.pk, worker="w")  # the baseline
    return run


def test_the_reply_is_on_record_in_the_transaction_of_the_checkpoint_that_uses_it(run, monkeypatch):
    seen_during_the_call = []
    monkeypatch.setattr(
        services,
        "get_chat_model",
        lambda: Refiner(lambda: seen_during_the_call.extend(ModelCall.objects.values_list("status", flat=True))),
    )
    at_checkpoint = []
    save = stores.RunCheckpointStore.save

    def checkpointed(self, iteration, payload):
        save(self, iteration, payload)
        if "decision" not in payload and not payload.get("completed"):
            at_checkpoint.append(list(ModelCall.objects.values_list("status", "output_tokens")))

    monkeypatch.setattr(stores.RunCheckpointStore, "save", checkpointed)
    evolution_step(run_id=run.pk, worker="w")
    assert seen_during_the_call == ["running"]  # on record before the model is asked
    assert at_checkpoint[0] == [("succeeded", 40)]  # the reply, with checkpoint #1
    (call,) = ModelCall.objects.all()
    assert call.finished_at is not None and call.latency_ms is not None and call.response_text == json.dumps(EDIT)
    run.refresh_from_db()
    assert run.rounds.get().model_calls == 1 and run.meter["output_tokens"] == 40


def test_a_step_that_fails_after_the_reply_still_records_it(run, monkeypatch):
    monkeypatch.setattr(services, "get_chat_model", Refiner)
    checkpoints_before = len(chain(run.workspace, "checkpoints"))

    def broken(self, iteration, payload):
        raise RuntimeError("the checkpoint store is on fire")

    monkeypatch.setattr(stores.RunCheckpointStore, "save", broken)
    evolution_step(run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == (EvolutionRun.Status.FAILED, "error")
    assert len(chain(run.workspace, "checkpoints")) == checkpoints_before  # nothing of the round was written
    (call,) = ModelCall.objects.all()
    assert (call.status, call.output_tokens) == ("succeeded", 40)
    assert run.cost == 0 and call.subject_id == f"{run.pk}:1"
