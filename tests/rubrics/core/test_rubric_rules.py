"""rubrics.core.rubrics against trajectory-mining §2.9, rule by rule."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm.core import MalformedModelOutput, ModelRequest
from rubrics.core.prompts import JUDGE_ROLE, RUBRIC_ROLE, build_judge_request, build_rubric_request
from rubrics.core.rubrics import (
    TRAJECTORY_RUBRIC_VERSION,
    RubricAssessment,
    RubricDimension,
    RubricScore,
    TrajectoryRubric,
    parse_assessment_reply,
    parse_rubric_assessments,
    parse_rubric_reply,
    parse_trajectory_rubric,
    render_run_for_judge,
    render_task_for_rubric,
    score_trajectory_rubric,
)
from trajectories.core import TrajectoryRun, TrajectoryStep


def make_run(trajectory_id="run-1", steps=3, outcome="success"):
    return TrajectoryRun(
        trajectory_id=trajectory_id,
        steps=tuple(
            TrajectoryStep(i, f"tool_{i}", "inspect", {"query": f"q{i}"}, summary=f"saw {i}", ok=True)
            for i in range(steps)
        ),
        outcome=outcome,
    )


def make_rubric(*dimensions):
    dimensions = dimensions or (
        RubricDimension("accuracy", "answers are right", weight=2.0, required=True),
        RubricDimension("efficiency", "no wasted steps"),
        RubricDimension("safety", "no risky change", weight=1.0, required=True),
    )
    return TrajectoryRubric("answer the question", dimensions, TRAJECTORY_RUBRIC_VERSION)


def assess(dimension_id, score, confidence=1.0, trajectory_id="run-1", evidence=()):
    return RubricAssessment(trajectory_id, dimension_id, score, confidence, evidence)


# --------------------------------------------------------------------------------------------------------------------
# Constructors


def test_version_constant():
    assert TRAJECTORY_RUBRIC_VERSION == "trajectory-rubric-v1"


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("", "d"), {}),
        (("   ", "d"), {}),
        (("id", ""), {}),
        (("id", " \n"), {}),
        (("id", "d"), {"weight": 0}),
        (("id", "d"), {"weight": -1.5}),
        (("id", "d"), {"weight": 0.0}),
        (("id", "d"), {"weight": math.nan}),
        (("id", "d"), {"weight": math.inf}),
        ((None, "d"), {}),
    ],
)
def test_dimension_constructor_errors(args, kwargs):
    with pytest.raises(ValueError):
        RubricDimension(*args, **kwargs)


def test_dimension_defaults_and_positional_order():
    dimension = RubricDimension("id", "desc")
    assert (dimension.weight, dimension.required) == (1.0, False)
    dimension = RubricDimension("id", "desc", 3, True)
    assert dimension.weight == 3.0 and isinstance(dimension.weight, float)
    assert dimension.required is True


def test_rubric_constructor_errors():
    good = RubricDimension("a", "first")
    with pytest.raises(ValueError):
        TrajectoryRubric("", (good,), TRAJECTORY_RUBRIC_VERSION)
    with pytest.raises(ValueError):
        TrajectoryRubric("  ", (good,), TRAJECTORY_RUBRIC_VERSION)
    with pytest.raises(ValueError):
        TrajectoryRubric("task", (), TRAJECTORY_RUBRIC_VERSION)
    with pytest.raises(ValueError, match="unique"):
        TrajectoryRubric("task", (good, RubricDimension("a", "again")), TRAJECTORY_RUBRIC_VERSION)


def test_rubric_stores_a_tuple_and_round_trips():
    rubric = TrajectoryRubric("task", [RubricDimension("a", "first"), RubricDimension("b", "second", 2, True)])
    assert isinstance(rubric.dimensions, tuple)
    assert rubric.schema_version == TRAJECTORY_RUBRIC_VERSION
    assert rubric.dimension_ids == ("a", "b")
    document = rubric.to_document()
    assert document == {
        "schema_version": "trajectory-rubric-v1",
        "task": "task",
        "dimensions": [
            {"dimension_id": "a", "description": "first", "weight": 1.0, "required": False},
            {"dimension_id": "b", "description": "second", "weight": 2.0, "required": True},
        ],
    }
    again = TrajectoryRubric.from_document(document)
    assert again == rubric
    assert again.digest == rubric.digest


def test_rubric_digest_is_stable_and_order_sensitive():
    a, b = RubricDimension("a", "first"), RubricDimension("b", "second")
    first = TrajectoryRubric("task", (a, b))
    assert first.digest == TrajectoryRubric("task", (a, b)).digest
    assert len(first.digest) == 64 and int(first.digest, 16) >= 0
    assert first.digest != TrajectoryRubric("task", (b, a)).digest
    assert first.digest != TrajectoryRubric("other task", (a, b)).digest
    assert first.digest != TrajectoryRubric("task", (a, RubricDimension("b", "second", 2.0))).digest


@pytest.mark.parametrize(
    "document",
    [
        None,
        [],
        {"task": "t"},
        {"task": "t", "dimensions": "a"},
        {"task": "t", "dimensions": []},
        {"task": "t", "dimensions": [{"dimension_id": "a"}]},
        {"task": "", "dimensions": [{"dimension_id": "a", "description": "d"}]},
        {"task": "t", "dimensions": [{"dimension_id": "a", "description": "d", "weight": "heavy"}]},
    ],
)
def test_rubric_from_bad_document_is_a_value_error(document):
    with pytest.raises(ValueError):
        TrajectoryRubric.from_document(document)


def test_assessment_round_trip_and_normalisation():
    assessment = RubricAssessment("run-1", "a", 0.5, 0.25, [3, 1, 3], "because")
    assert assessment.evidence_steps == (1, 3)
    assert RubricAssessment.from_document(assessment.to_document()) == assessment
    assert assessment.to_document() == {
        "trajectory_id": "run-1",
        "dimension_id": "a",
        "score": 0.5,
        "confidence": 0.25,
        "evidence_steps": [1, 3],
        "explanation": "because",
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"trajectory_id": ""},
        {"dimension_id": " "},
        {"score": 1.5},
        {"score": -0.1},
        {"score": math.nan},
        {"score": True},
        {"score": "0.5"},
        {"confidence": 2},
        {"evidence_steps": [True]},
        {"evidence_steps": [-1]},
        {"evidence_steps": "12"},
        {"explanation": None},
    ],
)
def test_assessment_constructor_rejects_bad_values(kwargs):
    values = {"trajectory_id": "run-1", "dimension_id": "a", "score": 0.5} | kwargs
    with pytest.raises(ValueError):
        RubricAssessment(**values)


def test_score_mappings_are_read_only():
    score = score_trajectory_rubric(make_run(), make_rubric(), [assess("accuracy", 0.8)])
    assert isinstance(score.dimension_scores, MappingProxyType)
    assert isinstance(score.dimension_confidence, MappingProxyType)
    with pytest.raises(TypeError):
        score.dimension_scores["accuracy"] = 0.0
    with pytest.raises(TypeError):
        score.dimension_confidence["accuracy"] = 0.0
    assert score.to_document() == {
        "trajectory_id": "run-1",
        "overall": 0.8,
        "dimension_scores": {"accuracy": 0.8},
        "dimension_confidence": {"accuracy": 1.0},
        "missing_dimensions": ["efficiency", "safety"],
        "required_failures": ["safety"],
    }


# --------------------------------------------------------------------------------------------------------------------
# parse_trajectory_rubric


def test_parse_rubric_conversions():
    rubric = parse_trajectory_rubric(
        "task",
        {
            "dimensions": [
                {"id": "a", "description": "first"},
                {"id": 7, "description": "numeric id", "weight": "2.5", "required": 1},
                {"id": "c", "description": "third", "weight": 3, "required": ""},
            ]
        },
    )
    assert rubric.task == "task"
    assert rubric.schema_version == TRAJECTORY_RUBRIC_VERSION
    a, b, c = rubric.dimensions
    assert (a.dimension_id, a.weight, a.required) == ("a", 1.0, False)
    assert (b.dimension_id, b.weight, b.required) == ("7", 2.5, True)
    assert (c.weight, c.required) == (3.0, False)


def test_parse_rubric_required_is_plain_bool_conversion():
    rubric = parse_trajectory_rubric("task", {"dimensions": [{"id": "a", "description": "d", "required": "false"}]})
    # bool("false") is True: the spec converts with bool(), and we keep it.
    assert rubric.dimensions[0].required is True


def test_parse_rubric_truncates_id_and_description():
    rubric = parse_trajectory_rubric("task", {"dimensions": [{"id": "x" * 200, "description": "y" * 900}]})
    assert rubric.dimensions[0].dimension_id == "x" * 80
    assert rubric.dimensions[0].description == "y" * 500


def test_parse_rubric_truncation_can_make_ids_repeat():
    rows = [{"id": "x" * 80 + "1", "description": "d"}, {"id": "x" * 80 + "2", "description": "d"}]
    with pytest.raises(MalformedModelOutput, match="unique"):
        parse_trajectory_rubric("task", {"dimensions": rows})


@pytest.mark.parametrize("weight", ["heavy", None, [], {}, "", 10**400])
def test_parse_rubric_non_numeric_weight(weight):
    with pytest.raises(MalformedModelOutput) as raised:
        parse_trajectory_rubric("task", {"dimensions": [{"id": "a", "description": "d", "weight": weight}]})
    assert str(raised.value) == "rubric dimension weight must be numeric"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"id": "a", "description": "d", "weight": 0}], "weight"),
        ([{"id": "a", "description": "d", "weight": -2}], "weight"),
        ([{"id": "a", "description": "d", "weight": "nan"}], "weight"),
        ([{"id": "", "description": "d"}], "id"),
        ([{"description": "d"}], "id"),
        ([{"id": "a", "description": "   "}], "description"),
        ([{"id": "a"}], "description"),
        ([], "at least one"),
        ([{"id": "a", "description": "d"}, {"id": "a", "description": "e"}], "unique"),
    ],
)
def test_parse_rubric_value_errors_become_malformed(rows, message):
    with pytest.raises(MalformedModelOutput, match=message) as raised:
        parse_trajectory_rubric("task", {"dimensions": rows})
    assert not isinstance(raised.value, ValueError)


def test_parse_rubric_constructor_message_is_kept():
    with pytest.raises(ValueError) as expected:
        RubricDimension("a", "d", weight=0)
    with pytest.raises(MalformedModelOutput) as raised:
        parse_trajectory_rubric("task", {"dimensions": [{"id": "a", "description": "d", "weight": 0}]})
    assert str(raised.value) == str(expected.value)


def test_parse_rubric_blank_task_is_malformed_too():
    with pytest.raises(MalformedModelOutput):
        parse_trajectory_rubric(" ", {"dimensions": [{"id": "a", "description": "d"}]})


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ([], "trajectory-rubric-v1 must return a JSON object"),
        ("text", "trajectory-rubric-v1 must return a JSON object"),
        ({}, "trajectory-rubric-v1.dimensions must be a JSON array of objects"),
        ({"dimensions": {"id": "a"}}, "trajectory-rubric-v1.dimensions must be a JSON array of objects"),
        ({"dimensions": ["a"]}, "trajectory-rubric-v1.dimensions must be a JSON array of objects"),
    ],
)
def test_parse_rubric_require_list(output, message):
    with pytest.raises(MalformedModelOutput) as raised:
        parse_trajectory_rubric("task", output)
    assert str(raised.value) == message


# --------------------------------------------------------------------------------------------------------------------
# parse_rubric_assessments


def test_parse_assessments_builds_values():
    run, rubric = make_run(steps=4), make_rubric()
    assessments = parse_rubric_assessments(
        run,
        rubric,
        {
            "assessments": [
                {"dimension_id": "accuracy", "score": "0.75", "evidence_steps": [3, 0, 3, 1], "explanation": "fine"},
                {"dimension_id": "safety", "score": 1, "confidence": 0.5},
            ]
        },
    )
    first, second = assessments
    assert first == RubricAssessment("run-1", "accuracy", 0.75, 1.0, (0, 1, 3), "fine")
    assert second == RubricAssessment("run-1", "safety", 1.0, 0.5, (), "")
    assert isinstance(assessments, tuple)


def test_parse_assessments_truncates_explanation():
    (assessment,) = parse_rubric_assessments(
        make_run(), make_rubric(), {"assessments": [{"dimension_id": "safety", "score": 0, "explanation": "z" * 5000}]}
    )
    assert assessment.explanation == "z" * 1000


def test_parse_assessments_empty_list_is_allowed():
    assert parse_rubric_assessments(make_run(), make_rubric(), {"assessments": []}) == ()


UNKNOWN = "rubric assessment dimension is unknown or repeated"
NUMERIC = "rubric assessment score and confidence must be numeric"
RANGE = "rubric assessment score and confidence must be in [0, 1]"
EVIDENCE_TYPE = "rubric evidence steps must be integer indices"
EVIDENCE_RANGE = "rubric evidence is outside the trajectory"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"dimension_id": "nope", "score": 0.5}, UNKNOWN),
        ({"score": 0.5}, UNKNOWN),
        ({"dimension_id": ["accuracy"], "score": 0.5}, UNKNOWN),
        ({"dimension_id": "accuracy"}, NUMERIC),
        ({"dimension_id": "accuracy", "score": None}, NUMERIC),
        ({"dimension_id": "accuracy", "score": "high"}, NUMERIC),
        ({"dimension_id": "accuracy", "score": 0.5, "confidence": "sure"}, NUMERIC),
        ({"dimension_id": "accuracy", "score": 0.5, "confidence": None}, NUMERIC),
        ({"dimension_id": "accuracy", "score": 1.01}, RANGE),
        ({"dimension_id": "accuracy", "score": -0.01}, RANGE),
        ({"dimension_id": "accuracy", "score": "nan"}, RANGE),
        ({"dimension_id": "accuracy", "score": 0.5, "confidence": 7}, RANGE),
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": "1"}, EVIDENCE_TYPE),
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": None}, EVIDENCE_TYPE),
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": [1.0]}, EVIDENCE_TYPE),
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": ["1"]}, EVIDENCE_TYPE),
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": [True]}, EVIDENCE_TYPE),
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": [0, False]}, EVIDENCE_TYPE),
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": [3]}, EVIDENCE_RANGE),
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": [-1]}, EVIDENCE_RANGE),
    ],
)
def test_parse_assessment_errors(row, message):
    with pytest.raises(MalformedModelOutput) as raised:
        parse_rubric_assessments(make_run(steps=3), make_rubric(), {"assessments": [row]})
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("row", "message"),
    [
        # unknown dimension is checked before the numbers
        ({"dimension_id": "nope", "score": "high", "evidence_steps": [99]}, UNKNOWN),
        # numbers before their range
        ({"dimension_id": "accuracy", "score": 5, "confidence": "x"}, NUMERIC),
        # range before evidence
        ({"dimension_id": "accuracy", "score": 5, "evidence_steps": ["x"]}, RANGE),
        # evidence type before evidence bounds
        ({"dimension_id": "accuracy", "score": 0.5, "evidence_steps": [99, "x"]}, EVIDENCE_TYPE),
    ],
)
def test_parse_assessment_error_order(row, message):
    with pytest.raises(MalformedModelOutput) as raised:
        parse_rubric_assessments(make_run(steps=3), make_rubric(), {"assessments": [row]})
    assert str(raised.value) == message


def test_parse_assessment_repeated_dimension():
    rows = [{"dimension_id": "accuracy", "score": 0.5}, {"dimension_id": "accuracy", "score": 0.6}]
    with pytest.raises(MalformedModelOutput) as raised:
        parse_rubric_assessments(make_run(), make_rubric(), {"assessments": rows})
    assert str(raised.value) == UNKNOWN


def test_parse_assessment_evidence_bounds_on_empty_run():
    with pytest.raises(MalformedModelOutput, match="outside"):
        parse_rubric_assessments(
            make_run(steps=0),
            make_rubric(),
            {"assessments": [{"dimension_id": "safety", "score": 1, "evidence_steps": [0]}]},
        )


def test_parse_assessment_evidence_upper_bound_is_exclusive():
    (ok,) = parse_rubric_assessments(
        make_run(steps=3),
        make_rubric(),
        {"assessments": [{"dimension_id": "safety", "score": 1, "evidence_steps": [2]}]},
    )
    assert ok.evidence_steps == (2,)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (None, "trajectory-rubric-v1 must return a JSON object"),
        ({"dimensions": []}, "trajectory-rubric-v1.assessments must be a JSON array of objects"),
        ({"assessments": [1]}, "trajectory-rubric-v1.assessments must be a JSON array of objects"),
    ],
)
def test_parse_assessments_require_list(output, message):
    with pytest.raises(MalformedModelOutput) as raised:
        parse_rubric_assessments(make_run(), make_rubric(), output)
    assert str(raised.value) == message


# --------------------------------------------------------------------------------------------------------------------
# raw replies


def test_reply_helpers_extract_the_first_object():
    text = 'Here you go:\n```json\n{"dimensions": [{"id": "a", "description": "d"}]}\n```\nThanks.'
    rubric = parse_rubric_reply("task", text)
    assert rubric.dimension_ids == ("a",)
    reply = 'Sure. {"assessments": [{"dimension_id": "a", "score": 0.5}]} and {"other": 1}'
    (assessment,) = parse_assessment_reply(make_run(), rubric, reply)
    assert assessment.score == 0.5


@pytest.mark.parametrize("text", ["", "no json here", "[1, 2]", '{"dimensions": [', None, 42])
def test_reply_helpers_without_an_object_are_malformed(text):
    with pytest.raises(MalformedModelOutput):
        parse_rubric_reply("task", text)
    with pytest.raises(MalformedModelOutput):
        parse_assessment_reply(make_run(), make_rubric(), text)


# --------------------------------------------------------------------------------------------------------------------
# score_trajectory_rubric


def test_dimension_score_is_confidence_weighted():
    rubric = make_rubric(RubricDimension("a", "d"))
    score = score_trajectory_rubric(make_run(), rubric, [assess("a", 1.0, 0.75), assess("a", 0.0, 0.25)])
    assert score.dimension_scores["a"] == pytest.approx(0.75)
    assert score.dimension_confidence["a"] == pytest.approx(0.5)
    assert score.overall == pytest.approx(0.75)


def test_dimension_score_falls_back_to_plain_mean_when_confidence_sums_to_zero():
    rubric = make_rubric(RubricDimension("a", "d"))
    score = score_trajectory_rubric(make_run(), rubric, [assess("a", 1.0, 0.0), assess("a", 0.2, 0.0)])
    assert score.dimension_scores["a"] == pytest.approx(0.6)
    assert score.dimension_confidence["a"] == 0.0


def test_zero_confidence_assessment_does_not_count_when_others_have_confidence():
    rubric = make_rubric(RubricDimension("a", "d"))
    score = score_trajectory_rubric(make_run(), rubric, [assess("a", 1.0, 0.0), assess("a", 0.2, 0.5)])
    assert score.dimension_scores["a"] == pytest.approx(0.2)
    assert score.dimension_confidence["a"] == pytest.approx(0.25)


def test_overall_is_weighted_over_assessed_dimensions_only():
    rubric = make_rubric(
        RubricDimension("a", "d", weight=3.0),
        RubricDimension("b", "d", weight=1.0),
        RubricDimension("c", "d", weight=100.0),
    )
    score = score_trajectory_rubric(make_run(), rubric, [assess("a", 1.0), assess("b", 0.0)])
    # c is missing: weights renormalise over a and b (3 / (3 + 1)), c does not pull the overall down
    assert score.overall == pytest.approx(0.75)
    assert score.missing_dimensions == ("c",)
    assert dict(score.dimension_scores) == {"a": 1.0, "b": 0.0}


def test_overall_is_zero_when_nothing_was_assessed():
    score = score_trajectory_rubric(make_run(), make_rubric(), [])
    assert score.overall == 0.0
    assert score.missing_dimensions == ("accuracy", "efficiency", "safety")
    assert score.required_failures == ("accuracy", "safety")
    assert dict(score.dimension_scores) == {} and dict(score.dimension_confidence) == {}


def test_missing_and_failures_follow_rubric_order():
    rubric = make_rubric(
        RubricDimension("z", "d", required=True),
        RubricDimension("m", "d"),
        RubricDimension("a", "d", required=True),
        RubricDimension("b", "d"),
    )
    score = score_trajectory_rubric(make_run(), rubric, [assess("m", 0.1), assess("z", 0.1)])
    assert score.missing_dimensions == ("a", "b")
    assert score.required_failures == ("z", "a")
    assert tuple(score.dimension_scores) == ("z", "m")


def test_required_failure_is_strictly_below_the_minimum():
    rubric = make_rubric(RubricDimension("a", "d", required=True), RubricDimension("b", "d", required=True))
    score = score_trajectory_rubric(make_run(), rubric, [assess("a", 0.5), assess("b", 0.49)])
    assert score.required_failures == ("b",)
    score = score_trajectory_rubric(make_run(), rubric, [assess("a", 0.7), assess("b", 0.69)], required_minimum=0.7)
    assert score.required_failures == ("b",)
    assert (
        score_trajectory_rubric(
            make_run(), rubric, [assess("a", 0.0), assess("b", 0.0)], required_minimum=0.0
        ).required_failures
        == ()
    )
    assert score_trajectory_rubric(
        make_run(), rubric, [assess("a", 1.0), assess("b", 0.99)], required_minimum=1.0
    ).required_failures == ("b",)


def test_optional_dimensions_never_fail():
    rubric = make_rubric(RubricDimension("a", "d"))
    score = score_trajectory_rubric(make_run(), rubric, [assess("a", 0.0)])
    assert score.required_failures == ()
    assert score.passed_required


def test_repeated_assessments_from_several_judges_are_pooled():
    rubric = make_rubric(RubricDimension("a", "d", weight=1.0), RubricDimension("b", "d", weight=1.0))
    judge_one = [assess("a", 0.8, 1.0), assess("b", 0.4, 0.5)]
    judge_two = [assess("a", 0.4, 1.0), assess("b", 1.0, 0.5)]
    score = score_trajectory_rubric(make_run(), rubric, judge_one + judge_two)
    assert score.dimension_scores["a"] == pytest.approx(0.6)
    assert score.dimension_scores["b"] == pytest.approx(0.7)
    assert score.overall == pytest.approx(0.65)


def test_score_errors():
    run, rubric = make_run(), make_rubric()
    with pytest.raises(ValueError, match="another trajectory"):
        score_trajectory_rubric(run, rubric, [assess("accuracy", 0.5, trajectory_id="run-2")])
    with pytest.raises(ValueError, match="unknown dimension"):
        score_trajectory_rubric(run, rubric, [assess("nope", 0.5)])
    with pytest.raises(ValueError) as raised:
        score_trajectory_rubric(run, rubric, [assess("accuracy", 0.5, trajectory_id="run-2")])
    assert str(raised.value) == "rubric assessment belongs to another trajectory"
    with pytest.raises(ValueError) as raised:
        score_trajectory_rubric(run, rubric, [assess("nope", 0.5)])
    assert str(raised.value) == "rubric assessment uses an unknown dimension"


@pytest.mark.parametrize("minimum", [-0.01, 1.01, math.nan, math.inf, "0.5", None])
def test_required_minimum_bounds(minimum):
    with pytest.raises(ValueError):
        score_trajectory_rubric(make_run(), make_rubric(), [], required_minimum=minimum)


@pytest.mark.parametrize("minimum", [0, 0.0, 1, 1.0])
def test_required_minimum_edges_are_allowed(minimum):
    """Both ends are valid and inclusive: a required dimension scoring exactly the minimum passes, below it fails."""
    at = [assess("accuracy", float(minimum)), assess("safety", float(minimum))]
    assert score_trajectory_rubric(make_run(), make_rubric(), at, required_minimum=minimum).required_failures == ()
    if minimum:
        below = [assess("accuracy", 0.99), assess("safety", 1.0)]
        score = score_trajectory_rubric(make_run(), make_rubric(), below, required_minimum=minimum)
        assert score.required_failures == ("accuracy",)
    missing = score_trajectory_rubric(make_run(), make_rubric(), [], required_minimum=minimum)
    assert missing.required_failures == ("accuracy", "safety")


def test_score_errors_are_not_malformed_output():
    with pytest.raises(ValueError) as raised:
        score_trajectory_rubric(make_run(), make_rubric(), [assess("nope", 0.5)])
    assert not isinstance(raised.value, MalformedModelOutput)


DIMENSION_IDS = ("a", "b", "c", "d")


@st.composite
def rubric_and_assessments(draw):
    count = draw(st.integers(1, len(DIMENSION_IDS)))
    dimensions = tuple(
        RubricDimension(
            DIMENSION_IDS[i],
            "d",
            weight=draw(st.floats(1e-6, 1e6, allow_nan=False)),
            required=draw(st.booleans()),
        )
        for i in range(count)
    )
    unit = st.floats(0.0, 1.0, allow_nan=False)
    assessments = draw(
        st.lists(
            st.builds(assess, st.sampled_from(DIMENSION_IDS[:count]), unit, unit),
            max_size=12,
        )
    )
    return TrajectoryRubric("task", dimensions), assessments


@settings(max_examples=300, deadline=None)
@given(rubric_and_assessments(), st.floats(0.0, 1.0, allow_nan=False))
def test_scores_stay_in_the_unit_interval(case, minimum):
    rubric, assessments = case
    score = score_trajectory_rubric(make_run(), rubric, assessments, required_minimum=minimum)
    assert 0.0 <= score.overall <= 1.0
    for value in (*score.dimension_scores.values(), *score.dimension_confidence.values()):
        assert 0.0 <= value <= 1.0
    assessed = {a.dimension_id for a in assessments}
    assert set(score.dimension_scores) == assessed
    assert set(score.missing_dimensions) == set(rubric.dimension_ids) - assessed
    for dimension_id, value in score.dimension_scores.items():
        own = [a.score for a in assessments if a.dimension_id == dimension_id]
        assert min(own) <= value <= max(own)
    if score.dimension_scores:
        assert min(score.dimension_scores.values()) <= score.overall <= max(score.dimension_scores.values())


# --------------------------------------------------------------------------------------------------------------------
# rendering and prompts


def test_render_run_for_judge_is_compact_and_deterministic():
    run = TrajectoryRun(
        trajectory_id="run-9",
        steps=(
            TrajectoryStep(
                0, "search", "discover", {"query": "refund\npolicy " + "x" * 200, "limit": 5}, "3 hits", True
            ),
            TrajectoryStep(1, "read_document", "inspect", {}, "", False),
            TrajectoryStep(2, "answer", "other", {"flag": None, "draft": True}, "done " * 100),
        ),
        outcome="failure",
    )
    rubric = make_rubric()
    text = render_run_for_judge(run, rubric)
    assert text == render_run_for_judge(run, rubric)
    lines = text.splitlines()
    assert "trajectory run-9 (outcome: failure, steps: 3)" in lines
    step_lines = [line for line in lines if line.startswith("[")]
    assert len(step_lines) == 3
    assert step_lines[0].startswith('[0] search | ok | limit=5 query="refund policy xxx')
    assert step_lines[1] == "[1] read_document | failed | - | -"
    assert step_lines[2].startswith("[2] answer | unknown | draft=true flag=null | done done")
    assert max(len(line) for line in step_lines) < 300
    assert "- accuracy (weight 2, required): answers are right" in lines
    assert "- efficiency (weight 1): no wasted steps" in lines


def test_render_caps_arguments_and_steps():
    arguments = {f"k{i}": i for i in range(10)}
    run = TrajectoryRun(trajectory_id="long", steps=tuple(TrajectoryStep(i, "t", "other", arguments) for i in range(5)))
    text = render_run_for_judge(run, make_rubric(), max_steps=2)
    assert "(+4 more)" in text
    assert "[1] t" in text and "[2] t" not in text
    assert "(… 3 more steps not shown)" in text


def test_render_task_for_rubric():
    runs = [make_run("r1", steps=2), make_run("r2", steps=0, outcome="unknown")]
    text = render_task_for_rubric("  find the\nrefund policy ", runs)
    assert text == render_task_for_rubric("  find the\nrefund policy ", runs)
    assert text.startswith("TASK\nfind the refund policy\n\nEXAMPLE RUNS (2)")
    assert "--- example 1: trajectory r1 (outcome: success, steps: 2)" in text
    assert "--- example 2: trajectory r2 (outcome: unknown, steps: 0)\n(no steps)" in text
    assert '[1] tool_1 | ok | query="q1" | saw 1' in text
    with pytest.raises(ValueError):
        render_task_for_rubric(" ", runs)


def test_prompt_builders():
    runs = [make_run("r1"), make_run("r2")]
    request = build_rubric_request("find the refund policy", runs)
    assert isinstance(request, ModelRequest)
    assert request.role == RUBRIC_ROLE == "rubric"
    assert '"dimensions"' in request.system
    assert "find the refund policy" in request.parts[0]
    assert request.metadata["recipe"] == TRAJECTORY_RUBRIC_VERSION

    rubric = make_rubric()
    request = build_judge_request(runs[0], rubric)
    assert request.role == JUDGE_ROLE == "judge"
    assert '"assessments"' in request.system and "evidence_steps" in request.system
    assert "[2] tool_2" in request.parts[0]
    assert request.metadata["rubric_digest"] == rubric.digest
    assert request.metadata["trajectory_id"] == "r1"
    assert build_judge_request(runs[0], rubric) == request


def test_rubric_score_is_a_value():
    score = RubricScore("run-1", 0.5, {"a": 0.5}, {"a": 1.0}, (), ())
    assert score.passed_required
