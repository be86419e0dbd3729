"""OpenInference (Arize Phoenix): messages flattened into attributes — `llm.input_messages.<i>.message.role`,
`….content`, `….contents.<j>.message_content.text`, `….tool_calls.<k>.tool_call.id`, `….function.name`,
`….function.arguments`, `….tool_call_id` — and the span's `input.value` / `output.value` (text or JSON, shaped by
each framework). Tool spans: the call's arguments are `input.value` (`tool.parameters` is the tool's JSON *schema*,
never the arguments); the result is `output.value`, which LangChain fills with the serialized ToolMessage
(`{"type": "tool", "data": {"content", "tool_call_id", "status"}}` or the `lc` constructor form)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from ..spans import SpanRecord
from .messages import Message, ToolCall, blocks_text, parsed, role_of

_FLAT = re.compile(r"llm\.(input|output)_messages\.(\d+)\.message\.(.+)")
_TOOL_CALL = re.compile(r"tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)")
_CONTENT = re.compile(r"contents\.(\d+)\.message_content\.(type|text)")


def _flat(attributes: dict[str, Any], side: str) -> list[Message]:
    prefix = f"llm.{side}_messages."
    fields: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        match = _FLAT.fullmatch(key)
        if match:
            fields[int(match.group(2))][match.group(3)] = value
    found = []
    for index in sorted(fields):
        message = fields[index]
        calls: dict[int, dict[str, Any]] = defaultdict(dict)
        contents: dict[int, dict[str, Any]] = defaultdict(dict)
        for key, value in message.items():
            if match := _TOOL_CALL.fullmatch(key):
                calls[int(match.group(1))][match.group(2)] = value
            elif match := _CONTENT.fullmatch(key):
                contents[int(match.group(1))][match.group(2)] = value
        text = message.get("content")
        if not isinstance(text, str):
            text = "\n".join(
                c["text"]
                for _, c in sorted(contents.items())
                if c.get("type", "text") == "text" and isinstance(c.get("text"), str)
            )
        found.append(
            Message(
                role=role_of(message.get("role")),
                text=text,
                calls=[
                    ToolCall(str(c.get("id") or ""), str(c.get("function.name") or ""), c.get("function.arguments"))
                    for _, c in sorted(calls.items())
                ],
                call_id=str(message.get("tool_call_id") or ""),
            )
        )
    return found


def _has(attributes: dict[str, Any], side: str) -> bool:
    return f"llm.{side}_messages.0.message.role" in attributes


def value_messages(value: Any) -> list[Message]:
    """Messages in an `input.value`: plain text (the user's), a list of `{"role", "content"}` (OpenAI style, the
    Responses API's input items), LangGraph's `{"messages": [["user", "…"], …]}` or `{"messages": [{"type": "human",
    "data": {"content": …}}]}`, or `{"input": "…"}`."""
    value = parsed(value)
    if isinstance(value, str):
        return [Message(role="user", text=value)] if value.strip() else []
    if isinstance(value, dict):
        for key in ("messages", "input", "query", "question", "task"):
            if key in value:
                inner = value[key]
                if isinstance(inner, list) and inner and isinstance(inner[0], list) and key == "messages":
                    inner = [m for batch in inner for m in (batch if isinstance(batch[0], list | dict) else [batch])]
                return value_messages(inner)
        return []
    if not isinstance(value, list):
        return []
    found = []
    for item in value:
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
            found.append(Message(role=role_of(item[0]), text=blocks_text(item[1])))
        elif isinstance(item, dict):
            data = item.get("data") if isinstance(item.get("data"), dict) else item.get("kwargs")
            if isinstance(data, dict) and "content" in data:  # a serialized LangChain message
                found.append(
                    Message(role=role_of(item.get("type") or data.get("type")), text=blocks_text(data["content"]))
                )
            elif "role" in item:
                found.append(Message(role=role_of(item["role"]), text=blocks_text(item.get("content"))))
        elif isinstance(item, str) and item.strip():
            found.append(Message(role="user", text=item))
    return found


def input_messages(span: SpanRecord) -> list[Message]:
    attributes = span.attributes
    if _has(attributes, "input"):
        return _flat(attributes, "input")
    value = attributes.get("input.value")
    return value_messages(value) if value is not None else []


def output_messages(span: SpanRecord) -> list[Message]:
    return _flat(span.attributes, "output") if _has(span.attributes, "output") else []


def tool_message(value: Any) -> dict[str, Any] | None:
    """A serialized LangChain ToolMessage's fields (content, tool_call_id, status), else None."""
    value = parsed(value)
    if not isinstance(value, dict):
        return None
    if value.get("type") == "tool" and isinstance(value.get("data"), dict):
        return value["data"]
    if value.get("type") == "constructor" and isinstance(value.get("kwargs"), dict):
        ids = value.get("id")
        if isinstance(ids, list) and ids and ids[-1] == "ToolMessage":
            return value["kwargs"]
    if value.get("type") == "tool" and "content" in value and "tool_call_id" in value:
        return value
    return None


def tool_fields(span: SpanRecord) -> tuple[str, Any, Any, bool]:
    """A TOOL span's call id, arguments (`input.value`), result text (the ToolMessage's content when the output is
    one) and whether the result says error."""
    attributes = span.attributes
    output = attributes.get("output.value")
    message = tool_message(output) if output is not None else None
    if message is None:
        return "", attributes.get("input.value"), output, False
    content = message.get("content")
    text = content if isinstance(content, str) else blocks_text(content)
    return str(message.get("tool_call_id") or ""), attributes.get("input.value"), text, message.get("status") == "error"
