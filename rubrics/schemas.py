"""Schemas of /api/v1/rubrics. Input schemas forbid unknown fields; item-level rules (dimension known and not
repeated, score and confidence in [0, 1], evidence steps inside the run) are the judges' parser's, checked by the
service so a refusal names the item."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Schema
from pydantic import Field, StringConstraints

from common.schemas import InputSchema


class DimensionOut(Schema):
    dimension_id: str
    description: str
    weight: float
    required: bool


class RubricVersionOut(Schema):
    id: int
    number: int
    digest: str
    status: str
    dimensions: list[DimensionOut]
    model_call_id: int | None
    proposed_by: str | None
    created_at: datetime


class RubricOut(Schema):
    id: int
    key: str
    label: str
    active_version: RubricVersionOut | None
    versions: list[RubricVersionOut]


class RubricListOut(Schema):
    items: list[RubricOut]


class ScoreOut(Schema):
    run_id: int
    rubric_id: int
    rubric_key: str
    version_id: int
    version_number: int
    version_status: str
    overall: float
    dimension_scores: dict[str, float]
    dimension_confidence: dict[str, float]
    missing_dimensions: list[str]
    required_failures: list[str]
    assessment_count: int
    rater_count: int
    updated_at: datetime


class RunScoresOut(Schema):
    run_id: int
    scores: list[ScoreOut]


class AssessmentIn(InputSchema):
    """One dimension's assessment; values are checked by the service (422 naming the item), not coerced here."""

    dimension_id: Annotated[str, StringConstraints(max_length=80)]
    score: Any
    confidence: Any = 1.0
    evidence_steps: list[Any] = Field(default_factory=list, max_length=500)
    explanation: Annotated[str, StringConstraints(max_length=1000)] = ""


class AssessmentsIn(InputSchema):
    version_id: int | None = Field(default=None, ge=1, le=2**63 - 1)
    assessments: list[AssessmentIn] = Field(min_length=1, max_length=50)
