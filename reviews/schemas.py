"""Schemas of /api/v1/reviews and /api/v1/promotions. Input schemas forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, StrictBool, StringConstraints


class InputSchema(Schema):
    model_config = ConfigDict(extra="forbid")


Key = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
Text = Annotated[str, StringConstraints(max_length=5000)]


class ProposeIn(InputSchema):
    kind: Key
    candidate_id: Key
    rationale: Text
    is_rollback: StrictBool = False


class JudgmentIn(InputSchema):
    verdict: Literal["approve", "reject"]
    comment: Text = ""


class GateOut(Schema):
    passing: bool | None
    summary: str
    details: dict[str, Any]
    url: str


class OverrideOut(Schema):
    by: str
    reason: str
    at: datetime | None


class JudgmentOut(Schema):
    reviewer: str
    verdict: str
    comment: str
    created_at: datetime


class PromotionOut(Schema):
    id: int
    kind: str
    candidate_id: str
    parent_key: str
    title: str
    parent_label: str
    replaces_id: str | None
    is_rollback: bool
    status: str
    proposer: str
    rationale: str
    gate: GateOut
    override: OverrideOut | None
    required_approvals: int
    approvals: int
    rejections: int
    judgments: list[JudgmentOut] | None  # null while the caller may see counts only
    my_verdict: str | None
    created_at: datetime
    closed_at: datetime | None
    applied_at: datetime | None


class QueueItemOut(Schema):
    id: int
    kind: str
    candidate_id: str
    title: str
    parent_label: str
    status: str
    is_rollback: bool
    gate_passing: bool | None
    overridden: bool
    approvals: int
    rejections: int
    required_approvals: int
    pending_for_me: bool
    lease_holder: str | None
    created_at: datetime


class QueueOut(Schema):
    items: list[QueueItemOut]
