"""One trace's spans → one run in the ingest format (`POST /api/v1/trajectories` item), or the reason it is not one.

Two vocabularies are read (docs/integrations/opentelemetry.md has the full table):

- the OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name` = `invoke_agent` (the run), `execute_tool`
  (a step: `gen_ai.tool.name`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`), `chat` /
  `text_completion` / `generate_content` (a model call: `gen_ai.usage.input_tokens`, `…output_tokens`,
  `…cache_read.input_tokens`);
- OpenInference (Arize Phoenix): `openinference.span.kind` = `AGENT`, `TOOL` (`tool.name`, `tool.parameters` or
  `input.value`, `output.value`), `LLM` (`llm.token_count.prompt`, `…completion`, `…prompt_details.cache_read`).

Waymark's own attributes (on the agent span, the root span or the resource): `waymark.task`, `waymark.intent`,
`waymark.outcome`, `waymark.score`, `waymark.source`, `waymark.graph.workspace`, `waymark.graph.revision`, and
`waymark.cost` (USD) on model or tool spans.

Pure: no Django, no I/O. The item it returns still goes through the ingest service's validation, redaction and limits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .spans import STATUS_ERROR, STATUS_OK, SpanRecord, clean_text

MAX_STEPS = 2000  # trajectories.schemas.MAX_STEPS_PER_RUN
MAX_TASK_CHARS = 20_000
MAX_TOOL_CHARS = 200
MAX_TOKENS = 2**31 - 1
MAX_COST = 1e12
# Unknown attributes kept in the run's metadata: at most this many per map, strings cut, lists cut, nesting cut.
METADATA_MAX_KEYS = 64
METADATA_MAX_CHARS = 1000
METADATA_MAX_ITEMS = 20
METADATA_MAX_DEPTH = 4
ARGUMENTS_MAX_DEPTH = 24
DEFAULT_SOURCE = "otlp"
UNKNOWN_TOOL = "unknown_tool"

OPERATION = "gen_ai.operation.name"
OPENINFERENCE_KIND = "openinference.span.kind"
MODEL_OPERATIONS = {"chat", "text_completion", "generate_content"}

# Attributes the mapping consumes; every other attribute of the run span and the resource goes to the metadata.
KNOWN_ATTRIBUTES = frozenset(
    {
        OPERATION,
        OPENINFERENCE_KIND,
        "gen_ai.input.messages",
        "gen_ai.prompt",
        "gen_ai.agent.name",
        "gen_ai.agent.id",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.prompt_tokens",
        "gen_ai.usage.completion_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt",
        "llm.token_count.completion",
        "llm.token_count.total",
        "llm.token_count.prompt_details.cache_read",
        "input.value",
        "service.name",
        "waymark.task",
        "waymark.intent",
        "waymark.outcome",
        "waymark.score",
        "waymark.source",
        "waymark.graph.workspace",
        "waymark.graph.revision",
        "waymark.cost",
    }
)


# --- span roles -----------------------------------------------------------------------------------------------------


def role(span: SpanRecord) -> str | None:
    """ "agent", "tool", "model" or None (a span Waymark does not map: HTTP, retrieval, chains…)."""
    operation = span.attributes.get(OPERATION)
    kind = span.attributes.get(OPENINFERENCE_KIND)
    kind = kind.upper() if isinstance(kind, str) else None
    if operation == "invoke_agent" or kind == "AGENT":
        return "agent"
    if operation == "execute_tool" or kind == "TOOL":
        return "tool"
    if operation in MODEL_OPERATIONS or kind == "LLM":
        return "model"
    return None


# --- values ---------------------------------------------------------------------------------------------------------


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def moment(nanos: int) -> datetime | None:
    if nanos <= 0:
        return None
    return _EPOCH + timedelta(microseconds=nanos // 1000)


def _count(value: Any) -> int:
    """A token count: a non-negative integer (an integral float or a decimal string too), capped; else 0."""
    if type(value) is int:  # the common case first (bool is not int here: type() is exact)
        return min(value, MAX_TOKENS) if value > 0 else 0
    if isinstance(value, bool):
        return 0
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and value > 0:
        return min(value, MAX_TOKENS)
    return 0


def _money(value: Any) -> float:
    if type(value) is float:  # the common case first
        return min(value, MAX_COST) if value > 0 and math.isfinite(value) else 0.0
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return 0.0
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return min(float(value), MAX_COST)
    return 0.0


def _first(attributes: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = attributes.get(key)
        if value is not None and value != "":
            return value
    return None


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)  # what json.loads builds on every call


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return _DECODER.decode(stripped)
            except (ValueError, RecursionError):
                return value
    return value


def bounded(value: Any, *, depth: int, max_items: int | None = None, max_chars: int | None = None) -> Any:
    """A JSON value cut to size: nesting past `depth` as a marker, lists and objects past `max_items`, strings past
    `max_chars` (each None: no cut), text cleaned of NUL and lone surrogates, non-finite numbers as None."""
    if isinstance(value, str):
        value = clean_text(value)
        return value[:max_chars] if max_chars is not None else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int):
        return value
    if depth <= 0:
        return "[nested too deep]"
    if isinstance(value, dict):
        items = list(value.items())
        if max_items is not None:
            items = items[:max_items]
        return {
            clean_text(str(key)): bounded(child, depth=depth - 1, max_items=max_items, max_chars=max_chars)
            for key, child in items
        }
    if isinstance(value, list | tuple):
        items = list(value) if max_items is None else list(value)[:max_items]
        return [bounded(child, depth=depth - 1, max_items=max_items, max_chars=max_chars) for child in items]
    return clean_text(str(value))


def _unknown(attributes: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The attributes the mapping does not consume, bounded; and how many were left out for the bound."""
    keys = sorted(key for key in attributes if key not in KNOWN_ATTRIBUTES)
    kept = {
        key: bounded(
            attributes[key], depth=METADATA_MAX_DEPTH, max_items=METADATA_MAX_ITEMS, max_chars=METADATA_MAX_CHARS
        )
        for key in keys[:METADATA_MAX_KEYS]
    }
    return kept, max(0, len(keys) - METADATA_MAX_KEYS)


# --- the parts of a run ---------------------------------------------------------------------------------------------


@dataclass
class Usage:
    input_tokens: int = 0  # uncached input
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def add(self, other: Usage) -> None:
        self.input_tokens = min(self.input_tokens + other.input_tokens, MAX_TOKENS)
        self.cached_input_tokens = min(self.cached_input_tokens + other.cached_input_tokens, MAX_TOKENS)
        self.output_tokens = min(self.output_tokens + other.output_tokens, MAX_TOKENS)
        self.cost = min(self.cost + other.cost, MAX_COST)

    @property
    def empty(self) -> bool:
        return not (self.input_tokens or self.cached_input_tokens or self.output_tokens or self.cost)


_USAGE_KEYS = frozenset(
    {
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.token_count.prompt",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt_details.cache_read",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
        "waymark.cost",
        "gen_ai.usage.cost",
        "llm.cost.total",
    }
)


def usage(span: SpanRecord) -> Usage:
    """Token counts and cost of a span. Both conventions count cached tokens inside the input tokens; Waymark keeps
    uncached and cached input apart, so the cached part is taken out of the input."""
    attrs = span.attributes
    if _USAGE_KEYS.isdisjoint(attrs):  # most tool spans: nothing to read
        return Usage()
    total_input = _count(
        _first(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
    )
    cached = _count(
        _first(
            attrs,
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_read_input_tokens",
            "llm.token_count.prompt_details.cache_read",
        )
    )
    output = _count(
        _first(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
    )
    cached = min(cached, total_input) if total_input else cached
    cost = _money(_first(attrs, "waymark.cost", "gen_ai.usage.cost", "llm.cost.total"))
    return Usage(input_tokens=max(0, total_input - cached), cached_input_tokens=cached, output_tokens=output, cost=cost)


def tool_name(span: SpanRecord) -> str:
    name = _first(span.attributes, "gen_ai.tool.name", "tool.name")
    if not isinstance(name, str) or not name.strip():
        name = span.name.removeprefix("execute_tool").strip()
    name = clean_text(name).strip()[:MAX_TOOL_CHARS].strip()
    return name or UNKNOWN_TOOL


def _plainly_shallow(text: Any) -> bool:
    """JSON text that cannot nest deeper than the arguments' bound nor hold an escape (NUL, a lone surrogate): its
    parsed value needs no cutting or cleaning. Counting brackets over-estimates the depth, never under-estimates it."""
    return isinstance(text, str) and "\\u" not in text and text.count("{") + text.count("[") < ARGUMENTS_MAX_DEPTH


def tool_arguments(span: SpanRecord) -> dict[str, Any]:
    raw = _first(span.attributes, "gen_ai.tool.call.arguments", "tool.parameters", "input.value")
    value = _json_or_text(raw)
    if value is None or value == "":
        return {}
    if isinstance(value, dict) and _plainly_shallow(raw):
        return value
    if not isinstance(value, dict):
        value = {"value": value}
    return bounded(value, depth=ARGUMENTS_MAX_DEPTH)


def tool_observation(span: SpanRecord) -> str:
    result = _first(span.attributes, "gen_ai.tool.call.result", "output.value")
    if result is None and span.status_code == STATUS_ERROR:
        result = span.status_message or span.attributes.get("error.type")
    if isinstance(result, str):  # span attributes are clean text already
        return result
    return _as_text(bounded(result, depth=ARGUMENTS_MAX_DEPTH))


def tool_ok(span: SpanRecord) -> bool:
    """ERROR status (or an `error.type` attribute) is a failed step; OK or UNSET (no error recorded) a succeeded one."""
    return span.status_code != STATUS_ERROR and not span.attributes.get("error.type")


def _message_text(messages: Any) -> str:
    """The text of the first user message of `gen_ai.input.messages` (parts of type text), else ""."""
    messages = _json_or_text(messages)
    if not isinstance(messages, list):
        return ""
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        parts = message.get("parts")
        if isinstance(parts, list):
            texts = [p.get("content") for p in parts if isinstance(p, dict) and isinstance(p.get("content"), str)]
            if texts:
                return "\n".join(texts)
        if isinstance(message.get("content"), str):
            return message["content"]
    return ""


def task_text(span: SpanRecord | None) -> str:
    if span is None:
        return ""
    attrs = span.attributes
    explicit = _first(attrs, "waymark.task", "input.value")
    if explicit is not None:
        return clean_text(_as_text(explicit))[:MAX_TASK_CHARS]
    messages = _first(attrs, "gen_ai.input.messages", "gen_ai.prompt")
    if messages is None:
        return ""
    return clean_text(_message_text(messages) or _as_text(messages))[:MAX_TASK_CHARS]


def outcome(span: SpanRecord | None, declared: Any) -> str:
    """The run span's status: OK → success, ERROR → failure; UNSET (or no run span) → `waymark.outcome` when it is
    success, failure or unknown, else unknown."""
    if span is not None and span.status_code == STATUS_OK:
        return "success"
    if span is not None and span.status_code == STATUS_ERROR:
        return "failure"
    if isinstance(declared, str) and declared.strip().lower() in ("success", "failure", "unknown"):
        return declared.strip().lower()
    return "unknown"


# --- the trace ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceMapping:
    """`run` is the ingest item, or None when the trace is not a run (`problems` says why). `problems` also lists what
    was mapped only in part (e.g. steps beyond the limit)."""

    trace_id: str
    run: dict[str, Any] | None
    problems: tuple[str, ...] = ()
    span_ids: tuple[str, ...] = field(default_factory=tuple)


def _depths(spans: dict[str, SpanRecord]) -> dict[str, int]:
    depths: dict[str, int] = {}
    for span_id in spans:
        chain, current = [], span_id
        while current in spans and current not in depths and len(chain) <= len(spans):
            chain.append(current)
            current = spans[current].parent_span_id
        base = depths.get(current, -1)
        for offset, member in enumerate(reversed(chain), start=1):
            depths[member] = base + offset
    return depths


def _enclosing_tool(span: SpanRecord, spans: dict[str, SpanRecord], tools: set[str]) -> str | None:
    current, seen = span.parent_span_id, 0
    while current and current in spans and seen <= len(spans):
        if current in tools:
            return current
        current, seen = spans[current].parent_span_id, seen + 1
    return None


def _order(span: SpanRecord) -> tuple[int, int, str]:
    return (span.start_ns, span.end_ns, span.span_id)


def _declared(key: str, *sources: dict[str, Any] | None) -> Any:
    for source in sources:
        if source and source.get(key) not in (None, ""):
            return source[key]
    return None


def map_trace(spans: Sequence[SpanRecord], *, max_steps: int = MAX_STEPS) -> TraceMapping:
    """Map the spans of one trace (any order; duplicates by span id count once) onto one run."""
    by_id: dict[str, SpanRecord] = {}
    for span in spans:
        by_id.setdefault(span.span_id, span)
    if not by_id:
        return TraceMapping(trace_id="", run=None, problems=("the trace has no span",))
    trace_id = next(iter(by_id.values())).trace_id
    span_ids = tuple(sorted(by_id))
    roots: list[SpanRecord] = []
    by_role: dict[str | None, list[SpanRecord]] = {"agent": [], "tool": [], "model": [], None: []}
    for span in by_id.values():  # one pass: this runs for every span of every trace
        by_role[role(span)].append(span)
        if not span.parent_span_id:
            roots.append(span)
    root = min(roots, key=_order) if roots else None
    agents = by_role["agent"]
    tools = sorted(by_role["tool"], key=_order)
    models = sorted(by_role["model"], key=_order)
    problems: list[str] = []

    if len(agents) > 1:  # the outermost agent span is the run (depth first, then time)
        depths = _depths(by_id)
        run_span = min(agents, key=lambda s: (depths.get(s.span_id, 0), *_order(s)))
    else:
        run_span = agents[0] if agents else None
    if run_span is None:
        if not tools and not models:
            return TraceMapping(
                trace_id=trace_id,
                run=None,
                problems=(
                    f"trace {trace_id}: no span is an agent (gen_ai.operation.name invoke_agent, "
                    "openinference.span.kind AGENT), a tool or a model call; it is not a run",
                ),
                span_ids=span_ids,
            )
        run_span = root
        problems.append(
            f"trace {trace_id}: no invoke_agent/AGENT span; "
            + (f"the root span {root.name!r} stands for the run" if root else "the run has no root span")
        )
    if root is None:
        problems.append(f"trace {trace_id}: the root span never arrived; written after the quiet period")

    if len(tools) > max_steps:
        problems.append(f"trace {trace_id}: {len(tools) - max_steps} tool span(s) beyond {max_steps} steps dropped")
        tools = tools[:max_steps]
    tool_ids = {s.span_id for s in tools}
    step_usage = {s.span_id: usage(s) for s in tools}
    run_usage = Usage()
    for model in models:
        spent = usage(model)
        if spent.empty:
            continue
        target = _enclosing_tool(model, by_id, tool_ids) if tool_ids else None
        if target is None:
            target = next((t.span_id for t in tools if t.start_ns >= model.start_ns), None)
        if target is None and tools:
            target = tools[-1].span_id  # the closing model call concludes the last step
        if target is None:
            run_usage.add(spent)
        else:
            step_usage[target].add(spent)

    steps = []
    for span in tools:
        spent = step_usage[span.span_id]
        steps.append(
            {
                "tool": tool_name(span),
                "arguments": tool_arguments(span),
                "observation": tool_observation(span),
                "ok": tool_ok(span),
                "started_at": moment(span.start_ns),
                "ended_at": moment(span.end_ns),
                "input_tokens": spent.input_tokens,
                "cached_input_tokens": spent.cached_input_tokens,
                "output_tokens": spent.output_tokens,
                "cost": spent.cost,
            }
        )

    run_attrs = run_span.attributes if run_span is not None else {}
    resource = (run_span or root or next(iter(by_id.values()))).resource
    root_attrs = root.attributes if root is not None else {}
    source = _declared("waymark.source", run_attrs, root_attrs, resource) or resource.get("service.name")
    source = clean_text(_as_text(source)).strip()[:100].strip() if source is not None else ""

    metadata_attrs, dropped_attrs = _unknown(run_attrs)
    metadata_resource, dropped_resource = _unknown(resource)
    otlp: dict[str, Any] = {
        "trace_id": trace_id,
        "run_span": {"span_id": run_span.span_id, "name": run_span.name[:METADATA_MAX_CHARS]} if run_span else None,
        "spans": len(by_id),
        "service": bounded(resource.get("service.name"), depth=1, max_chars=METADATA_MAX_CHARS),
        "agent": bounded(_first(run_attrs, "gen_ai.agent.name"), depth=1, max_chars=METADATA_MAX_CHARS),
        "attributes": metadata_attrs,
        "resource": metadata_resource,
    }
    if dropped_attrs or dropped_resource:
        otlp["attributes_left_out"] = dropped_attrs + dropped_resource
    if not run_usage.empty:
        otlp["usage_outside_steps"] = {
            "input_tokens": run_usage.input_tokens,
            "cached_input_tokens": run_usage.cached_input_tokens,
            "output_tokens": run_usage.output_tokens,
            "cost": run_usage.cost,
        }
    declared = usage(run_span) if agents else Usage()  # the run span is an agent span whenever there is one
    if not declared.empty:
        otlp["agent_usage"] = {
            "input_tokens": declared.input_tokens,
            "cached_input_tokens": declared.cached_input_tokens,
            "output_tokens": declared.output_tokens,
            "cost": declared.cost,
        }
    if problems:
        otlp["problems"] = [p[:METADATA_MAX_CHARS] for p in problems]

    score = _declared("waymark.score", run_attrs, root_attrs, resource)
    run = {
        "source": source or DEFAULT_SOURCE,
        "external_id": trace_id,
        "task": task_text(run_span),
        "intent": clean_text(_as_text(_declared("waymark.intent", run_attrs, root_attrs, resource)))[:200],
        "outcome": outcome(run_span, _declared("waymark.outcome", run_attrs, root_attrs, resource)),
        "score": float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        "graph_workspace": clean_text(_as_text(_declared("waymark.graph.workspace", run_attrs, root_attrs, resource)))[
            :100
        ],
        "graph_revision": clean_text(_as_text(_declared("waymark.graph.revision", run_attrs, root_attrs, resource)))[
            :100
        ],
        "metadata": {"otlp": otlp},
        "started_at": moment(
            run_span.start_ns
            if run_span is not None
            else min((s.start_ns for s in by_id.values() if s.start_ns > 0), default=0)
        ),
        "ended_at": moment(
            run_span.end_ns
            if run_span is not None
            else max((s.end_ns for s in by_id.values() if s.end_ns > 0), default=0)
        ),
        "steps": steps,
    }
    if run["score"] is not None and not math.isfinite(run["score"]):
        run["score"] = None
    return TraceMapping(trace_id=trace_id, run=run, problems=tuple(problems), span_ids=span_ids)
