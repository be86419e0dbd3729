"""A run's steps: from its tool spans (any convention), or — when the trace has model calls but no tool span — from
the tool calls the models asked for in their output messages, with each result taken from the later call whose
input carries it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .conventions import genai, openinference, strands
from .conventions.messages import Message, ToolCall, blocks_text, parsed
from .spans import STATUS_ERROR, SpanRecord, clean_text
from .values import ARGUMENTS_MAX_DEPTH, as_text, bounded, first, moment

MAX_TOOL_CHARS = 200
MAX_ERROR_CHARS = 2000
UNKNOWN_TOOL = "unknown_tool"
TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name")


def input_messages(span: SpanRecord) -> list[Message]:
    """A span's input messages in whichever convention it uses."""
    return genai.input_messages(span) or openinference.input_messages(span) or strands.input_messages(span)


def output_messages(span: SpanRecord) -> list[Message]:
    return genai.output_messages(span) or openinference.output_messages(span) or strands.output_messages(span)


@dataclass
class CallIndex:
    """The tool calls the model calls asked for, in order, and the tool results later calls were sent; built once,
    only when a step needs it (a tool span without usable arguments, or a trace without tool spans)."""

    calls: list[tuple[ToolCall, SpanRecord]] = field(default_factory=list)
    results: dict[str, Message] = field(default_factory=dict)

    @classmethod
    def of(cls, models: list[SpanRecord]) -> CallIndex:
        index = cls()
        seen: set[str] = set()
        for model in models:
            for message in input_messages(model):
                if message.role == "tool" and message.call_id:
                    index.results.setdefault(message.call_id, message)
            for message in output_messages(model):
                for call in message.calls:
                    if call.id and call.id in seen:
                        continue
                    seen.add(call.id)
                    index.calls.append((call, model))
        return index

    def match(self, name: str, call_id: str, nth: int) -> ToolCall | None:
        """The call with `call_id`, else the `nth` (from 0) call of the tool `name`."""
        if call_id:
            found = next((c for c, _ in self.calls if c.id == call_id), None)
            if found is not None:
                return found
        named = [c for c, _ in self.calls if c.name == name]
        return named[nth] if nth < len(named) else None


class LazyCallIndex:
    """The CallIndex of `models`, built on the first match asked of it: a tool span whose own arguments turn out
    usable (strands-agents' events, after `_needs_calls` could not tell) never pays for reading every model call's
    messages."""

    def __init__(self, models: list[SpanRecord]) -> None:
        self._models = models
        self._index: CallIndex | None = None

    def match(self, name: str, call_id: str, nth: int) -> ToolCall | None:
        if self._index is None:
            self._index = CallIndex.of(self._models)
        return self._index.match(name, call_id, nth)


def tool_name(span: SpanRecord) -> str:
    name = first(span.attributes, TOOL_NAME_KEYS)
    if not isinstance(name, str) or not name.strip():
        name = span.name.removeprefix("execute_tool").strip()
    return _name(name)


def _name(name: str) -> str:
    name = clean_text(name).strip()[:MAX_TOOL_CHARS].strip()
    return name or UNKNOWN_TOOL


def _plainly_shallow(text: Any) -> bool:
    """JSON text that cannot nest deeper than the arguments' bound nor hold an escape (NUL, a lone surrogate): its
    parsed value needs no cutting or cleaning. Counting brackets over-estimates the depth, never under-estimates it."""
    return isinstance(text, str) and "\\u" not in text and text.count("{") + text.count("[") < ARGUMENTS_MAX_DEPTH


def arguments_object(raw: Any) -> dict[str, Any] | None:
    """Arguments that are a JSON object (text or structured), bounded; None when they are not an object."""
    value = parsed(raw)
    if not isinstance(value, dict):
        return None
    if _plainly_shallow(raw):
        return value
    return bounded(value, depth=ARGUMENTS_MAX_DEPTH)


def _bare(raw: Any) -> dict[str, Any]:
    value = parsed(raw)
    if value is None or value == "":
        return {}
    return bounded({"value": value}, depth=ARGUMENTS_MAX_DEPTH)


def result_text(value: Any) -> str:
    """A tool result as text: a string as it is, unless it is JSON content blocks (`[{"text": …}]`, strands), which
    become their texts; a structured value as JSON text."""
    if value is None:
        return ""
    blocks = parsed(value)
    if isinstance(blocks, list) and blocks and all(isinstance(b, dict) and "text" in b for b in blocks):
        return blocks_text(blocks)
    if isinstance(value, str):
        return value
    return as_text(bounded(value, depth=ARGUMENTS_MAX_DEPTH))


def error_text(span: SpanRecord) -> str:
    """What went wrong in a span: its first `exception` event ("Type: message"), else the first line of its status
    message, else its `error.type`; "" when nothing says."""
    for event in span.events:
        if event["name"] == "exception":
            attrs = event["attributes"]
            kind, message = attrs.get("exception.type"), attrs.get("exception.message")
            text = ": ".join(str(part) for part in (kind, message) if part not in (None, ""))
            if text:
                return text[:MAX_ERROR_CHARS]
    if span.status_message:
        return span.status_message.strip().splitlines()[0][:MAX_ERROR_CHARS]
    kind = span.attributes.get("error.type")
    return str(kind)[:MAX_ERROR_CHARS] if kind else ""


def _says(observation: str, error: str, span: SpanRecord) -> bool:
    """Whether the observation already holds the error (its text, or the exception's own message)."""
    if not observation:
        return False
    if error in observation:
        return True
    messages = [e["attributes"].get("exception.message") for e in span.events if e["name"] == "exception"]
    return any(isinstance(m, str) and m and m in observation for m in messages)


def has_exception(span: SpanRecord) -> bool:
    return any(event["name"] == "exception" for event in span.events)


@dataclass(slots=True)
class ToolFields:
    call_id: str = ""
    arguments: Any = None
    result: Any = None
    result_error: bool = False


def tool_fields(span: SpanRecord) -> ToolFields:
    attrs = span.attributes
    call_id, arguments, result = genai.tool_fields(span)
    fields = ToolFields(call_id, arguments, result)
    if "openinference.span.kind" in attrs:
        call_id, oi_arguments, oi_result, error = openinference.tool_fields(span)
        fields.call_id = fields.call_id or call_id
        fields.arguments = oi_arguments if arguments is None else arguments
        fields.result = oi_result if result is None else result
        fields.result_error = error
    if span.events and (fields.arguments is None or fields.result is None):
        call_id, st_arguments, st_result = strands.tool_fields(span)
        fields.call_id = fields.call_id or call_id
        fields.arguments = st_arguments if fields.arguments is None else fields.arguments
        fields.result = st_result if fields.result is None else fields.result
    if attrs.get("gen_ai.tool.status") == "error":
        fields.result_error = True
    return fields


def tool_step(
    span: SpanRecord,
    name: str,
    nth: int,
    index: CallIndex | LazyCallIndex | None,
    inferred: dict[str, str],
    number: int,
) -> dict[str, Any]:
    """One step from the tool span of the tool `name`, its `nth` call. `index` (the model calls' tool calls) is
    consulted only when the span's own arguments are missing or a bare value: the call the model made names them."""
    fields = tool_fields(span)
    arguments = arguments_object(fields.arguments)
    if arguments is None:
        call = index.match(name, fields.call_id, nth) if index is not None else None
        from_call = arguments_object(call.arguments) if call is not None else None
        if from_call is not None:  # a bare value on the span: the model's call names it (not a guess)
            arguments = from_call
            if fields.arguments in (None, ""):
                inferred[f"steps.{number}.arguments"] = "the model's tool call (the tool span has none)"
        else:
            arguments = _bare(fields.arguments)
            if arguments:
                inferred[f"steps.{number}.arguments"] = "a bare value, kept under 'value' (no tool call names it)"
    failed = (
        span.status_code == STATUS_ERROR
        or bool(span.attributes.get("error.type"))
        or fields.result_error
        or bool(span.events and has_exception(span))
    )
    observation = result_text(fields.result)
    if failed:
        error = error_text(span)
        if error and not _says(observation, error, span):
            observation = f"{observation}\n{error}" if observation else error
    return {
        "tool": name,
        "arguments": arguments,
        "observation": observation,
        "ok": not failed,
        "started_at": moment(span.start_ns),
        "ended_at": moment(span.end_ns),
    }


def message_steps(models: list[SpanRecord], inferred: dict[str, str]) -> list[dict[str, Any]]:
    """Steps from the tool calls in the model calls' output messages (a trace with no tool span): the call's
    arguments, the result a later model call was sent (matched by call id), times between the asking call's end
    and the next call's start. A call whose result no later call carried has no observation and `ok` None."""
    index = CallIndex.of(models)
    following = {id(model): models[i + 1] if i + 1 < len(models) else None for i, model in enumerate(models)}
    steps = []
    missing = 0
    for call, model in index.calls:
        result = index.results.get(call.id) if call.id else None
        arguments = arguments_object(call.arguments)
        if arguments is None:
            arguments = _bare(call.arguments)
        after = following[id(model)]
        if result is None:
            missing += 1
        steps.append(
            {
                "tool": _name(call.name),
                "arguments": arguments,
                "observation": result.text if result is not None else "",
                "ok": (not result.error) if result is not None else None,
                "started_at": moment(model.end_ns),
                "ended_at": moment(after.start_ns) if after is not None else None,
            }
        )
    if steps:
        inferred["steps"] = "the tool calls in the model calls' output messages (no tool span)"
    if missing:
        inferred["steps.ok"] = f"nothing for {missing} tool call(s): no later model call was sent its result"
    return steps
