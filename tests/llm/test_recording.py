from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from llm.core import ModelRequest, ModelResponse, ModelTimeout, ScriptedChatModel, ScriptExhausted, Usage
from llm.models import ModelCall
from llm.recording import RecordedChatModel
from llm.services import (
    model_call_note_rejected_output,
    model_call_start,
    model_call_succeed,
    request_digest,
)

from .factories import a_request, recorded_call

pytestmark = pytest.mark.django_db


class FailingModel:
    model_id = "claude-opus-4-6"
    provider = "anthropic"

    def __init__(self):
        self.seen = []

    def complete(self, request):
        # The row is already in the ledger, running, while the provider is being asked.
        self.seen.append(list(ModelCall.objects.values_list("status", flat=True)))
        raise ModelTimeout("claude-opus-4-6 did not answer within 60s")


def test_it_records_a_successful_call_with_tokens_cost_and_reply(operator):
    inner = ScriptedChatModel(['{"intents": []}'], model_id="scripted")
    model = RecordedChatModel(inner, "intents", subject=operator)
    response = model.complete(a_request("ignored-role", "Which intents?"))
    assert response.text == '{"intents": []}'
    call = ModelCall.objects.get()
    assert call == model.last_call
    assert call.status == ModelCall.Status.SUCCEEDED
    assert call.role == "intents"
    assert (call.model_id, call.provider) == ("scripted", "scripted")
    assert (call.input_tokens, call.output_tokens) == (response.usage.input_tokens, response.usage.output_tokens)
    assert call.cost == Decimal("0")
    assert call.response_text == '{"intents": []}'
    assert call.response_id == "scripted-1"
    assert call.stop_reason == "end_turn"
    assert call.latency_ms is not None
    assert call.finished_at >= call.started_at
    assert call.request_digest == request_digest(a_request("ignored-role", "Which intents?"), "scripted")
    assert "Which intents?" in call.request_preview
    assert (call.subject_type, call.subject_id) == ("accounts.user", str(operator.pk))


def test_it_uses_the_request_role_when_none_is_given():
    RecordedChatModel(ScriptedChatModel(["ok"])).complete(a_request("guidance"))
    assert ModelCall.objects.get().role == "guidance"


def test_it_records_a_failure_with_its_error_and_re_raises_it():
    inner = FailingModel()
    model = RecordedChatModel(inner, "refiner", subject=("graphs.workspace", 7))
    with pytest.raises(ModelTimeout):
        model.complete(a_request())
    assert inner.seen == [["running"]]
    call = ModelCall.objects.get()
    assert call.status == ModelCall.Status.FAILED
    assert call.error == "ModelTimeout: claude-opus-4-6 did not answer within 60s"
    assert call.cost is None
    assert call.finished_at is not None
    assert (call.subject_type, call.subject_id) == ("graphs.workspace", "7")


def test_an_exhausted_script_is_recorded_as_a_failed_call():
    model = RecordedChatModel(ScriptedChatModel([]), "refiner")
    with pytest.raises(ScriptExhausted):
        model.complete(a_request())
    assert ModelCall.objects.get().status == ModelCall.Status.FAILED


def test_identical_requests_share_a_digest_and_different_ones_do_not():
    same = request_digest(a_request(), "m") == request_digest(a_request(), "m")
    other_model = request_digest(a_request(), "m") != request_digest(a_request(), "n")
    other_text = request_digest(a_request(text="a"), "m") != request_digest(a_request(text="b"), "m")
    assert same and other_model and other_text


def test_a_long_request_is_kept_as_a_preview():
    long = ModelRequest(role="r", system="s", parts=("x" * 5000,), max_tokens=5)
    call = model_call_start(role="r", model_id="m", provider="anthropic", request=long)
    assert len(call.request_preview) == 2000
    assert call.request_preview.endswith("…")


def test_an_unknown_model_is_recorded_without_a_cost():
    call = recorded_call(model_id="someone-elses-model", usage=Usage(10, 10, 0))
    assert call.cost is None
    assert call.input_tokens == 10


def test_a_priced_model_gets_its_cost():
    call = recorded_call(model_id="claude-sonnet-4-6", usage=Usage(1_000_000, 0, 0))
    assert call.cost == Decimal("3.000000")


def test_it_refuses_an_unknown_provider_and_writes_nothing():
    with pytest.raises(ValueError, match="unknown model provider"):
        model_call_start(role="r", model_id="m", provider="openai", request=a_request())
    assert not ModelCall.objects.exists()


def test_a_late_reply_to_an_abandoned_call_is_still_recorded():
    call = recorded_call(outcome="running")
    ModelCall.objects.filter(pk=call.pk).update(status=ModelCall.Status.ABANDONED)  # as the reaper would
    finished = recorded_finish(call)
    assert finished.status == ModelCall.Status.SUCCEEDED


def recorded_finish(call):
    return model_call_succeed(call=call, response=ModelResponse(text="late", usage=Usage(1, 1, 0)))


def test_a_finished_call_is_not_finished_twice():
    call = recorded_call(outcome="failed")
    again = recorded_finish(call)
    assert again.status == ModelCall.Status.FAILED
    assert again.response_text == ""


def test_a_rejected_reply_keeps_its_diagnostics_on_the_call():
    call = recorded_call()
    noted = model_call_note_rejected_output(call_id=call.pk, error=RuntimeError("intents must return a JSON object"))
    assert noted.status == ModelCall.Status.SUCCEEDED
    assert noted.error == "RuntimeError: intents must return a JSON object"
    assert noted.response_text  # the reply itself is kept


@pytest.mark.django_db(transaction=True)
def test_a_model_call_cannot_be_recorded_inside_another_transaction():
    model = RecordedChatModel(ScriptedChatModel(["ok"]), "refiner")
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        model.complete(a_request())
    assert not ModelCall.objects.exists()


def test_recorded_calls_start_now():
    call = recorded_call()
    assert timezone.now() - call.started_at < timedelta(minutes=1)
