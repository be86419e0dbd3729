"""One trace's spans → one run in the ingest format (`POST /api/v1/trajectories` item), or the reason it is not one.

Conventions read (docs/integrations/opentelemetry.md has the full table; `conventions/` the readers):

- the OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name` = `invoke_agent` (an agent), `execute_tool`
  (a step), `chat` / `text_completion` / `generate_content` (a model call); messages in `gen_ai.input.messages` /
  `gen_ai.output.messages` (attributes or events), strands-agents' message events;
- OpenInference: `openinference.span.kind` = `AGENT`, `TOOL`, `LLM`; `llm.input_messages.*`, `llm.output_messages.*`,
  `input.value`, `output.value`.

The run boundary: the one outermost agent span when it encloses every tool span; else (several agent spans side by
side, as LangGraph's per-iteration nodes, or no agent span) the trace's root span. A trace of one lone model call
is not a run (Waymark never stores one run per model call). The outcome rule is in `outcome.py`. Every field that
fell back to a default or was taken from somewhere other than its own place is named in
`metadata.otlp.inferred`.

Waymark's own attributes (on the agent span, the root span or the resource): `waymark.task`, `waymark.intent`,
`waymark.outcome`, `waymark.score`, `waymark.source`, `waymark.graph.workspace`, `waymark.graph.revision`,
`waymark.procedure.revision` (the content revision of the procedure version the run followed), and `waymark.cost`
(USD) on model or tool spans.

Pure: no Django, no I/O. The price of a model call comes from the caller (`price`), so the table stays outside the
core. The item it returns still goes through the ingest service's validation, redaction and limits.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .conventions.messages import first_user_text
from .outcome import outcome
from .spans import STATUS_ERROR, SpanRecord, clean_text
from .steps import LazyCallIndex, error_text, input_messages, message_steps, tool_name, tool_step
from .tree import OPENINFERENCE_KIND, OPERATION, ancestor_in, descends_from, order, role
from .values import (
    MAX_COST,
    MAX_TOKENS,
    USAGE_KEYS,
    Usage,
    as_text,
    bounded,
    first,
    model_id,
    moment,
    usage,
)

__all__ = [
    "MAX_COST",
    "MAX_STEPS",
    "MAX_TASK_CHARS",
    "MAX_TOKENS",
    "METADATA_MAX_CHARS",
    "METADATA_MAX_KEYS",
    "Price",
    "TraceMapping",
    "Usage",
    "bounded",
    "map_trace",
    "moment",
    "role",
    "tool_name",
    "usage",
]

MAX_STEPS = 2000  # trajectories.schemas.MAX_STEPS_PER_RUN
MAX_TASK_CHARS = 20_000
# Unknown attributes kept in the run's metadata: at most this many per map, strings cut, lists cut, nesting cut.
METADATA_MAX_KEYS = 64
METADATA_MAX_CHARS = 1000
METADATA_MAX_ITEMS = 20
METADATA_MAX_DEPTH = 4
DEFAULT_SOURCE = "otlp"

# The price of one model call: (model id, its usage) → USD, or None when the model has no known price.
Price = Callable[[str, Usage], float | None]

# Attributes the mapping consumes (and message dumps it reads); every other attribute of the run span and the
# resource goes to the metadata.
KNOWN_ATTRIBUTES = frozenset(
    {
        OPERATION,
        OPENINFERENCE_KIND,
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.prompt",
        "gen_ai.agent.name",
        "gen_ai.agent.id",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.prompt_tokens",
        "gen_ai.usage.completion_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "pydantic_ai.all_messages",
        "llm.model_name",
        "llm.token_count.prompt",
        "llm.token_count.completion",
        "llm.token_count.total",
        "llm.token_count.prompt_details.cache_read",
        "input.value",
        "output.value",
        "service.name",
        "waymark.task",
        "waymark.intent",
        "waymark.outcome",
        "waymark.score",
        "waymark.source",
        "waymark.graph.workspace",
        "waymark.graph.revision",
        "waymark.procedure.revision",
        "waymark.cost",
    }
)
KNOWN_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.tools.")
AGENT_NAME_KEYS = ("gen_ai.agent.name", "agent.name")


def _unknown(attributes: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The attributes the mapping does not consume, bounded; and how many were left out for the bound."""
    keys = sorted(key for key in attributes if key not in KNOWN_ATTRIBUTES and not key.startswith(KNOWN_PREFIXES))
    kept = {
        key: bounded(
            attributes[key], depth=METADATA_MAX_DEPTH, max_items=METADATA_MAX_ITEMS, max_chars=METADATA_MAX_CHARS
        )
        for key in keys[:METADATA_MAX_KEYS]
    }
    return kept, max(0, len(keys) - METADATA_MAX_KEYS)


@dataclass(frozen=True, slots=True)
class TraceMapping:
    """`run` is the ingest item, or None when the trace is not a run (`problems` says why). `problems` also lists what
    was mapped only in part (e.g. steps beyond the limit)."""

    trace_id: str
    run: dict[str, Any] | None
    problems: tuple[str, ...] = ()
    span_ids: tuple[str, ...] = field(default_factory=tuple)


def _declared(key: str, *sources: dict[str, Any] | None) -> Any:
    for source in sources:
        if source and source.get(key) not in (None, ""):
            return source[key]
    return None


def _text(value: Any, limit: int) -> str:
    return clean_text(as_text(value))[:limit] if value is not None else ""


# --- the run boundary -----------------------------------------------------------------------------------------------


def _run_span(
    *,
    root: SpanRecord | None,
    agents: list[SpanRecord],
    tools: list[SpanRecord],
    calls: list[SpanRecord],
    by_id: dict[str, SpanRecord],
    trace_id: str,
    problems: list[str],
    inferred: dict[str, str],
) -> tuple[SpanRecord | None, str | None]:
    """The span that stands for the run, or (None, why) when the trace is not a run."""
    if agents:
        agent_ids = {a.span_id for a in agents}
        outer = sorted((a for a in agents if ancestor_in(a, by_id, agent_ids) is None), key=order)
        if len(outer) == 1 and all(descends_from(t, outer[0].span_id, by_id) for t in tools):
            return outer[0], None
        if root is not None:
            names = ", ".join(repr(a.name) for a in outer[:3]) + (" …" if len(outer) > 3 else "")
            inferred["run"] = (
                f"the root span {root.name!r}: {len(outer)} agent spans ({names}) side by side, "
                "none enclosing the whole run"
            )
            return root, None
        return outer[0], None
    if tools:
        problems.append(
            f"trace {trace_id}: no invoke_agent/AGENT span; "
            + (f"the root span {root.name!r} stands for the run" if root else "the run has no root span")
        )
        inferred["run"] = "the trace (no agent span)"
        return root, None
    if not calls:
        return None, (
            f"trace {trace_id}: no span is an agent (gen_ai.operation.name invoke_agent, "
            "openinference.span.kind AGENT), a tool or a model call; it is not a run"
        )
    lone = len(calls) == 1 and (root is None or root.span_id == calls[0].span_id or role(root) == "model")
    if lone:
        return None, (
            f"trace {trace_id}: a lone model call ({calls[0].name!r}) with no agent, tool or enclosing span; "
            "Waymark does not store a run per model call: start one span around each agent run "
            "(docs/integrations/opentelemetry.md, 'Instrumentors alone')"
        )
    problems.append(
        f"trace {trace_id}: no agent or tool span; "
        + (f"the root span {root.name!r} stands for the run" if root else "the run has no root span")
        + ", its steps are the tool calls in the model calls' output messages"
    )
    inferred["run"] = "the trace (no agent or tool span)"
    return root, None


# --- model calls and tokens -----------------------------------------------------------------------------------------


def _model_calls(models: list[SpanRecord], by_id: dict[str, SpanRecord]) -> tuple[list[SpanRecord], dict[str, list]]:
    """The model calls counted once each: a model span nested inside another model span is the same call seen by
    two instrumentations (the Anthropic SDK's own span under OpenInference's) and is folded into its outermost."""
    ids = {m.span_id for m in models}
    outer: list[SpanRecord] = []
    nested: dict[str, list[SpanRecord]] = defaultdict(list)
    for model in models:
        top, current = None, model
        while (parent := ancestor_in(current, by_id, ids)) is not None:
            top, current = parent, by_id[parent]
        if top is None:
            outer.append(model)
        else:
            nested[top].append(model)
    return sorted(outer, key=order), nested


def _call_usage(call: SpanRecord, nested: list[SpanRecord], price: Price | None, unpriced: set[str]) -> Usage:
    spent = usage(call)
    source = call
    if not spent.tokens:  # the outer span may carry no counts where the inner one does
        for inner in nested:
            inner_usage = usage(inner)
            if inner_usage.tokens:
                spent, source = inner_usage, inner
                break
    if spent.cost == 0.0 and spent.tokens and price is not None:
        model = model_id(source) or model_id(call) or next((model_id(n) for n in nested if model_id(n)), "")
        cost = price(model, spent) if model else None
        if cost is None:
            unpriced.add(model or "(no model id)")
        else:
            spent.cost = min(max(0.0, float(cost)), MAX_COST)
    return spent


# --- the trace ------------------------------------------------------------------------------------------------------


def map_trace(spans: Sequence[SpanRecord], *, max_steps: int = MAX_STEPS, price: Price | None = None) -> TraceMapping:
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
    root = min(roots, key=order) if roots else None
    agents = by_role["agent"]
    tools = sorted(by_role["tool"], key=order)
    calls, nested = _model_calls(by_role["model"], by_id) if by_role["model"] else ([], {})
    problems: list[str] = []
    inferred: dict[str, str] = {}

    run_span, refusal = _run_span(
        root=root,
        agents=agents,
        tools=tools,
        calls=calls,
        by_id=by_id,
        trace_id=trace_id,
        problems=problems,
        inferred=inferred,
    )
    if refusal is not None:
        return TraceMapping(trace_id=trace_id, run=None, problems=(refusal,), span_ids=span_ids)
    if root is None:
        problems.append(f"trace {trace_id}: the root span never arrived; written after the quiet period")

    # Steps: the tool spans, else the tool calls in the model calls' output messages.
    if len(tools) > max_steps:
        problems.append(f"trace {trace_id}: {len(tools) - max_steps} tool span(s) beyond {max_steps} steps dropped")
        tools = tools[:max_steps]
    index: LazyCallIndex | None = None  # from the first tool span that may need it on, read when one does
    seen_names: dict[str, int] = defaultdict(int)
    steps: list[dict[str, Any]] = []
    for number, span in enumerate(tools):
        if index is None and calls and _needs_calls(span):
            index = LazyCallIndex(calls)
        name = tool_name(span)
        steps.append(tool_step(span, name, seen_names[name], index, inferred, number))
        seen_names[name] += 1
    step_spans: list[tuple[int, int, str | None]] = [(s.start_ns, s.end_ns, s.span_id) for s in tools]
    if not tools and calls:
        steps = message_steps(calls, inferred)[:max_steps]
        step_spans = [(_nanos(s["started_at"]), _nanos(s["ended_at"]), None) for s in steps]

    # Tokens: each model call once, to the tool step that encloses it, else the first step starting at or after it,
    # else (the closing answer) the last step; a run with no step keeps them apart.
    tool_ids = {s.span_id for s in tools}
    # Tool steps are in start order (`order`), so the first starting at or after a call is found by bisection.
    tool_starts = [start for start, _, _ in step_spans] if tools else None
    step_usage: list[Usage | None] = [None] * len(steps)  # a step's first call's usage as it is, the others added
    run_usage = Usage()
    unpriced: set[str] = set()
    for call in calls:
        spent = _call_usage(call, nested.get(call.span_id, []), price, unpriced)
        if spent.empty:
            continue
        target = None
        if tool_ids:
            enclosing = ancestor_in(call, by_id, tool_ids)
            if enclosing is not None:
                target = next(i for i, (_, _, sid) in enumerate(step_spans) if sid == enclosing)
        if target is None and tool_starts is not None:
            found = bisect_left(tool_starts, call.start_ns)
            target = found if found < len(tool_starts) else None
        elif target is None:
            target = next((i for i, (start, _, _) in enumerate(step_spans) if start >= call.start_ns), None)
        if target is None and steps:
            target = len(steps) - 1
        if target is None:
            run_usage.add(spent)
        elif (kept := step_usage[target]) is None:
            step_usage[target] = spent
        else:
            kept.add(spent)
    for step, spent, span in zip(steps, step_usage, tools or [None] * len(steps), strict=True):
        if spent is None:
            spent = Usage()
        if span is not None and not USAGE_KEYS.isdisjoint(span.attributes):  # tokens or cost on the tool span
            spent.add(usage(span))
        step["input_tokens"] = spent.input_tokens
        step["cached_input_tokens"] = spent.cached_input_tokens
        step["output_tokens"] = spent.output_tokens
        step["cost"] = spent.cost
    if unpriced:
        inferred["cost"] = "the model price table, which has no price for " + ", ".join(sorted(unpriced)) + " (0)"

    run_attrs = run_span.attributes if run_span is not None else {}
    resource = (run_span or root or next(iter(by_id.values()))).resource
    root_attrs = root.attributes if root is not None else {}
    source = _declared("waymark.source", run_attrs, root_attrs, resource) or resource.get("service.name")
    source = clean_text(as_text(source)).strip()[:100].strip() if source is not None else ""

    task = _task(run_span, root, calls, run_attrs, root_attrs, inferred)
    model = next((m for m in (model_id(s, answered=False) for s in (run_span, root) if s is not None) if m), "")
    model = model or next((m for m in (model_id(c, answered=False) for c in calls) if m), "")
    declared_outcome = _declared("waymark.outcome", run_attrs, root_attrs, resource)
    run_outcome = outcome(root=root, run_span=run_span, agents=agents, declared=declared_outcome, inferred=inferred)

    metadata_attrs, dropped_attrs = _unknown(run_attrs)
    metadata_resource, dropped_resource = _unknown(resource)
    otlp: dict[str, Any] = {
        "trace_id": trace_id,
        "run_span": {"span_id": run_span.span_id, "name": run_span.name[:METADATA_MAX_CHARS]} if run_span else None,
        "spans": len(by_id),
        "service": bounded(resource.get("service.name"), depth=1, max_chars=METADATA_MAX_CHARS),
        "agent": bounded(
            first(run_attrs, AGENT_NAME_KEYS) or next((first(a.attributes, AGENT_NAME_KEYS) for a in agents), None),
            depth=1,
            max_chars=METADATA_MAX_CHARS,
        ),
        "attributes": metadata_attrs,
        "resource": metadata_resource,
    }
    if dropped_attrs or dropped_resource:
        otlp["attributes_left_out"] = dropped_attrs + dropped_resource
    if not run_usage.empty:
        otlp["usage_outside_steps"] = run_usage.as_dict()
    folded = sum(len(v) for v in nested.values())
    if folded:
        otlp["nested_model_spans"] = folded
    declared_usage = usage(run_span) if run_span is not None and role(run_span) == "agent" else Usage()
    if not declared_usage.empty:
        otlp["agent_usage"] = declared_usage.as_dict()
    if run_outcome == "failure" and (error := _run_error(run_span, root, by_id)):
        otlp["error"] = error[:METADATA_MAX_CHARS]
    if problems:
        otlp["problems"] = [p[:METADATA_MAX_CHARS] for p in problems]
    if inferred:
        otlp["inferred"] = {key: text[:METADATA_MAX_CHARS] for key, text in inferred.items()}

    score = _declared("waymark.score", run_attrs, root_attrs, resource)
    metadata: dict[str, Any] = {"otlp": otlp}
    if model:
        metadata["model"] = model
    run = {
        "source": source or DEFAULT_SOURCE,
        "external_id": trace_id,
        "task": task,
        "intent": _text(_declared("waymark.intent", run_attrs, root_attrs, resource), 200),
        "outcome": run_outcome,
        "score": float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        "graph_workspace": _text(_declared("waymark.graph.workspace", run_attrs, root_attrs, resource), 100),
        "graph_revision": _text(_declared("waymark.graph.revision", run_attrs, root_attrs, resource), 100),
        "procedure_revision": _text(_declared("waymark.procedure.revision", run_attrs, root_attrs, resource), 100),
        "metadata": metadata,
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


def _run_error(run_span: SpanRecord | None, root: SpanRecord | None, by_id: dict[str, SpanRecord]) -> str:
    """What ended a failed run: the error of the run span or the root span (an exception that left the agent's loop),
    else of the first span in ERROR (a model call the provider refused); "" when no span says."""
    heads = [s for s in (run_span, root) if s is not None]
    failed = sorted((s for s in by_id.values() if s.status_code == STATUS_ERROR), key=order)
    return next((text for text in map(error_text, [*heads, *failed]) if text), "")


def _nanos(moment_value: Any) -> int:
    return int(moment_value.timestamp() * 1_000_000_000) if moment_value is not None else 0


def _needs_calls(span: SpanRecord) -> bool:
    """Whether a tool span's own arguments leave the call's arguments to the model's tool call (absent or not an
    object: LangChain's TOOL span gives a single argument as its bare value)."""
    attrs = span.attributes
    raw = attrs.get("gen_ai.tool.call.arguments")
    if raw is None:
        raw = attrs.get("input.value")
    if raw is None and span.events:
        return True
    if isinstance(raw, dict):
        return False
    return not (isinstance(raw, str) and raw.lstrip()[:1] == "{")


def _task(
    run_span: SpanRecord | None,
    root: SpanRecord | None,
    calls: list[SpanRecord],
    run_attrs: dict[str, Any],
    root_attrs: dict[str, Any],
    inferred: dict[str, str],
) -> str:
    """`waymark.task`, else the first user message of the run span (or the root span), else of the first model
    call (recorded as inferred), else "" (recorded too)."""
    explicit = _declared("waymark.task", run_attrs, root_attrs)
    if explicit is not None:
        return _text(explicit, MAX_TASK_CHARS)
    heads = [s for s in (run_span, root) if s is not None]
    for span in heads[:1] if len(heads) == 2 and heads[0] is heads[1] else heads:
        text = first_user_text(input_messages(span))
        if text:
            return _text(text, MAX_TASK_CHARS)
    for call in calls:
        text = first_user_text(input_messages(call))
        if text:
            inferred["task"] = f"the first user message of the first model call ({call.name!r})"
            return _text(text, MAX_TASK_CHARS)
    inferred["task"] = "nothing: no user message in the run span nor in any model call"
    return ""
