"""Hand-made OpenTelemetry spans for the OTLP mapping tests (`span`, with OpenInference's LLM spans and span events)
and stored times as whole microseconds (`micros`)."""

import json
from datetime import UTC, datetime, timedelta

from otlp.core.spans import STATUS_UNSET, SpanRecord

TRACE = "5b8efff798038103d269b633813fc60c"
SECOND = 1_000_000_000
T0 = 1_790_000_000 * SECOND


def span(span_id, parent="", *, start=0, end=1, status=STATUS_UNSET, message="", resource=None, name="", **attrs):
    return SpanRecord(
        trace_id=TRACE,
        span_id=f"{span_id:016x}",
        parent_span_id=f"{parent:016x}" if parent else "",
        name=name,
        start_ns=T0 + start * SECOND,
        end_ns=T0 + end * SECOND,
        status_code=status,
        status_message=message,
        attributes=attrs,
        resource=resource if resource is not None else {"service.name": "support-agent"},
    )


OI = "openinference.span.kind"


def event(name, **attributes):
    return {"name": name, "time_ns": 0, "attributes": attributes}


def with_events(record, *events):
    record.events = list(events)
    return record


def llm_out(span_id, parent, start, calls, **extra):
    """An OpenInference LLM span whose output message asks for `calls` [(id, name, arguments)]."""
    attrs = {OI: "LLM", "llm.model_name": "claude-haiku-4-5", "llm.token_count.prompt": 100}
    attrs |= {"llm.token_count.completion": 10, "llm.output_messages.0.message.role": "assistant"}
    for k, (call_id, name, arguments) in enumerate(calls):
        prefix = f"llm.output_messages.0.message.tool_calls.{k}.tool_call"
        attrs |= {f"{prefix}.id": call_id, f"{prefix}.function.name": name}
        attrs[f"{prefix}.function.arguments"] = json.dumps(arguments)
    return span(span_id, parent, start=start, end=start + 1, **(attrs | extra))


def micros(moment) -> int:
    """A stored time as whole microseconds since the epoch (exact, unlike a float of seconds)."""
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
