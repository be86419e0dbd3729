"""`AnthropicChatModel`: the ChatModel protocol on the official anthropic SDK (Messages API, non-streaming).

Retries with exponential backoff on 408/409/429/5xx and connection errors are the SDK's own (`max_retries`; it also
honours `retry-after`). What is left after the retries surfaces as one of the llm.core errors: ModelTimeout and
ModelUnavailable (transient; a task may retry later) or ModelRequestRejected (the request itself was refused).
No sampling parameters are sent: API version 2026-10-21, which this SDK speaks, rejects `temperature`
(docs/decisions.md).
"""

from __future__ import annotations

import anthropic

from llm.core import ModelRequest, ModelRequestRejected, ModelResponse, ModelTimeout, ModelUnavailable, Usage

TRANSIENT_STATUSES = frozenset({408, 409, 429})


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
            message = self._client.messages.create(
                model=self.model_id,
                max_tokens=request.max_tokens,
                system=request.system if request.system.strip() else anthropic.omit,
                messages=[{"role": "user", "content": content}],
            )
        except anthropic.APITimeoutError as error:
            raise ModelTimeout(
                f"{self.model_id} did not answer within {self.timeout:g}s "
                f"(after {self.max_retries} retr{'y' if self.max_retries == 1 else 'ies'})"
            ) from error
        except anthropic.APIConnectionError as error:
            raise ModelUnavailable(f"{self.model_id} could not be reached: {error}") from error
        except anthropic.APIStatusError as error:
            detail = f"{self.model_id} answered HTTP {error.status_code}: {_error_message(error)}"
            if error.status_code in TRANSIENT_STATUSES or error.status_code >= 500:
                raise ModelUnavailable(f"{detail} (after {self.max_retries} retries)") from error
            raise ModelRequestRejected(detail) from error
        return _to_response(message)


def _error_message(error: anthropic.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(error.message)


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
        model=str(message.model),
        stop_reason=message.stop_reason,
        response_id=message.id,
    )
