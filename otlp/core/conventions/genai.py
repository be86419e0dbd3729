"""The OpenTelemetry GenAI semantic conventions: messages as JSON in `gen_ai.input.messages` and
`gen_ai.output.messages` (on the span, or in a `gen_ai.client.inference.operation.details` event), each
`{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", "id", "name", "arguments"},
{"type": "tool_call_response", "id", "response"}]}`; pydantic-ai's run span keeps the whole conversation in the same
shape in `pydantic_ai.all_messages` (results under `result`); older emitters put `{"role", "content"}` messages in
`gen_ai.prompt`. Tool spans: `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`."""

from __future__ import annotations

import json
from typing import Any

from ..spans import SpanRecord
from .messages import Message, ToolCall, blocks_text, parsed, role_of

INPUT_KEYS = ("gen_ai.input.messages", "pydantic_ai.all_messages", "gen_ai.prompt")
OUTPUT_KEYS = ("gen_ai.output.messages",)


def messages(value: Any) -> list[Message]:
    """GenAI messages (JSON text or structured) in the common shape; a tool_call_response part becomes a "tool"
    message of its own, whatever role carried it (pydantic-ai sends results as user parts)."""
    value = parsed(value)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return [Message(role="user", text=value)] if isinstance(value, str) and value.strip() else []
    result: list[Message] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        role = role_of(item.get("role"))
        parts = item.get("parts")
        if not isinstance(parts, list):
            text = blocks_text(item.get("content"))
            calls = _openai_calls(item.get("tool_calls"))
            if text or calls:
                result.append(Message(role=role, text=text, calls=calls, call_id=str(item.get("tool_call_id") or "")))
            continue
        texts: list[str] = []
        calls = []
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
            elif kind == "tool_call":
                calls.append(ToolCall(str(part.get("id") or ""), str(part.get("name") or ""), part.get("arguments")))
            elif kind == "tool_call_response":
                response = part.get("response", part.get("result"))
                text = response if isinstance(response, str) else blocks_text(response)
                if not text and response is not None:
                    text = _json_text(response)
                result.append(Message(role="tool", text=text, call_id=str(part.get("id") or "")))
        if texts or calls:
            result.append(Message(role=role, text="\n".join(texts), calls=calls))
    return result


def _openai_calls(value: Any) -> list[ToolCall]:
    if not isinstance(value, list):
        return []
    calls = []
    for call in value:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            calls.append(
                ToolCall(str(call.get("id") or ""), str(function.get("name") or ""), function.get("arguments"))
            )
    return calls


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _value(span: SpanRecord, key: str) -> Any:
    value = span.attributes.get(key)
    return value if value is not None else (span.event_attribute(key) if span.events else None)


def input_messages(span: SpanRecord) -> list[Message]:
    for key in INPUT_KEYS:
        value = span.attributes.get(key)
        if value is not None:
            return messages(value)
    if span.events:  # strands (latest conventions) puts each batch of messages in an event of its own
        found = [m for e in span.events for m in messages(e["attributes"].get("gen_ai.input.messages"))]
        if found:
            return found
    return []


def output_messages(span: SpanRecord) -> list[Message]:
    value = _value(span, "gen_ai.output.messages")
    return messages(value) if value is not None else []


def tool_fields(span: SpanRecord) -> tuple[str, Any, Any]:
    """A tool span's call id, arguments and result (`gen_ai.tool.call.*`; "", None, None when absent)."""
    attributes = span.attributes
    call_id = attributes.get("gen_ai.tool.call.id")
    return (
        str(call_id) if call_id is not None else "",
        attributes.get("gen_ai.tool.call.arguments"),
        attributes.get("gen_ai.tool.call.result"),
    )
