"""Schemas of /api/v1/reviews and /api/v1/promotions. Input schemas forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, Field, StrictBool, StringConstraints

from common.schemas import InputSchema
from common.text import require_plain_identifier
from uplift.schemas import CertificateSummaryOut, SafetyOut

Key = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64), AfterValidator(require_plain_identifier)
]
Text = Annotated[str, StringConstraints(max_length=5000)]


class ProposeIn(InputSchema):
    kind: Key
    candidate_id: Key
    rationale: Text
    is_rollback: StrictBool = False
    rollout: Literal["full", "canary"] = "full"
    canary_share: float = Field(0.1, gt=0, lt=1, description="the share of runs a canary serves (rollout canary)")


class JudgmentIn(InputSchema):
    verdict: Literal["approve", "reject"]
    comment: Text = ""


class MetricOut(Schema):
    """One measured metric of the gate: the candidate's value, the bound it had to meet (as text), the active
    version's value (or the retained graph's, for a graph) and the difference."""

    metric: str
    mode: str | None = None
    value: float | None = None
    threshold: float | None = None
    bound: str = ""
    active: float | None = None
    delta: float | None = None
    passed: bool
    reason: str = ""


class CaseOut(Schema):
    """One held-out case of the replay behind the gate; run ids are trajectory run ids."""

    case_run_id: int
    answered: bool
    passed: bool
    result_run_id: int | None = None
    active_passed: bool | None = None
    active_result_run_id: int | None = None
    regression: bool = False


class GateOut(Schema):
    passing: bool | None
    summary: str
    details: dict[str, Any]
    url: str
    metrics: list[MetricOut] = []
    cases: list[CaseOut] = []
    cases_total: int = 0
    certificate: CertificateSummaryOut | None = None  # the candidate's newest with-versus-without certificate
    safety: SafetyOut | None = None  # the scan of its learned text (null on requests older than the scan)


class OutcomeOut(Schema):
    status: str
    text: str
    at: datetime | None


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
    candidate_label: str  # "v3" for a version, "#2 · 3fa9c1d" for a graph revision
    parent_key: str
    title: str
    parent_label: str
    replaces_id: str | None
    replaces_label: str | None
    is_rollback: bool
    rollout: str  # "full" or "canary": how it goes live once approved
    canary_share: float | None  # a canary's share of runs
    status: str  # "open" for an approved request while the caller may not see counts (reviews.selectors)
    proposer: str
    rationale: str
    gate: GateOut
    override: OverrideOut | None
    required_approvals: int
    approvals: int | None  # null while the caller is a reviewer who has not judged this open request
    rejections: int | None
    counts_visible: bool
    outcome: OutcomeOut | None  # what became of the request (null while open and not overridden)
    judgments: list[JudgmentOut] | None  # null while the caller may see counts only
    my_verdict: str | None
    created_at: datetime
    closed_at: datetime | None
    applied_at: datetime | None


class QueueItemOut(Schema):
    id: int
    kind: str
    candidate_id: str
    candidate_label: str
    title: str
    parent_label: str
    replaces_id: str | None
    replaces_label: str | None
    status: str
    is_rollback: bool
    gate_passing: bool | None
    overridden: bool
    approvals: int | None  # null for an item waiting for the caller's judgment
    rejections: int | None
    required_approvals: int
    pending_for_me: bool
    lease_holder: str | None
    created_at: datetime


class QueueOut(Schema):
    items: list[QueueItemOut]
