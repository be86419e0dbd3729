"""Every model reply either parses into valid candidates or raises MalformedModelOutput, never anything else."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intents.core import IntentCandidate, IntentKind, normalize_intent, parse_intent_candidates, parse_intent_reply
from llm.core import MalformedModelOutput

from .conftest import make_run

RUNS = (make_run("t1", 3), make_run("t2", 5), make_run("t3", 1), make_run("7", 2))
LENGTHS = {run.trajectory_id: len(run.steps) for run in RUNS}


def check_valid(candidates):
    assert isinstance(candidates, tuple)
    ids = [candidate.candidate_id for candidate in candidates]
    assert len(ids) == len(set(ids))
    for candidate in candidates:
        assert isinstance(candidate, IntentCandidate)
        assert candidate.candidate_id.startswith("intent:") and len(candidate.candidate_id) == 27
        assert normalize_intent(candidate.intent)
        assert len(candidate.intent) <= 300
        assert isinstance(candidate.kind, IntentKind)
        assert len(candidate.actual_outcome) <= 1000
        assert all(isinstance(item, str) and item and len(item) <= 300 for item in candidate.limitations)
        keys = [item.key for item in candidate.evidence]
        assert keys and keys == sorted(set(keys))
        for trajectory_id, start, end in keys:
            assert 0 <= start <= end < LENGTHS[trajectory_id]


def outcome_of(call):
    """'ok' after validating the candidates, or the message of a MalformedModelOutput; anything else fails the test."""
    try:
        candidates = call()
    except MalformedModelOutput as error:
        return str(error)
    check_valid(candidates)
    return "ok"


def reply(obj) -> str:
    return json.dumps(obj)


GOOD_ROW = {"intent": "Reset password", "kind": "declared", "evidence": [{"trajectory_id": "t1", "start": 0, "end": 2}]}
GOOD = reply({"intents": [GOOD_ROW]})

CORPUS = {
    # well formed, with packaging
    "plain": (GOOD, "ok"),
    "prose around": (f"Sure! Here is what I found:\n{GOOD}\nLet me know.", "ok"),
    "fenced": (f"```json\n{GOOD}\n```", "ok"),
    "fence after a decoy brace": (f"I think {{maybe}}.\n```\n{GOOD}\n```", "ok"),
    "two objects, first wins": (reply({"intents": []}) + GOOD, "ok"),
    "empty list": ('{"intents": []}', "ok"),
    "string bounds": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t2", "start": "1", "end": "4"}]}]}),
        "ok",
    ),
    "float bounds": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t2", "start": 0.2, "end": 4.99}]}]}),
        "ok",
    ),
    "boolean bounds": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t1", "start": False, "end": True}]}]}),
        "ok",
    ),
    "numeric trajectory id": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": 7, "start": 0, "end": 1}]}]}),
        "ok",
    ),
    "null kind": (reply({"intents": [{**GOOD_ROW, "kind": None}]}), "ok"),
    "extra keys": (reply({"intents": [{**GOOD_ROW, "confidence": 0.9, "notes": {"a": [1]}}], "meta": 1}), "ok"),
    "duplicate row with garbage limitations": (reply({"intents": [GOOD_ROW, {**GOOD_ROW, "limitations": 5}]}), "ok"),
    "unicode label": (reply({"intents": [{**GOOD_ROW, "intent": "ＲＥＳＥＴ　パスワード"}]}), "ok"),
    "lone surrogate label": (
        '{"intents": [{"intent": "reset \\ud800", "evidence": [{"trajectory_id": "t3", "start": 0, "end": 0}]}]}',
        "ok",
    ),
    # not an object at all
    "empty": ("", "trajectory-intents-v1 must return a JSON object"),
    "prose only": ("I could not find any intents.", "trajectory-intents-v1 must return a JSON object"),
    "top-level array": (reply([GOOD_ROW]), "trajectory-intents-v1.intents must be a JSON array of objects"),
    "truncated": (GOOD[:-5], "trajectory-intents-v1 must return a JSON object"),
    "truncated in fence": (f"```json\n{GOOD[:40]}\n```", "trajectory-intents-v1 must return a JSON object"),
    "single quotes": (GOOD.replace('"', "'"), "trajectory-intents-v1 must return a JSON object"),
    "trailing comma": ('{"intents": [],}', "trajectory-intents-v1 must return a JSON object"),
    "deep nesting": (
        '{"intents": ' + "[" * 50_000 + "]" * 50_000 + "}",
        "trajectory-intents-v1 must return a JSON object",
    ),
    "huge integer": (
        '{"intents": [{"intent": "x", "evidence": [{"trajectory_id": "t1", "start": ' + "9" * 5000 + ', "end": 1}]}]}',
        "trajectory-intents-v1 must return a JSON object",
    ),
    # wrong envelope
    "wrong key": (reply({"intent": [GOOD_ROW]}), "trajectory-intents-v1.intents must be a JSON array of objects"),
    "intents object": (reply({"intents": GOOD_ROW}), "trajectory-intents-v1.intents must be a JSON array of objects"),
    "intents string": (
        reply({"intents": "Reset password"}),
        "trajectory-intents-v1.intents must be a JSON array of objects",
    ),
    "intents null": (reply({"intents": None}), "trajectory-intents-v1.intents must be a JSON array of objects"),
    "row not object": (
        reply({"intents": [GOOD_ROW, ["x"]]}),
        "trajectory-intents-v1.intents must be a JSON array of objects",
    ),
    "nested garbage": (
        reply({"intents": [[[{"intents": [GOOD_ROW]}]]]}),
        "trajectory-intents-v1.intents must be a JSON array of objects",
    ),
    # bad rows
    "missing intent": (reply({"intents": [{"evidence": GOOD_ROW["evidence"]}]}), "trajectory intent is required"),
    "punctuation intent": (reply({"intents": [{**GOOD_ROW, "intent": "?!—…"}]}), "trajectory intent is required"),
    "capital kind": (reply({"intents": [{**GOOD_ROW, "kind": "Declared"}]}), "trajectory intent kind is invalid"),
    "numeric kind": (reply({"intents": [{**GOOD_ROW, "kind": 2}]}), "trajectory intent kind is invalid"),
    "object kind": (
        reply({"intents": [{**GOOD_ROW, "kind": {"value": "declared"}}]}),
        "trajectory intent kind is invalid",
    ),
    "missing evidence": (
        reply({"intents": [{"intent": "x", "kind": "declared"}]}),
        "trajectory intent evidence must be a non-empty list",
    ),
    "evidence object": (
        reply({"intents": [{**GOOD_ROW, "evidence": GOOD_ROW["evidence"][0]}]}),
        "trajectory intent evidence must be a non-empty list",
    ),
    "evidence strings": (
        reply({"intents": [{**GOOD_ROW, "evidence": ["t1:0:2"]}]}),
        "trajectory intent evidence must be objects",
    ),
    "unknown trajectory": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t99", "start": 0, "end": 0}]}]}),
        "trajectory intent evidence references an unknown trajectory",
    ),
    "missing trajectory": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"start": 0, "end": 0}]}]}),
        "trajectory intent evidence references an unknown trajectory",
    ),
    "missing end": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t1", "start": 0}]}]}),
        "trajectory intent evidence bounds must be integers",
    ),
    "word bound": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t1", "start": "zero", "end": 1}]}]}),
        "trajectory intent evidence bounds must be integers",
    ),
    "NaN bound": (
        '{"intents": [{"intent": "x", "evidence": [{"trajectory_id": "t1", "start": NaN, "end": 1}]}]}',
        "trajectory intent evidence bounds must be integers",
    ),
    "Infinity bound": (
        '{"intents": [{"intent": "x", "evidence": [{"trajectory_id": "t1", "start": 0, "end": Infinity}]}]}',
        "trajectory intent evidence bounds must be integers",
    ),
    "list bound": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t1", "start": [0], "end": 1}]}]}),
        "trajectory intent evidence bounds must be integers",
    ),
    "end past the run": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t1", "start": 0, "end": 3}]}]}),
        "trajectory intent evidence is outside the trajectory",
    ),
    "negative start": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t1", "start": -1, "end": 0}]}]}),
        "trajectory intent evidence is outside the trajectory",
    ),
    "reversed bounds": (
        reply({"intents": [{**GOOD_ROW, "evidence": [{"trajectory_id": "t2", "start": 3, "end": 1}]}]}),
        "trajectory intent evidence is outside the trajectory",
    ),
    "limitations string": (
        reply({"intents": [{**GOOD_ROW, "limitations": "none"}]}),
        "trajectory intent limitations must be strings",
    ),
    "limitations numbers": (
        reply({"intents": [{**GOOD_ROW, "limitations": [1, 2]}]}),
        "trajectory intent limitations must be strings",
    ),
    "long label without words up front": (
        reply({"intents": [{**GOOD_ROW, "intent": "." * 300 + "reset"}]}),
        "trajectory intent is required",
    ),
}


@pytest.mark.parametrize(("text", "expected"), list(CORPUS.values()), ids=list(CORPUS))
def test_the_corpus(text, expected):
    assert outcome_of(lambda: parse_intent_reply(RUNS, text)) == expected


@pytest.mark.parametrize("text", [None, 3, b'{"intents": []}', ["{}"]])
def test_a_reply_that_is_not_text_is_malformed(text):
    with pytest.raises(MalformedModelOutput):
        parse_intent_reply(RUNS, text)


# --- generated garbage -------------------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10, max_value=10),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["t1", "t2", "t3", "7", "declared", "inferred", "hindsight", "Reset password", "", "  ", "2"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)
bounds = st.one_of(
    st.integers(min_value=-1, max_value=5),
    st.integers(min_value=0, max_value=2),
    st.sampled_from(["0", "1", "4", "x", 1.5, 0.9, True, False, None, float("nan")]),
    json_values,
)
known_ids = st.sampled_from(["t1", "t2", "t3", "7", 7])
plausible_items = st.fixed_dictionaries(
    {"trajectory_id": known_ids, "start": st.integers(0, 2), "end": st.integers(1, 4)}
)
evidence_items = st.one_of(
    plausible_items,
    plausible_items,
    st.fixed_dictionaries(
        {},
        optional={
            "trajectory_id": st.one_of(known_ids, st.sampled_from(["t9", "", "T1"]), json_values),
            "start": bounds,
            "end": bounds,
        },
    ),
    json_values,
)
labels = st.sampled_from(["Reset password", "reset_PASSWORD", "Book a flight", "Refund", "—", "", "  x  "])
kinds = st.sampled_from(["declared", "inferred", "hindsight", "Declared", "", None])
plausible_rows = st.fixed_dictionaries(
    {"intent": labels, "evidence": st.lists(plausible_items, min_size=1, max_size=3)},
    optional={
        "kind": kinds,
        "limitations": st.lists(st.text(max_size=20), max_size=3),
        "actual_outcome": st.text(max_size=20),
    },
)
rows = st.one_of(
    plausible_rows,
    plausible_rows,
    st.fixed_dictionaries(
        {},
        optional={
            "intent": st.one_of(labels, json_values),
            "kind": st.one_of(kinds, json_values),
            "evidence": st.one_of(st.lists(evidence_items, max_size=4), json_values),
            "limitations": st.one_of(st.lists(st.text(max_size=20), max_size=3), json_values),
            "actual_outcome": json_values,
        },
    ),
    json_values,
)
outputs = st.one_of(
    st.fixed_dictionaries({"intents": st.lists(plausible_rows, max_size=4)}),
    st.fixed_dictionaries({"intents": st.lists(rows, max_size=4)}),
    st.fixed_dictionaries({"intents": json_values}),
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    json_values,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(outputs)
def test_generated_outputs_parse_or_are_malformed(output):
    outcome_of(lambda: parse_intent_candidates(RUNS, output))


def to_text(output) -> str | None:
    try:
        return json.dumps(output)
    except ValueError:  # an integer too long to print
        return None


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(outputs, st.text(max_size=20), st.text(max_size=20), st.integers(min_value=0, max_value=400), st.booleans())
def test_generated_replies_parse_or_are_malformed(output, before, after, cut, fenced):
    text = to_text(output)
    if text is None:
        return
    if cut and cut < len(text):
        text = text[:cut]
    if fenced:
        text = f"```json\n{text}\n```"
    outcome_of(lambda: parse_intent_reply(RUNS, before + text + after))


@given(st.text(alphabet='{}[]":,0123456789 .-eEtrufalsn\\intents', max_size=80))
def test_json_ish_noise_parses_or_is_malformed(text):
    outcome_of(lambda: parse_intent_reply(RUNS, text))


@given(outputs)
def test_parsing_the_reply_text_agrees_with_parsing_the_object(output):
    if not isinstance(output, dict):
        return
    text = to_text(output)
    if text is None:
        return
    assert outcome_of(lambda: parse_intent_reply(RUNS, text)) == outcome_of(
        lambda: parse_intent_candidates(RUNS, output)
    )
