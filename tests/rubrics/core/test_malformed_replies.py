"""Whatever a model sends back, the rubric parsers either return valid values or raise MalformedModelOutput.

A hand-written corpus of bad replies (wrong types, missing keys, out-of-range numbers, bad evidence, prose around the
JSON, truncated JSON) and hypothesis-generated JSON and text. No other exception type may escape.
"""

from __future__ import annotations

import contextlib
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm.core import MalformedModelOutput
from rubrics.core.rubrics import (
    RubricAssessment,
    RubricDimension,
    TrajectoryRubric,
    parse_assessment_reply,
    parse_rubric_assessments,
    parse_rubric_reply,
    parse_trajectory_rubric,
    score_trajectory_rubric,
)
from trajectories.core import TrajectoryRun, TrajectoryStep

RUN = TrajectoryRun(
    trajectory_id="run-1",
    steps=tuple(TrajectoryStep(i, "search", "discover", {"query": "q"}, ok=True) for i in range(4)),
)
RUBRIC = TrajectoryRubric(
    "find the refund policy",
    (
        RubricDimension("grounding", "cites the policy document", 2.0, True),
        RubricDimension("efficiency", "no repeated searches"),
    ),
)

RUBRIC_REPLIES = [
    "",
    "I cannot help with that.",
    "null",
    "[]",
    '"dimensions"',
    "{}",
    '{"dimensions": null}',
    '{"dimensions": "a, b"}',
    '{"dimensions": {"id": "a"}}',
    '{"dimensions": [1, 2]}',
    '{"dimensions": [[]]}',
    '{"dimensions": []}',
    '{"dimensions": [{}]}',
    '{"dimensions": [{"id": null, "description": null}]}',
    '{"dimensions": [{"id": "a"}]}',
    '{"dimensions": [{"description": "only a description"}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": "heavy"}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": null}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": [1]}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": {"v": 1}}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": 0}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": -1}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": 1e999}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": NaN}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": Infinity}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": "-Infinity"}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": 1' + "0" * 400 + "}]}",
    '{"dimensions": [{"id": "a", "description": "d"}, {"id": "a", "description": "e"}]}',
    '{"dimensions": [{"id": "   ", "description": "d"}]}',
    '{"dimensions": [{"id": "a", "description": "\\n\\t"}]}',
    '{"dimensions": [{"id": "a", "description": "d", "required": "no"}]}',
    '{"dimensions": [{"id": {"x": 1}, "description": ["d"], "required": [0]}]}',
    '{"dimensions": [{"id": "a", "description": "d", "weight": true}]}',
    'Here is the rubric: {"dimensions": [{"id": "a", "description": "d"}]} hope it helps',
    '```json\n{"dimensions": [{"id": "a", "description": "d", "weight": 2}]}\n```',
    '```\n{"dimensions": [{"id": "a", "description": "d"}\n```',
    '{"dimensions": [{"id": "a", "description": "d"}',
    '{"dimensions": [{"id": "a", "description": "d"}, {"id": "b", "descr',
    '{"rubric": {"dimensions": [{"id": "a", "description": "d"}]}}',
    '{"dimensions": [{"id": "a", "description": "d"}]} {"dimensions": "second"}',
    '{"a": 1} {"dimensions": [{"id": "a", "description": "d"}]}',
    "{'dimensions': [{'id': 'a', 'description': 'd'}]}",
    '{"dimensions": [{"id": "' + "x" * 1000 + '", "description": "' + "y" * 5000 + '"}]}',
    "\x00{\x00}",
    "{" * 500,
    "[" * 5000 + "]" * 5000,
]

ASSESSMENT_REPLIES = [
    "",
    "The run looks fine overall.",
    "[]",
    "{}",
    '{"assessments": null}',
    '{"assessments": {"dimension_id": "grounding"}}',
    '{"assessments": ["grounding"]}',
    '{"assessments": []}',
    '{"assessments": [{}]}',
    '{"assessments": [{"dimension_id": "grounding"}]}',
    '{"assessments": [{"dimension_id": "unknown", "score": 0.5}]}',
    '{"assessments": [{"dimension_id": 1, "score": 0.5}]}',
    '{"assessments": [{"dimension_id": ["grounding"], "score": 0.5}]}',
    '{"assessments": [{"dimension_id": {"id": "grounding"}, "score": 0.5}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5}, {"dimension_id": "grounding", "score": 1}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": "high"}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": null}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": [0.5]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 1.5}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": -0.5}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 95}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": NaN}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": Infinity}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 1e999}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 1' + "0" * 400 + "}]}",
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "confidence": "very"}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "confidence": 2}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "confidence": null}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": "0, 1"}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": 1}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [1.5]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [1.0]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": ["1"]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [true]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [null]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [[0]]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [4]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [-1]}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [1' + "0" * 40 + "]}]}",
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "explanation": {"why": "x"}}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": "0.5", "confidence": "1e-3"}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": true, "confidence": false}]}',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "evidence_steps": [3, 0, 3]}]}',
    'My assessment:\n{"assessments": [{"dimension_id": "efficiency", "score": 0.9}]}\nDone.',
    '```json\n{"assessments": [{"dimension_id": "efficiency", "score": 0.9}]}\n```',
    '{"assessments": [{"dimension_id": "efficiency", "score": 0.9}',
    '{"assessments": [{"dimension_id": "efficiency", "sco',
    '{"assessments": [{"dimension_id": "grounding", "score": 0.5, "explanation": "' + "z" * 5000 + '"}]}',
    "{" * 500,
]


def check_rubric(text):
    try:
        rubric = parse_rubric_reply("find the refund policy", text)
    except MalformedModelOutput:
        return None
    assert isinstance(rubric, TrajectoryRubric)
    assert rubric.dimensions
    for dimension in rubric.dimensions:
        assert dimension.dimension_id.strip() and len(dimension.dimension_id) <= 80
        assert dimension.description.strip() and len(dimension.description) <= 500
        assert math.isfinite(dimension.weight) and dimension.weight > 0
        assert isinstance(dimension.required, bool)
    assert len(set(rubric.dimension_ids)) == len(rubric.dimensions)
    assert TrajectoryRubric.from_document(json.loads(json.dumps(rubric.to_document()))) == rubric
    return rubric


def check_assessments(text):
    try:
        assessments = parse_assessment_reply(RUN, RUBRIC, text)
    except MalformedModelOutput:
        return None
    assert isinstance(assessments, tuple)
    seen = [assessment.dimension_id for assessment in assessments]
    assert len(set(seen)) == len(seen) and set(seen) <= set(RUBRIC.dimension_ids)
    for assessment in assessments:
        assert isinstance(assessment, RubricAssessment)
        assert assessment.trajectory_id == RUN.trajectory_id
        assert 0.0 <= assessment.score <= 1.0 and 0.0 <= assessment.confidence <= 1.0
        assert list(assessment.evidence_steps) == sorted(set(assessment.evidence_steps))
        assert all(0 <= step < len(RUN.steps) for step in assessment.evidence_steps)
        assert len(assessment.explanation) <= 1000
    score = score_trajectory_rubric(RUN, RUBRIC, assessments)
    assert 0.0 <= score.overall <= 1.0
    return assessments


@pytest.mark.parametrize("text", RUBRIC_REPLIES)
def test_rubric_corpus(text):
    check_rubric(text)


@pytest.mark.parametrize("text", ASSESSMENT_REPLIES)
def test_assessment_corpus(text):
    check_assessments(text)


def test_corpus_contains_both_outcomes():
    parsed = [check_rubric(text) for text in RUBRIC_REPLIES]
    assert any(p is not None for p in parsed) and any(p is None for p in parsed)
    parsed = [check_assessments(text) for text in ASSESSMENT_REPLIES]
    assert any(p is not None for p in parsed) and any(p is None for p in parsed)


def test_prose_and_fences_are_tolerated():
    prose = 'Here is the rubric: {"dimensions": [{"id": "a", "description": "d"}]} hope it helps'
    assert check_rubric(prose).dimension_ids == ("a",)
    fenced = '```json\n{"dimensions": [{"id": "a", "description": "d", "weight": 2}]}\n```'
    assert check_rubric(fenced).dimensions[0].weight == 2.0
    prose = 'My assessment:\n{"assessments": [{"dimension_id": "efficiency", "score": 0.9}]}\nDone.'
    assert check_assessments(prose)[0].score == 0.9
    fenced = '```json\n{"assessments": [{"dimension_id": "efficiency", "score": 0.9}]}\n```'
    assert check_assessments(fenced)[0].score == 0.9


def test_values_python_will_not_print_are_malformed():
    huge = 10**5000
    with pytest.raises(MalformedModelOutput):
        parse_trajectory_rubric("task", {"dimensions": [{"id": huge, "description": "d"}]})
    with pytest.raises(MalformedModelOutput):
        parse_trajectory_rubric("task", {"dimensions": [{"id": "a", "description": [huge]}]})
    with pytest.raises(MalformedModelOutput):
        parse_trajectory_rubric("task", {"dimensions": [{"id": "a", "description": "d", "weight": huge}]})
    row = {"dimension_id": "grounding", "score": 0.5, "explanation": huge}
    with pytest.raises(MalformedModelOutput):
        parse_rubric_assessments(RUN, RUBRIC, {"assessments": [row]})
    for field, value in (("score", huge), ("confidence", huge), ("evidence_steps", [huge])):
        row = {"dimension_id": "grounding", "score": 0.5, field: value}
        with pytest.raises(MalformedModelOutput):
            parse_rubric_assessments(RUN, RUBRIC, {"assessments": [row]})


def test_truncated_json_is_malformed():
    for text in ('{"dimensions": [{"id": "a", "description": "d"}', '{"dimensions": [{"id": "a", "descr'):
        with pytest.raises(MalformedModelOutput):
            parse_rubric_reply("task", text)
    with pytest.raises(MalformedModelOutput):
        parse_assessment_reply(RUN, RUBRIC, '{"assessments": [{"dimension_id": "efficiency", "score": 0.9}')


# --------------------------------------------------------------------------------------------------------------------
# Generated garbage

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _row(draw, fields):
    """A dict holding a random subset of `fields`, each drawn from its strategy."""
    row = {}
    for key, strategy in fields.items():
        if draw(st.booleans()):
            row[key] = draw(strategy)
    return row


@st.composite
def rubric_outputs(draw):
    fields = {
        "id": st.sampled_from(["a", "b", "", " "]) | json_values,
        "description": st.sampled_from(["d", "", "long " * 200]) | json_values,
        "weight": st.floats() | st.integers(-3, 3) | st.text(max_size=6) | json_values,
        "required": json_values,
    }
    plausible = {
        "id": st.text("abcdef_", min_size=1, max_size=4),
        "description": st.just("d"),
        "weight": st.floats(0.01, 10) | st.integers(1, 5),
        "required": st.booleans(),
    }
    if draw(st.booleans()):
        # mostly well-formed rows, so that the accepting path is exercised too
        rows = [{key: draw(strategy) for key, strategy in plausible.items()} for _ in range(draw(st.integers(1, 4)))]
        if rows and draw(st.booleans()):
            rows[draw(st.integers(0, len(rows) - 1))] |= _row(draw, fields)
        return {"dimensions": rows}
    rows = [_row(draw, fields) for _ in range(draw(st.integers(0, 4)))]
    if draw(st.integers(0, 9)) == 0:
        rows.append(draw(json_values))
    return draw(st.sampled_from([{"dimensions": rows}, rows, {"dimensions": draw(json_values)}, draw(json_values)]))


@st.composite
def assessment_outputs(draw):
    fields = {
        "dimension_id": st.sampled_from(["grounding", "efficiency", "other", ""]) | json_values,
        "score": st.floats() | st.integers(-2, 2) | st.sampled_from(["0.5", "x", "1e9"]) | json_values,
        "confidence": st.floats() | st.integers(-2, 2) | json_values,
        "evidence_steps": st.lists(st.integers(-2, 6) | st.booleans() | st.floats(), max_size=5) | json_values,
        "explanation": json_values,
    }
    rows = [_row(draw, fields) for _ in range(draw(st.integers(0, 3)))]
    if draw(st.integers(0, 9)) == 0:
        rows.append(draw(json_values))
    return draw(st.sampled_from([{"assessments": rows}, rows, {"assessments": draw(json_values)}]))


def _as_reply(draw, value):
    text = json.dumps(value, allow_nan=True)
    shape = draw(st.integers(0, 4))
    if shape == 1:
        return "Sure, here it is:\n" + text + "\nLet me know."
    if shape == 2:
        return "```json\n" + text + "\n```"
    if shape == 3:
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    return text


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(rubric_outputs())
def test_generated_rubric_outputs(output):
    with contextlib.suppress(MalformedModelOutput):
        parse_trajectory_rubric("task", output)


@FUZZ
@given(assessment_outputs())
def test_generated_assessment_outputs(output):
    try:
        assessments = parse_rubric_assessments(RUN, RUBRIC, output)
    except MalformedModelOutput:
        return
    score = score_trajectory_rubric(RUN, RUBRIC, assessments)
    assert 0.0 <= score.overall <= 1.0


@FUZZ
@given(st.data(), rubric_outputs())
def test_generated_rubric_replies(data, output):
    check_rubric(_as_reply(data.draw, output))


@FUZZ
@given(st.data(), assessment_outputs())
def test_generated_assessment_replies(data, output):
    check_assessments(_as_reply(data.draw, output))


@FUZZ
@given(st.text(max_size=300) | st.binary(max_size=100).map(lambda b: b.decode("latin-1")))
def test_arbitrary_text(text):
    check_rubric(text)
    check_assessments(text)
