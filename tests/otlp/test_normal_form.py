"""trajectories.normal_form, the OTLP path's shortcut through the ingest schema: whenever it builds a run itself, the
schema's full validation accepts the same item and makes the same run of it (values, their types, the fields set);
anything it is not sure of is left to that validation."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import hypothesis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from otlp.core.mapping import map_trace
from otlp.core.spans import STATUS_ERROR, STATUS_OK
from tests.helpers.otlp_spans import OI, event, llm_out, span, with_events
from trajectories.normal_form import LABELS, normal_runs
from trajectories.schemas import MAX_DEPTH, RunIn
from trajectories.services import IngestInvalid, validate_ingest_items


def typed(value: Any) -> Any:
    """A value with the type of every part spelled out (so 1 and 1.0, or two time zones, never compare equal)."""
    if isinstance(value, RunIn) or hasattr(value, "model_fields_set"):
        return (type(value).__name__, sorted(value.model_fields_set), typed(dict(value.__dict__)))
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if isinstance(value, datetime):
        return ("datetime", value.isoformat(), repr(value.tzinfo))
    return (type(value).__name__, value)


def full(item: Any) -> Any:
    """The schema's own verdict on one item: the run, or the errors. (The service's batch rules, the evaluation
    namespace and duplicates, apply to both ways alike: the batch test below.)"""
    try:
        return RunIn.model_validate(item)
    except ValidationError as exc:
        return exc.errors()


def assert_same_as_the_schema(item: Any) -> bool:
    """The shortcut's run equals the schema's; returns whether the shortcut took the item."""
    built = normal_runs([item])[0]
    if built is item:
        return False
    reference = full(item)
    assert isinstance(reference, RunIn), f"the shortcut accepted what the schema refuses: {reference}"
    assert typed(built) == typed(reference)
    assert [typed(s) for s in built.steps] == [typed(s) for s in reference.steps]
    return True


T = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def step(**fields):
    return {
        "tool": "lookup_order",
        "arguments": {"order_id": "ORD-1", "amount": 12.5, "nested": {"a": [1, None, True]}},
        "observation": "ok: found",
        "ok": True,
        "started_at": T,
        "ended_at": T + timedelta(seconds=2),
        "input_tokens": 800,
        "cached_input_tokens": 128,
        "output_tokens": 60,
        "cost": 0.0033,
    } | fields


def run(**fields):
    return {
        "source": "support-agent",
        "external_id": "5b8efff798038103d269b633813fc60c",
        "task": "Refund order 1",
        "intent": "refund_request",
        "outcome": "success",
        "score": 1.0,
        "graph_workspace": "",
        "graph_revision": "",
        "procedure_revision": "",
        "metadata": {"otlp": {"trace_id": "5b8e", "spans": 3, "agent": None, "attributes": {"n": 1}}},
        "started_at": T,
        "ended_at": T + timedelta(minutes=2),
        "steps": [step(), step(tool="issue_refund", ok=False)],
    } | fields


def nested(depth: int) -> dict:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def test_a_run_in_normal_form_is_built_as_the_schema_builds_it():
    assert assert_same_as_the_schema(run())
    assert assert_same_as_the_schema(run(steps=[{"tool": "notify"}], score=None, started_at=None))
    assert assert_same_as_the_schema({"source": "s", "external_id": "e"})  # every other field defaulted
    assert assert_same_as_the_schema(run(metadata=nested(MAX_DEPTH)))  # as deep as the schema allows


# Each of these is outside the normal form: the item goes the schema's way (which may accept it or not: the shortcut
# must not decide either way).
OUTSIDE = {
    "nfc": run(source="cafe\u0301"),
    "non-ASCII id": run(external_id="trace-é"),
    "invisible in a label": run(intent="refund\u200brequest"),
    "space at an end": run(intent=" refund"),
    "tab in a label": run(graph_workspace="a\tb"),
    "empty source": run(source=""),
    "long source": run(source="s" * 101),
    "NUL in the task": run(task="a\x00b"),
    "surrogate in the task": run(task="a\ud800b"),
    "long task": run(task="t" * 20_001),
    "int score": run(score=1),
    "bool score": run(score=True),
    "nan score": run(score=math.nan),
    "naive date": run(started_at=datetime(2026, 1, 1)),
    "other zone": run(started_at=datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))),
    "date as text": run(started_at="2026-11-02T09:00:00Z"),
    "unknown outcome": run(outcome="ok"),
    "unknown field": run(colour="blue"),
    "metadata too deep": run(metadata=nested(MAX_DEPTH + 1)),
    "inf in metadata": run(metadata={"x": [math.inf]}),
    "int key in metadata": run(metadata={"x": {1: "a"}}),
    "NUL key in metadata": run(metadata={"a\x00": 1}),
    "tuple in metadata": run(metadata={"x": (1, 2)}),
    "steps not a list": run(steps=({"tool": "a"},)),
    "too many steps": run(steps=[{"tool": "a"}] * 2001),
    "step without tool": run(steps=[{"observation": "x"}]),
    "blank tool": run(steps=[step(tool="  ")]),
    "tool with a space at an end": run(steps=[step(tool="notify\n")]),
    "long tool": run(steps=[step(tool="t" * 201)]),
    "bool tokens": run(steps=[step(input_tokens=True)]),
    "negative tokens": run(steps=[step(output_tokens=-1)]),
    "too many tokens": run(steps=[step(output_tokens=2**31)]),
    "int cost": run(steps=[step(cost=1)]),
    "negative cost": run(steps=[step(cost=-0.5)]),
    "ok as text": run(steps=[step(ok="true")]),
    "arguments not an object": run(steps=[step(arguments=[1])]),
    "family too long": run(steps=[step(action_family="f" * 41)]),
    "unknown step field": run(steps=[step(colour="blue")]),
    "not a dict": ["source", "external_id"],
}


@pytest.mark.parametrize("name", OUTSIDE)
def test_what_is_not_certainly_normal_is_left_to_the_schema(name):
    item = OUTSIDE[name]
    assert normal_runs([item])[0] is item


def test_a_mixed_batch_keeps_its_order():
    good, odd = run(), run(score=1)
    built = normal_runs([good, odd, good])
    assert isinstance(built[0], RunIn) and built[1] is odd and isinstance(built[2], RunIn)


def test_the_mapping_output_takes_the_shortcut():
    """The OTLP mapping's runs (GenAI and OpenInference spans, an error, inferred fields) are all in normal form:
    otherwise the shortcut would be no faster."""
    genai = [
        span(1, name="invoke_agent support", status=STATUS_OK, **{"gen_ai.operation.name": "invoke_agent"}),
        span(2, 1, start=1, end=2, name="chat", **{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 9}),
        span(
            3,
            1,
            start=2,
            end=3,
            status=STATUS_ERROR,
            message="refused",
            **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"},
            **{"gen_ai.tool.call.arguments": "{}"},
        ),
    ]
    openinference = [
        span(1, name="agent", **{OI: "AGENT", "input.value": "Refund order 7"}),
        llm_out(2, 1, 1, [("c1", "lookup", {"id": 7})]),
        with_events(span(3, 1, start=2, end=3, **{OI: "TOOL", "tool.name": "lookup"}), event("exception")),
    ]
    for spans in (genai, openinference):
        item = map_trace(spans).run
        assert assert_same_as_the_schema(item)


# --- random items --------------------------------------------------------------------------------------------------

TEXT = st.one_of(
    st.sampled_from(["", " ", "a", "a ", " a", "refund_request", "x" * 100, "x" * 101, "é", "cafe\u0301", "\u00a0a"]),
    st.sampled_from(["a\x00", "\ud800", "a\u200b", "\t", "a\n", "\x85a", "a\u3000", "\u2028", "job-12", "waymark-x"]),
    st.text(max_size=8),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=210),
)
NUMBER = st.one_of(
    st.integers(min_value=-3, max_value=2**31 + 3),
    st.sampled_from([0, 1, 2**31 - 1, 2**31, -1, True, False, None, 1e12, 1e12 + 1e-3, -0.0, 0.0]),
    st.floats(allow_nan=True, allow_infinity=True),
)
MOMENT = st.one_of(
    st.none(),
    st.datetimes(
        min_value=datetime(1800, 1, 1),
        max_value=datetime(9999, 12, 31),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5))]) | st.none(),
    ),
    st.sampled_from([datetime(1900, 1, 1, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC), "2026-01-01T00:00:00Z"]),
)
KEYS = st.one_of(st.sampled_from(["k", "a\x00", "\udc80", "é"]), st.text(max_size=3))
JSON = st.recursive(
    st.one_of(TEXT, NUMBER),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(KEYS, inner, max_size=3),
        st.dictionaries(st.integers(0, 2), inner, max_size=1),
        st.tuples(inner),
    ),
    max_leaves=12,
)
DEEP = st.integers(min_value=MAX_DEPTH - 3, max_value=MAX_DEPTH + 1).map(nested)
OBJECT = st.one_of(st.dictionaries(KEYS, JSON, max_size=4), DEEP, JSON)


def perturbed(base: dict, fields: dict) -> st.SearchStrategy:
    """`base` with some of its fields replaced by draws, some dropped, sometimes an unknown one added."""
    return (
        st.fixed_dictionaries(
            {},
            optional={name: strategy for name, strategy in fields.items()},
        )
        .flatmap(
            lambda changes: st.tuples(
                st.just(changes),
                st.sets(st.sampled_from(sorted(base)), max_size=2),
                st.booleans(),
            )
        )
        .map(lambda drawn: _apply(base, *drawn))
    )


def _apply(base: dict, changes: dict, dropped: set, extra: bool) -> dict:
    item = {key: value for key, value in base.items() if key not in dropped} | changes
    if extra:
        item["unknown"] = 1
    return item


STEP_FIELDS = {
    "tool": TEXT,
    "action_family": st.none() | TEXT,
    "arguments": OBJECT,
    "observation": TEXT,
    "ok": st.sampled_from([None, True, False, 1, "true"]),
    "started_at": MOMENT,
    "ended_at": MOMENT,
    "input_tokens": NUMBER,
    "cached_input_tokens": NUMBER,
    "output_tokens": NUMBER,
    "cost": NUMBER,
}
STEPS = st.lists(
    st.one_of(perturbed(step(), STEP_FIELDS), st.just(step()), st.just({"tool": "a"})),
    max_size=3,
)
RUN_FIELDS = {
    "source": TEXT,
    "external_id": TEXT,
    "task": TEXT,
    "intent": TEXT,
    "outcome": st.sampled_from(["success", "failure", "unknown", "Success", "", None]),
    "score": NUMBER,
    "graph_workspace": TEXT,
    "graph_revision": TEXT,
    "procedure_revision": TEXT,
    "metadata": OBJECT,
    "started_at": MOMENT,
    "ended_at": MOMENT,
    "steps": STEPS,
}

# Values drawn from within the normal form (and at its bounds), so that many random items take the shortcut.
LABEL = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=100)
FREE = st.text(max_size=30) | st.just("x" * 20_000)
PLAIN_JSON = st.recursive(
    st.one_of(st.text(max_size=5), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)
UTC_MOMENT = st.none() | st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(9999, 12, 29), timezones=st.just(UTC)
)
NORMAL_STEP_FIELDS = {
    "tool": st.text(min_size=1, max_size=200).filter(lambda t: not t[0].isspace() and not t[-1].isspace()),
    "arguments": st.dictionaries(st.text(max_size=3), PLAIN_JSON, max_size=3),
    "observation": FREE,
    "started_at": UTC_MOMENT,
    "input_tokens": st.integers(0, 2**31 - 1),
    "cost": st.floats(0, 1e12),
}
NORMAL_RUN_FIELDS = {
    "source": LABEL,
    "intent": st.just("") | LABEL,
    "task": FREE,
    "score": st.none() | st.floats(allow_nan=False, allow_infinity=False),
    "metadata": st.dictionaries(st.text(max_size=3), PLAIN_JSON, max_size=4),
    "ended_at": UTC_MOMENT,
    "steps": st.lists(perturbed(step(), NORMAL_STEP_FIELDS), max_size=3),
}
ITEMS = perturbed(run(), RUN_FIELDS) | perturbed(run(), NORMAL_RUN_FIELDS)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ITEMS)
def test_a_random_item_built_by_the_shortcut_is_the_schemas_run(item):
    hypothesis.event("shortcut" if assert_same_as_the_schema(item) else "left to the schema")


@settings(max_examples=200, deadline=None)
@given(st.lists(ITEMS, min_size=1, max_size=4))
def test_a_random_batch_validates_to_the_same_runs_or_the_same_errors(items):
    """The whole batch through the service's validation, with and without the shortcut: the same runs, or the same
    errors at the same places."""
    try:
        reference = [typed(r) for r in validate_ingest_items(items)]
    except IngestInvalid as exc:
        reference = exc.errors
    try:
        shortcut = [typed(r) for r in validate_ingest_items(normal_runs(items))]
    except IngestInvalid as exc:
        shortcut = exc.errors
    assert shortcut == reference


# --- random traces --------------------------------------------------------------------------------------------------

ATTRIBUTE = st.one_of(TEXT, NUMBER, PLAIN_JSON.map(json.dumps), st.lists(TEXT, max_size=2))
ROLES = st.sampled_from(
    [
        {"gen_ai.operation.name": "execute_tool"},
        {"gen_ai.operation.name": "chat"},
        {OI: "TOOL"},
        {OI: "LLM"},
        {"gen_ai.operation.name": "invoke_agent"},
        {},
    ]
)
KEYS_READ = st.sampled_from(
    [
        "gen_ai.tool.name",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "waymark.cost",
        "waymark.task",
        "waymark.intent",
        "waymark.score",
        "waymark.outcome",
        "waymark.source",
        "waymark.graph.workspace",
        "gen_ai.request.model",
        "input.value",
        "output.value",
        "error.type",
        "custom.attribute",
    ]
)
SPAN = st.tuples(
    ROLES,
    st.dictionaries(KEYS_READ, ATTRIBUTE, max_size=5),
    st.integers(0, 5),
    TEXT,
    st.sampled_from([0, 1, 2]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS_READ, ATTRIBUTE, max_size=5), st.lists(SPAN, min_size=1, max_size=6))
def test_a_random_trace_mapped_is_built_as_the_schema_builds_it(root_attributes, children):
    spans = [span(1, name="invoke_agent", **{"gen_ai.operation.name": "invoke_agent", **root_attributes})]
    for number, (kind, attributes, start, name, status) in enumerate(children, start=2):
        spans.append(span(number, 1, start=start, end=start + 1, name=name, status=status, **{**attributes, **kind}))
    item = map_trace(spans).run
    if item is not None:
        hypothesis.event("shortcut" if assert_same_as_the_schema(item) else "left to the schema")


# --- the shortcut follows the schema -------------------------------------------------------------------------------


def python_validators(schema: Any) -> set[str]:
    """The names of the Python functions pydantic calls while validating with `schema` (a core schema)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        if schema.get("type", "").startswith("function-"):
            found.add(schema["function"]["function"].__name__)
        for key, value in schema.items():
            if key not in ("cls", "metadata", "serialization"):
                found |= python_validators(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= python_validators(value)
    return found


def test_the_schema_runs_only_the_validators_the_shortcut_knows():
    """A new Python validator in the run schemas must be taught to trajectories.normal_form (its domain must be one
    on which the new validator changes and refuses nothing) before this test is updated."""
    assert python_validators(RunIn.__pydantic_core_schema__) == {
        "require_plain_identifier",
        "_nfc",
        "require_storable",
        "_storable",
        "_in_range",
    }


@pytest.mark.parametrize(
    ("where", "limit"),
    [(("run", name), limit) for name, limit in LABELS.items()]
    + [(("step", "tool"), 200), (("step", "action_family"), 40)],
)
def test_the_shortcuts_lengths_are_the_schemas(where, limit):
    kind, name = where

    def item(length):
        return run(**{name: "x" * length}) if kind == "run" else run(steps=[step(**{name: "x" * length})])

    assert assert_same_as_the_schema(item(limit))
    assert not isinstance(normal_runs([item(limit + 1)])[0], RunIn)
    with pytest.raises(ValidationError):
        RunIn.model_validate(item(limit + 1))
