"""strands-agents' default spans (GenAI conventions before `gen_ai_latest_experimental`): the messages travel in
span events, their content as Bedrock-style blocks — `[{"text": …}]`, `[{"toolUse": {"toolUseId", "name",
"input"}}]`, `[{"toolResult": {"toolUseId", "status", "content": [{"text": …}]}}]`:

- model and agent spans: `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
  `gen_ai.tool.message` events (`content`) for the input, `gen_ai.choice` (`message`) for the output;
- tool spans (`execute_tool …`): a `gen_ai.tool.message` event whose `content` is the call's arguments (JSON) and
  `id` the call id, a `gen_ai.choice` event whose `message` is the result blocks; `gen_ai.tool.status` says
  success or error.
"""

from __future__ import annotations

from typing import Any

from ..spans import SpanRecord
from .messages import Message, ToolCall, blocks_text, parsed

_INPUT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _content_messages(role: str, content: Any) -> list[Message]:
    content = parsed(content)
    if not isinstance(content, list):
        text = blocks_text(content)
        return [Message(role=role, text=text)] if text else []
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        use = block.get("toolUse")
        if isinstance(use, dict):
            calls.append(ToolCall(str(use.get("toolUseId") or ""), str(use.get("name") or ""), use.get("input")))
        result = block.get("toolResult")
        if isinstance(result, dict):
            results.append(
                Message(
                    role="tool",
                    text=blocks_text(result.get("content")),
                    call_id=str(result.get("toolUseId") or ""),
                    error=result.get("status") == "error",
                )
            )
    own = [Message(role=role, text="\n".join(texts), calls=calls)] if texts or calls else []
    return own + results


def input_messages(span: SpanRecord) -> list[Message]:
    found: list[Message] = []
    for event in span.events:
        role = _INPUT_EVENTS.get(event["name"])
        if role is not None:
            found += _content_messages(role, event["attributes"].get("content"))
    return found


def output_messages(span: SpanRecord) -> list[Message]:
    found: list[Message] = []
    for event in span.events:
        if event["name"] == "gen_ai.choice":
            found += _content_messages("assistant", event["attributes"].get("message"))
    return found


def tool_fields(span: SpanRecord) -> tuple[str, Any, Any]:
    """The call id, arguments and result of a strands tool span, from its events ("", None, None when absent)."""
    call_id, arguments, result = "", None, None
    for event in span.events:
        attrs = event["attributes"]
        if event["name"] == "gen_ai.tool.message":
            arguments = attrs.get("content", arguments)
            call_id = str(attrs.get("id") or call_id)
        elif event["name"] == "gen_ai.choice":
            message = attrs.get("message")
            result = blocks_text(message) if message is not None else result
            call_id = call_id or str(attrs.get("id") or "")
    return call_id, arguments, result
