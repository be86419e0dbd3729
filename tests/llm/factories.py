"""ModelCall rows for page and reaper tests, made the way the app makes them: through the services."""

from __future__ import annotations

from datetime import datetime

from llm.core import ModelRequest, ModelResponse, Usage
from llm.models import ModelCall
from llm.services import model_call_fail, model_call_start, model_call_succeed


def a_request(role: str = "refiner", text: str = "Propose edits for the graph.") -> ModelRequest:
    return ModelRequest(role=role, system="You refine procedural graphs.", parts=(text,), max_tokens=512)


def recorded_call(
    *,
    role: str = "refiner",
    model_id: str = "claude-sonnet-4-6",
    provider: str = "anthropic",
    outcome: str = "succeeded",
    usage: Usage | None = None,
    started_at: datetime | None = None,
    subject=None,
) -> ModelCall:
    call = model_call_start(role=role, model_id=model_id, provider=provider, request=a_request(role), subject=subject)
    if started_at is not None:
        ModelCall.objects.filter(pk=call.pk).update(started_at=started_at)  # test set-up: back-date the call
        call.refresh_from_db()
    if outcome == "succeeded":
        response = ModelResponse(text='{"add_nodes": []}', usage=usage or Usage(1000, 200, 0), model=model_id)
        return model_call_succeed(call=call, response=response, latency_ms=1234)
    if outcome == "failed":
        return model_call_fail(call=call, error=TimeoutError("no answer"), latency_ms=60000)
    return call
