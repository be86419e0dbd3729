"""Trajectory rubrics (trajectory-mining §2.9): a model proposes weighted dimensions for a task, judges assess one run
per dimension with evidence step indices, and `score_trajectory_rubric` folds the assessments into one score.

Bad caller input raises ValueError; a rejected model reply raises MalformedModelOutput (a RuntimeError).

A pure core (import-linter: no Django, no app module outside the cores), so it never imports `trajectories`: a run
is anything with a `trajectory_id` and a sequence of `steps` (trajectories.core.TrajectoryRun fits); a step is read
through its `ordinal`, `tool`, `arguments`, `ok` and `summary` attributes only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from common.canonical import canonical_json, digest_hex
from llm.core import MalformedModelOutput, extract_json_object, require_list

TRAJECTORY_RUBRIC_VERSION = "trajectory-rubric-v1"

DIMENSION_ID_MAX_CHARS = 80
DIMENSION_DESCRIPTION_MAX_CHARS = 500
EXPLANATION_MAX_CHARS = 1000

# Rendering limits for the model prompts (our choice; the spec says nothing about prompts).
RENDER_TEXT_MAX_CHARS = 300
RENDER_SUMMARY_MAX_CHARS = 160
RENDER_ARGUMENT_MAX_CHARS = 60
RENDER_MAX_ARGUMENTS = 6
RENDER_MAX_STEPS = 200


class StepLike(Protocol):
    ordinal: int
    tool: str
    arguments: Mapping[str, Any]
    summary: str
    ok: bool | None


class RunLike(Protocol):
    trajectory_id: str
    steps: Sequence[StepLike]


# --------------------------------------------------------------------------------------------------------------------
# Value types


def _is_blank(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _unit_interval(value: Any, name: str) -> float:
    if not _is_number(value) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1]")
    return float(value)


@dataclass(frozen=True)
class RubricDimension:
    dimension_id: str
    description: str
    weight: float = 1.0
    required: bool = False

    def __post_init__(self) -> None:
        if _is_blank(self.dimension_id):
            raise ValueError("rubric dimension id must be a non-blank string")
        if _is_blank(self.description):
            raise ValueError("rubric dimension description must be a non-blank string")
        if not _is_number(self.weight) or not math.isfinite(self.weight) or self.weight <= 0:
            raise ValueError("rubric dimension weight must be a finite number > 0")
        if not isinstance(self.required, bool):
            raise ValueError("rubric dimension required must be a bool")
        object.__setattr__(self, "weight", float(self.weight))

    def to_document(self) -> dict[str, Any]:
        return {
            "dimension_id": self.dimension_id,
            "description": self.description,
            "weight": self.weight,
            "required": self.required,
        }

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> RubricDimension:
        if not isinstance(value, Mapping):
            raise ValueError("a rubric dimension document must be a mapping")
        return cls(
            dimension_id=value.get("dimension_id"),
            description=value.get("description"),
            weight=value.get("weight", 1.0),
            required=value.get("required", False),
        )


@dataclass(frozen=True)
class TrajectoryRubric:
    task: str
    dimensions: tuple[RubricDimension, ...]
    schema_version: str = TRAJECTORY_RUBRIC_VERSION

    def __post_init__(self) -> None:
        if _is_blank(self.task):
            raise ValueError("rubric task must be a non-blank string")
        if isinstance(self.dimensions, str | bytes | Mapping) or not isinstance(self.dimensions, Iterable):
            raise ValueError("rubric dimensions must be a sequence of RubricDimension")
        dimensions = tuple(self.dimensions)
        if not dimensions:
            raise ValueError("a rubric needs at least one dimension")
        if not all(isinstance(dimension, RubricDimension) for dimension in dimensions):
            raise ValueError("rubric dimensions must be a sequence of RubricDimension")
        ids = [dimension.dimension_id for dimension in dimensions]
        if len(set(ids)) != len(ids):
            raise ValueError("rubric dimension ids must be unique")
        if _is_blank(self.schema_version):
            raise ValueError("rubric schema_version must be a non-blank string")
        object.__setattr__(self, "dimensions", dimensions)

    @property
    def dimension_ids(self) -> tuple[str, ...]:
        return tuple(dimension.dimension_id for dimension in self.dimensions)

    def dimension(self, dimension_id: str) -> RubricDimension:
        for dimension in self.dimensions:
            if dimension.dimension_id == dimension_id:
                return dimension
        raise KeyError(dimension_id)

    def to_document(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "task": self.task,
            "dimensions": [dimension.to_document() for dimension in self.dimensions],
        }

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> TrajectoryRubric:
        if not isinstance(value, Mapping):
            raise ValueError("a rubric document must be a mapping")
        rows = value.get("dimensions")
        if not isinstance(rows, list | tuple):
            raise ValueError("a rubric document needs a list of dimensions")
        return cls(
            task=value.get("task"),
            dimensions=tuple(RubricDimension.from_document(row) for row in rows),
            schema_version=value.get("schema_version", TRAJECTORY_RUBRIC_VERSION),
        )

    @property
    def digest(self) -> str:
        """SHA-256 hex of the canonical JSON of `to_document()`: dimension order is part of it."""
        return digest_hex(self.to_document())


@dataclass(frozen=True)
class RubricAssessment:
    trajectory_id: str
    dimension_id: str
    score: float
    confidence: float = 1.0
    evidence_steps: tuple[int, ...] = ()
    explanation: str = ""

    def __post_init__(self) -> None:
        if _is_blank(self.trajectory_id):
            raise ValueError("rubric assessment trajectory_id must be a non-blank string")
        if _is_blank(self.dimension_id):
            raise ValueError("rubric assessment dimension_id must be a non-blank string")
        object.__setattr__(self, "score", _unit_interval(self.score, "rubric assessment score"))
        object.__setattr__(self, "confidence", _unit_interval(self.confidence, "rubric assessment confidence"))
        steps = self.evidence_steps
        if isinstance(steps, str | bytes | Mapping) or not isinstance(steps, Iterable):
            raise ValueError("rubric evidence steps must be integer indices")
        steps = tuple(steps)
        if not all(isinstance(step, int) and not isinstance(step, bool) and step >= 0 for step in steps):
            raise ValueError("rubric evidence steps must be non-negative integer indices")
        object.__setattr__(self, "evidence_steps", tuple(sorted(set(steps))))
        if not isinstance(self.explanation, str):
            raise ValueError("rubric assessment explanation must be a string")

    def to_document(self) -> dict[str, Any]:
        return {
            "trajectory_id": self.trajectory_id,
            "dimension_id": self.dimension_id,
            "score": self.score,
            "confidence": self.confidence,
            "evidence_steps": list(self.evidence_steps),
            "explanation": self.explanation,
        }

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> RubricAssessment:
        if not isinstance(value, Mapping):
            raise ValueError("a rubric assessment document must be a mapping")
        if "score" not in value:
            raise ValueError("a rubric assessment document needs a score")
        return cls(
            trajectory_id=value.get("trajectory_id"),
            dimension_id=value.get("dimension_id"),
            score=value["score"],
            confidence=value.get("confidence", 1.0),
            evidence_steps=value.get("evidence_steps", ()),
            explanation=value.get("explanation", ""),
        )


@dataclass(frozen=True)
class RubricScore:
    trajectory_id: str
    overall: float
    dimension_scores: Mapping[str, float] = field(default_factory=dict)
    dimension_confidence: Mapping[str, float] = field(default_factory=dict)
    missing_dimensions: tuple[str, ...] = ()
    required_failures: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimension_scores", MappingProxyType(dict(self.dimension_scores)))
        object.__setattr__(self, "dimension_confidence", MappingProxyType(dict(self.dimension_confidence)))
        object.__setattr__(self, "missing_dimensions", tuple(self.missing_dimensions))
        object.__setattr__(self, "required_failures", tuple(self.required_failures))

    @property
    def passed_required(self) -> bool:
        """True when no required dimension is missing or below the minimum."""
        return not self.required_failures

    def to_document(self) -> dict[str, Any]:
        return {
            "trajectory_id": self.trajectory_id,
            "overall": self.overall,
            "dimension_scores": dict(self.dimension_scores),
            "dimension_confidence": dict(self.dimension_confidence),
            "missing_dimensions": list(self.missing_dimensions),
            "required_failures": list(self.required_failures),
        }


# --------------------------------------------------------------------------------------------------------------------
# Parsers of model output


def _number_or_malformed(value: Any, message: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise MalformedModelOutput(message) from None


def _text(value: Any, limit: int, name: str) -> str:
    """`str(value)` truncated; a missing or null value is the empty string."""
    if value is None:
        return ""
    try:
        return str(value)[:limit]
    except ValueError:  # e.g. an int with more digits than Python will print
        raise MalformedModelOutput(f"{name} cannot be read as text") from None


def parse_trajectory_rubric(task: str, model_output: Any) -> TrajectoryRubric:
    """A rubric from a parsed model reply `{"dimensions": [{"id", "description", "weight"?, "required"?}, ...]}`."""
    rows = require_list(model_output, "dimensions", TRAJECTORY_RUBRIC_VERSION)
    dimensions = []
    try:
        for row in rows:
            weight = _number_or_malformed(row.get("weight", 1.0), "rubric dimension weight must be numeric")
            dimensions.append(
                RubricDimension(
                    dimension_id=_text(row.get("id"), DIMENSION_ID_MAX_CHARS, "rubric dimension id"),
                    description=_text(
                        row.get("description"), DIMENSION_DESCRIPTION_MAX_CHARS, "rubric dimension description"
                    ),
                    weight=weight,
                    required=bool(row.get("required", False)),
                )
            )
        return TrajectoryRubric(task=task, dimensions=tuple(dimensions), schema_version=TRAJECTORY_RUBRIC_VERSION)
    except ValueError as error:
        raise MalformedModelOutput(str(error)) from None


def _evidence_steps(value: Any, step_count: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise MalformedModelOutput("rubric evidence steps must be integer indices")
    steps = tuple(sorted(set(value)))
    if any(not 0 <= step < step_count for step in steps):
        raise MalformedModelOutput("rubric evidence is outside the trajectory")
    return steps


def parse_rubric_assessments(run: RunLike, rubric: TrajectoryRubric, model_output: Any) -> tuple[RubricAssessment, ...]:
    """Assessments of `run` from a parsed judge reply `{"assessments": [{"dimension_id", "score", ...}, ...]}`.

    Each dimension at most once per reply; checks run per row in this order: dimension, numbers, range, evidence.
    """
    rows = require_list(model_output, "assessments", TRAJECTORY_RUBRIC_VERSION)
    known = set(rubric.dimension_ids)
    step_count = len(run.steps)
    seen: set[str] = set()
    assessments = []
    for row in rows:
        dimension_id = row.get("dimension_id")
        if not isinstance(dimension_id, str) or dimension_id not in known or dimension_id in seen:
            raise MalformedModelOutput("rubric assessment dimension is unknown or repeated")
        seen.add(dimension_id)
        message = "rubric assessment score and confidence must be numeric"
        if "score" not in row:
            raise MalformedModelOutput(message)
        score = _number_or_malformed(row["score"], message)
        confidence = _number_or_malformed(row.get("confidence", 1.0), message)
        if not (0.0 <= score <= 1.0 and 0.0 <= confidence <= 1.0):
            raise MalformedModelOutput("rubric assessment score and confidence must be in [0, 1]")
        evidence = _evidence_steps(row.get("evidence_steps", []), step_count)
        assessments.append(
            RubricAssessment(
                trajectory_id=run.trajectory_id,
                dimension_id=dimension_id,
                score=score,
                confidence=confidence,
                evidence_steps=evidence,
                explanation=_text(row.get("explanation"), EXPLANATION_MAX_CHARS, "rubric assessment explanation"),
            )
        )
    return tuple(assessments)


def parse_rubric_reply(task: str, text: str) -> TrajectoryRubric:
    """A rubric from a model's raw reply: the first JSON object in it (prose and code fences tolerated)."""
    return parse_trajectory_rubric(task, extract_json_object(text, recipe=TRAJECTORY_RUBRIC_VERSION))


def parse_assessment_reply(run: RunLike, rubric: TrajectoryRubric, text: str) -> tuple[RubricAssessment, ...]:
    """Assessments from a judge's raw reply: the first JSON object in it (prose and code fences tolerated)."""
    return parse_rubric_assessments(run, rubric, extract_json_object(text, recipe=TRAJECTORY_RUBRIC_VERSION))


# --------------------------------------------------------------------------------------------------------------------
# Scoring


def _bounded_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    """Σ(v·w)/Σw, kept inside [min(values), max(values)] against rounding."""
    total = math.fsum(weights)
    mean = math.fsum(v * w for v, w in zip(values, weights, strict=True)) / total
    return min(max(mean, min(values)), max(values))


def score_trajectory_rubric(
    run: RunLike,
    rubric: TrajectoryRubric,
    assessments: Iterable[RubricAssessment],
    *,
    required_minimum: float = 0.5,
) -> RubricScore:
    """Fold assessments (several per dimension allowed, e.g. from several judges) into one RubricScore.

    Dimension score: confidence-weighted mean (plain mean when every confidence is 0); dimension confidence: mean.
    Overall: weight-weighted mean over the assessed dimensions only, 0.0 when none. Required failures: required
    dimensions that are missing or score strictly below `required_minimum`.
    """
    if not _is_number(required_minimum) or not 0.0 <= required_minimum <= 1.0:
        raise ValueError("required_minimum must be in [0, 1]")
    known = set(rubric.dimension_ids)
    grouped: dict[str, list[RubricAssessment]] = {}
    for assessment in assessments:
        if not isinstance(assessment, RubricAssessment):
            raise ValueError("assessments must be RubricAssessment values")
        if assessment.trajectory_id != run.trajectory_id:
            raise ValueError("rubric assessment belongs to another trajectory")
        if assessment.dimension_id not in known:
            raise ValueError("rubric assessment uses an unknown dimension")
        grouped.setdefault(assessment.dimension_id, []).append(assessment)

    scores: dict[str, float] = {}
    confidence: dict[str, float] = {}
    for dimension in rubric.dimensions:
        group = grouped.get(dimension.dimension_id)
        if not group:
            continue
        values = [a.score for a in group]
        confidences = [a.confidence for a in group]
        if math.fsum(confidences) == 0:
            scores[dimension.dimension_id] = _bounded_mean(values, [1.0] * len(values))
        else:
            scores[dimension.dimension_id] = _bounded_mean(values, confidences)
        confidence[dimension.dimension_id] = _bounded_mean(confidences, [1.0] * len(confidences))

    assessed = [d for d in rubric.dimensions if d.dimension_id in scores]
    if assessed:
        overall = _bounded_mean([scores[d.dimension_id] for d in assessed], [d.weight for d in assessed])
    else:
        overall = 0.0
    missing = tuple(d.dimension_id for d in rubric.dimensions if d.dimension_id not in scores)
    failures = tuple(
        d.dimension_id
        for d in rubric.dimensions
        if d.required and (d.dimension_id not in scores or scores[d.dimension_id] < required_minimum)
    )
    return RubricScore(
        trajectory_id=run.trajectory_id,
        overall=overall,
        dimension_scores=scores,
        dimension_confidence=confidence,
        missing_dimensions=missing,
        required_failures=failures,
    )


# --------------------------------------------------------------------------------------------------------------------
# Rendering for the model prompts


def _one_line(value: Any, limit: int) -> str:
    """Whitespace collapsed to single spaces, cut to `limit` characters with an ellipsis."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _argument_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(_one_line(value, RENDER_ARGUMENT_MAX_CHARS), ensure_ascii=False)
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(_one_line(value, RENDER_ARGUMENT_MAX_CHARS), ensure_ascii=False)


def _render_arguments(arguments: Any) -> str:
    if not isinstance(arguments, Mapping) or not arguments:
        return "-"
    keys = sorted(arguments, key=str)
    shown = [f"{_one_line(key, 40)}={_argument_value(arguments[key])}" for key in keys[:RENDER_MAX_ARGUMENTS]]
    if len(keys) > RENDER_MAX_ARGUMENTS:
        shown.append(f"(+{len(keys) - RENDER_MAX_ARGUMENTS} more)")
    return " ".join(shown)


def _render_ok(ok: Any) -> str:
    if ok is True:
        return "ok"
    if ok is False:
        return "failed"
    return "unknown"


def render_steps(run: RunLike, *, max_steps: int = RENDER_MAX_STEPS) -> str:
    """One line per step: `[index] tool | ok | key arguments | observation`. The index is the step's position."""
    lines = []
    steps = tuple(run.steps)
    for index, step in enumerate(steps[:max_steps]):
        tool = _one_line(getattr(step, "tool", "") or "unknown", 60)
        observation = _one_line(getattr(step, "summary", "") or "", RENDER_SUMMARY_MAX_CHARS) or "-"
        arguments = _render_arguments(getattr(step, "arguments", None))
        lines.append(f"[{index}] {tool} | {_render_ok(getattr(step, 'ok', None))} | {arguments} | {observation}")
    if len(steps) > max_steps:
        lines.append(f"(… {len(steps) - max_steps} more steps not shown)")
    if not lines:
        lines.append("(no steps)")
    return "\n".join(lines)


def _run_header(run: RunLike) -> str:
    outcome = getattr(run, "outcome", "unknown")
    count = len(tuple(run.steps))
    return f"trajectory {_one_line(run.trajectory_id, 160)} (outcome: {_one_line(outcome, 20)}, steps: {count})"


def render_rubric(rubric: TrajectoryRubric) -> str:
    """The rubric as a list: `- id (weight w[, required]): description`."""
    lines = [f"task: {_one_line(rubric.task, RENDER_TEXT_MAX_CHARS)}", "dimensions:"]
    for dimension in rubric.dimensions:
        flags = f"weight {dimension.weight:g}" + (", required" if dimension.required else "")
        description = _one_line(dimension.description, DIMENSION_DESCRIPTION_MAX_CHARS)
        lines.append(f"- {dimension.dimension_id} ({flags}): {description}")
    return "\n".join(lines)


def render_run_for_judge(run: RunLike, rubric: TrajectoryRubric, *, max_steps: int = RENDER_MAX_STEPS) -> str:
    """The rubric, then the run's steps, as the judge sees them. Deterministic: same inputs, same text."""
    return "\n".join(
        [
            "RUBRIC",
            render_rubric(rubric),
            "",
            "TRAJECTORY",
            _run_header(run),
            render_steps(run, max_steps=max_steps),
        ]
    )


def render_task_for_rubric(task: str, runs: Iterable[RunLike], *, max_steps: int = RENDER_MAX_STEPS) -> str:
    """The task, then each example run in the given order, as the rubric author sees them."""
    if _is_blank(task):
        raise ValueError("rubric task must be a non-blank string")
    runs = tuple(runs)
    blocks = [f"TASK\n{_one_line(task, RENDER_TEXT_MAX_CHARS)}", f"EXAMPLE RUNS ({len(runs)})"]
    for number, run in enumerate(runs, start=1):
        blocks.append(f"--- example {number}: {_run_header(run)}\n{render_steps(run, max_steps=max_steps)}")
    if not runs:
        blocks.append("(no example runs)")
    return "\n\n".join(blocks)


__all__ = [
    "DIMENSION_DESCRIPTION_MAX_CHARS",
    "DIMENSION_ID_MAX_CHARS",
    "EXPLANATION_MAX_CHARS",
    "TRAJECTORY_RUBRIC_VERSION",
    "RubricAssessment",
    "RubricDimension",
    "RubricScore",
    "RunLike",
    "StepLike",
    "TrajectoryRubric",
    "canonical_json",
    "parse_assessment_reply",
    "parse_rubric_assessments",
    "parse_rubric_reply",
    "parse_trajectory_rubric",
    "render_rubric",
    "render_run_for_judge",
    "render_steps",
    "render_task_for_rubric",
    "score_trajectory_rubric",
]
