"""The shape every convention's messages are read into, and the value helpers the readers share."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ToolCall:
    """A tool call a model asked for: its id (may be ""), the tool, the arguments as given (parsed JSON or text)."""

    id: str
    name: str
    arguments: Any


@dataclass(slots=True)
class Message:
    """One message: role "system", "user", "assistant" or "tool". A tool result is a "tool" message whose `call_id`
    names the call it answers; `error` is set when the framework marked the result as an error."""

    role: str
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str = ""
    error: bool = False


ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "model": "assistant"}
ROLES |= {"system": "system", "developer": "system", "tool": "tool", "function": "tool", "ipython": "tool"}


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parsed(value: Any) -> Any:
    """JSON text (an object or an array) as its value; anything else as it is."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:  # raw_decode: `stripped` has no whitespace around it left for decode() to skip
                result, end = _DECODER.raw_decode(stripped)
            except (ValueError, RecursionError):
                return value
            return result if end == len(stripped) else value  # trailing data: not JSON text
    return value


def role_of(value: Any) -> str:
    return ROLES.get(value.strip().lower(), value.strip().lower()) if isinstance(value, str) else ""


def blocks_text(value: Any) -> str:
    """The text of message content: a string as it is; content blocks (`[{"text": …}]`, `[{"type": "text", "text"
    or "content": …}]`) as their texts joined by newlines; JSON text of blocks parsed first. Else ""."""
    value = parsed(value)
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return ""
    texts = []
    for block in value:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type", "text") in ("text", "output_text", "input_text"):
            text = block.get("text", block.get("content"))
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts)


def first_user_text(messages: list[Message]) -> str:
    return next((m.text for m in messages if m.role == "user" and m.text.strip()), "")
