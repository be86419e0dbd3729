"""Schemas of /api/v1/intents/taxonomy and /api/v1/intents/alerts. Input schemas forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, Field, StringConstraints

from common.schemas import InputSchema
from common.text import require_storable

from .services import MAX_COMMENT

CandidateId = Annotated[str, StringConstraints(min_length=1, max_length=40), AfterValidator(require_storable)]


class TaxonomyPageIn(InputSchema):
    cursor: Annotated[str, StringConstraints(max_length=200)] | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20


# --- the taxonomy ----------------------------------------------------------------------------------------------------
class TaxonomyIntentOut(Schema):
    intent_id: str
    label: str
    normalized: str
    aliases: list[str]
    candidate_ids: list[str]
    support: int


class TaxonomyVersionSummaryOut(Schema):
    number: int
    digest: str
    parent_number: int | None
    is_active: bool
    created_by: str | None
    created_at: datetime


class TaxonomyVersionOut(TaxonomyVersionSummaryOut):
    intents: list[TaxonomyIntentOut]
    changes: list[dict[str, Any]] = Field(description="what the version adds to its parent, with judgment summaries")


class TaxonomyVersionPageOut(Schema):
    items: list[TaxonomyVersionSummaryOut]
    next_cursor: str | None


# --- judgments -------------------------------------------------------------------------------------------------------
class IntentJudgmentIn(InputSchema):
    candidate_id: CandidateId
    verdict: Literal["valid", "invalid", "merge"]
    merge_into: CandidateId | None = Field(default=None, description="an intent id of the active taxonomy (merge)")
    comment: Annotated[str, StringConstraints(max_length=MAX_COMMENT), AfterValidator(require_storable)] = ""


class IntentJudgmentOut(Schema):
    candidate_id: str
    reviewer: str
    verdict: str
    merge_into: str | None
    comment: str
    created_at: datetime


class CandidateJudgmentsOut(Schema):
    candidate_id: str
    count: int | None = Field(
        description="how many judgments it has; null to a reviewer who may still judge it and has not: "
        "until their own is recorded they see nothing of the others', not even how many"
    )
    mine: IntentJudgmentOut | None
    judgments: list[IntentJudgmentOut] | None = Field(
        description="every judgment once yours is recorded (or the candidate is in the active taxonomy); else null"
    )


class IntentQueueItemOut(Schema):
    candidate_id: str
    intent: str
    normalized: str
    kind: str
    evidence: list[dict[str, Any]]
    promoted_alert: bool


class IntentQueueOut(Schema):
    items: list[IntentQueueItemOut]
    total: int


# --- novelty alerts --------------------------------------------------------------------------------------------------
class AlertPageIn(TaxonomyPageIn):
    status: Literal["open", "dismissed", "promoted"] | None = None


class AlertOut(Schema):
    id: int
    analysis: int
    candidate_id: str
    label: str
    nearest_intent_id: str
    nearest_label: str
    similarity: float
    threshold: float
    status: str
    note: str
    decided_by: str | None
    decided_at: datetime | None
    created_at: datetime


class AlertPageOut(Schema):
    items: list[AlertOut]
    next_cursor: str | None


class AlertDecisionIn(InputSchema):
    decision: Literal["dismiss", "promote"]
    note: Annotated[str, StringConstraints(max_length=2000)] = ""
