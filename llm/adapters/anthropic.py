"""`AnthropicChatModel`: the ChatModel protocol on the official anthropic SDK (Messages API, non-streaming).

Retries with exponential backoff on 408/409/429/5xx and connection errors are the SDK's own (`max_retries`; it also
honours `retry-after`). What is left after the retries surfaces as one of the llm.core errors: ModelTimeout and
ModelUnavailable (transient; a task may retry later) or ModelRequestRejected (the request itself was refused).
A 2xx that is not a Messages reply (an HTML page, malformed JSON, another JSON shape) is ModelReplyInvalid
(transient, a ModelUnavailable); a reply that is not a whole answer (cut at max_tokens, refused, no text) is
ModelReplyIncomplete. Each carries its diagnostics and what came back, for the ledger; neither is ever returned as
a reply. The SDK reads ANTHROPIC_BASE_URL from the environment (a proxy or a local stand-in for the provider).
No sampling parameters are sent: API version 2026-10-21, which this SDK speaks, rejects `temperature`
(docs/decisions.md).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from llm.core import (
    ModelReplyIncomplete,
    ModelReplyInvalid,
    ModelRequest,
    ModelRequestRejected,
    ModelResponse,
    ModelTimeout,
    ModelUnavailable,
    Usage,
)

TRANSIENT_STATUSES = frozenset({408, 409, 429})
# How a reply may end and still be a whole answer; anything else (max_tokens, refusal, …) falls short of one.
ANSWERED = frozenset({"end_turn", "stop_sequence"})
BODY_KEPT_CHARS = 100_000  # of a body that is not a reply, kept in the ledger


class AnthropicChatModel:
    provider = "anthropic"

    def __init__(
        self,
        model_id: str,
        api_key: str,
        timeout: float = 60.0,
        max_retries: int = 3,
        client: anthropic.Anthropic | None = None,
    ) -> None:
        if not model_id:
            raise ValueError("AnthropicChatModel needs a model id")
        if client is None:
            if not api_key:
                raise ValueError("AnthropicChatModel needs an API key")
            client = anthropic.Anthropic(api_key=api_key, timeout=timeout, max_retries=max_retries)
        else:
            client = client.with_options(timeout=timeout, max_retries=max_retries)
        self.model_id = model_id
        self.timeout = timeout
        self.max_retries = max_retries
        self._client = client

    def complete(self, request: ModelRequest) -> ModelResponse:
        content = [{"type": "text", "text": part} for part in request.text_parts]
        try:
            raw = self._client.messages.with_raw_response.create(
                model=self.model_id,
                max_tokens=request.max_tokens,
                system=request.system if request.system.strip() else anthropic.omit,
                messages=[{"role": "user", "content": content}],
            )
        except anthropic.APITimeoutError as error:
            raise ModelTimeout(
                f"{self.model_id} did not answer within {self.timeout:g}s "
                f"(after {self.max_retries} retr{'y' if self.max_retries == 1 else 'ies'})",
                diagnostics={"kind": "timeout", "timeout_seconds": self.timeout, "attempts": self.max_retries + 1},
            ) from error
        except anthropic.APIConnectionError as error:
            raise ModelUnavailable(
                f"{self.model_id} could not be reached: {error}", diagnostics={"kind": "unreachable"}
            ) from error
        except anthropic.APIStatusError as error:
            detail = f"{self.model_id} answered HTTP {error.status_code}: {_error_message(error)}"
            diagnostics = _status_diagnostics(error)
            if error.status_code in TRANSIENT_STATUSES or error.status_code >= 500:
                retries = diagnostics["attempts"] - 1
                raise ModelUnavailable(f"{detail} (after {retries} retries)", diagnostics=diagnostics) from error
            raise ModelRequestRejected(detail, diagnostics=diagnostics) from error
        return self._reply(raw, request)

    def _reply(self, raw: Any, request: ModelRequest) -> ModelResponse:
        """The Messages reply in `raw`, or ModelReplyInvalid / ModelReplyIncomplete with what was seen."""
        http = raw.http_response
        content_type = http.headers.get("content-type", "").split(";")[0].strip()
        body = http.text
        seen = {
            "http_status": http.status_code,
            "content_type": content_type,
            "request_id": http.headers.get("request-id", ""),
            "body_chars": len(body),
        }
        kept = ModelResponse(text=body[:BODY_KEPT_CHARS], model=self.model_id)
        where = f"{self.model_id} answered HTTP {http.status_code} with {content_type or 'no content type'}"
        try:
            message = raw.parse()
        except (json.JSONDecodeError, anthropic.APIResponseValidationError) as error:
            diagnostics = {"kind": "not_json", **seen, "detail": str(error)[:300]}
            raise ModelReplyInvalid(
                f"{where}, not valid JSON: {error}", diagnostics=diagnostics, partial=kept
            ) from None
        if not _is_message(message):
            kind = "html" if "html" in content_type or body.lstrip().startswith("<") else "not_a_message"
            raise ModelReplyInvalid(f"{where}, not a Messages reply", diagnostics={"kind": kind, **seen}, partial=kept)
        response = _to_response(message)
        ending = response.stop_reason
        if ending in ANSWERED and response.text.strip():
            return response
        kind = "empty" if ending in ANSWERED else str(ending)
        diagnostics = {
            "kind": kind,
            "stop_reason": ending,
            "max_tokens": request.max_tokens,
            "output_tokens": response.usage.output_tokens,
        }
        if kind == "empty":
            reason = "a reply with no text"
        elif ending == "max_tokens":
            reason = f"a reply cut at max_tokens ({request.max_tokens})"
        else:
            reason = f"a reply that ended with stop_reason {ending!r}, short of an answer"
        raise ModelReplyIncomplete(
            f"{self.model_id} sent {reason} ({response.usage.output_tokens} output tokens)",
            diagnostics=diagnostics,
            partial=response,
        )


def _is_message(message: Any) -> bool:
    """Whether the SDK's parse is a Messages reply: the SDK hands back a str for a body that is not JSON, and an
    object with every field None for JSON of another shape."""
    return (
        isinstance(message, anthropic.types.Message)
        and message.type == "message"
        and isinstance(message.content, list)
        and message.usage is not None
    )


def _error_message(error: anthropic.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(error.message)


def _status_diagnostics(error: anthropic.APIStatusError) -> dict[str, Any]:
    """The HTTP error as the ledger keeps it: status, the provider's error type, request id, the attempts the SDK
    made (it stamps each request with its retry count) and the provider's Retry-After in seconds when it sent one."""
    response = error.response
    body = error.body
    inner = body.get("error") if isinstance(body, dict) else None
    retry_count = response.request.headers.get("x-stainless-retry-count", "0")
    diagnostics: dict[str, Any] = {
        "kind": "http_error",
        "http_status": error.status_code,
        "error_type": str(inner.get("type", "")) if isinstance(inner, dict) else "",
        "request_id": response.headers.get("request-id", ""),
        "attempts": int(retry_count) + 1 if retry_count.isdigit() else 1,
    }
    retry_after = response.headers.get("retry-after", "")
    if retry_after.isdigit():
        diagnostics["retry_after"] = int(retry_after)
    return diagnostics


def _to_response(message) -> ModelResponse:
    text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
    usage = message.usage
    cache_writes = getattr(usage, "cache_creation_input_tokens", None) or 0
    cache_reads = getattr(usage, "cache_read_input_tokens", None) or 0
    return ModelResponse(
        text=text,
        usage=Usage(
            input_tokens=(usage.input_tokens or 0) + cache_writes,
            output_tokens=usage.output_tokens or 0,
            cached_input_tokens=cache_reads,
        ),
        model=str(message.model or ""),
        stop_reason=message.stop_reason,
        response_id=message.id or "",
    )
