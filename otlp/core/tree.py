"""The spans of one trace as a tree: what each span is (agent, tool, model call) and who encloses whom."""

from __future__ import annotations

from collections.abc import Collection

from .spans import SpanRecord

OPERATION = "gen_ai.operation.name"
OPENINFERENCE_KIND = "openinference.span.kind"
MODEL_OPERATIONS = {"chat", "text_completion", "generate_content"}
OPERATION_ROLES = {"invoke_agent": "agent", "execute_tool": "tool"} | dict.fromkeys(MODEL_OPERATIONS, "model")


def role(span: SpanRecord) -> str | None:
    """ "agent", "tool", "model" or None (a span Waymark does not map: HTTP, retrieval, chains…)."""
    attributes = span.attributes
    operation = attributes.get(OPERATION)
    kind = attributes.get(OPENINFERENCE_KIND)
    if kind is None and type(operation) is str:  # the GenAI conventions alone (most spans): the operation decides
        return OPERATION_ROLES.get(operation)
    operation = operation if isinstance(operation, str) else None  # an array, a map or a number names none
    kind = kind.upper() if isinstance(kind, str) else None
    if operation == "invoke_agent" or kind == "AGENT":
        return "agent"
    if operation == "execute_tool" or kind == "TOOL":
        return "tool"
    if operation in MODEL_OPERATIONS or kind == "LLM":
        return "model"
    return None


def order(span: SpanRecord) -> tuple[int, int, str]:
    return (span.start_ns, span.end_ns, span.span_id)


def ancestor_in(span: SpanRecord, spans: dict[str, SpanRecord], ids: Collection[str]) -> str | None:
    """The nearest ancestor of `span` whose id is in `ids`, else None (a cycle or a missing parent ends the walk)."""
    current, seen = span.parent_span_id, 0
    while current and current in spans and seen <= len(spans):
        if current in ids:
            return current
        current, seen = spans[current].parent_span_id, seen + 1
    return None


def descends_from(span: SpanRecord, ancestor_id: str, spans: dict[str, SpanRecord]) -> bool:
    return ancestor_in(span, spans, (ancestor_id,)) is not None
