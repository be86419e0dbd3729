"""`RecordedChatModel`: wraps any ChatModel and records every call in the ModelCall ledger."""

from __future__ import annotations

import time

from llm.core import ChatModel, ModelRequest, ModelResponse

from .models import ModelCall
from .services import Subject, model_call_fail, model_call_start, model_call_succeed


class RecordedChatModel:
    """A ChatModel that writes a `running` row before each call and finishes it after (failures too, re-raised).

    `role` overrides the request's role in the ledger when given; `subject` (a model instance or a (type, id)
    pair) names what caused the calls, e.g. a workspace. `last_call` is the row of the latest call.
    """

    def __init__(self, inner: ChatModel, role: str | None = None, *, subject: Subject = None) -> None:
        self.inner = inner
        self.role = role
        self.subject = subject
        self.last_call: ModelCall | None = None

    @property
    def model_id(self) -> str:
        return getattr(self.inner, "model_id", "") or type(self.inner).__name__

    @property
    def provider(self) -> str:
        provider = getattr(self.inner, "provider", ModelCall.Provider.SCRIPTED)
        return provider if provider in ModelCall.Provider.values else ModelCall.Provider.SCRIPTED

    def complete(self, request: ModelRequest) -> ModelResponse:
        call = model_call_start(
            role=self.role or request.role,
            model_id=self.model_id,
            provider=self.provider,
            request=request,
            subject=self.subject,
        )
        self.last_call = call
        started = time.monotonic()
        try:
            response = self.inner.complete(request)
        except Exception as error:
            self.last_call = model_call_fail(call=call, error=error, latency_ms=_elapsed_ms(started))
            raise
        self.last_call = self.record_reply(call, response, _elapsed_ms(started))
        return response

    def record_reply(self, call: ModelCall, response: ModelResponse, latency_ms: int) -> ModelCall:
        """Finish the call's row with the reply (its own durable transaction; a subclass may write it later)."""
        return model_call_succeed(call=call, response=response, latency_ms=latency_ms)


def _elapsed_ms(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))
