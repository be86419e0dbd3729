"""Schemas of /api/v1/certification and the certificate parts other apps' answers carry (a promotion request's gate,
an active procedure or graph). Input schemas forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from ninja import Schema
from pydantic import Field, StringConstraints

from common.schemas import InputSchema


class CertificateSummaryOut(Schema):
    """A certificate in one line: "certified +x, lower bound y, n" (uplift.selectors.certificate_summary)."""

    id: int
    headline: str  # "certified +4.0 points, lower bound −1.2, n = 40"
    passed: bool
    metric: str  # success or score: the policy's metric
    uplift: float | None  # the mean paired difference, candidate minus control, on [-1, 1]; null when n = 0
    lower_bound: float
    upper_bound: float
    confidence: float  # of the interval, after the split's reuse correction
    n: int
    repairs: int
    breakages: int
    models: list[str]  # the agent models the tasks were measured with
    decision_number: int  # the decision this certificate was on its held-out split (1 = the first)
    against: str  # "the version it replaces" or "no artifact"
    sentence: str
    digest: str


class CoverageOut(Schema):
    """Present when the artifact's recent production runs come mostly from a model no passing certificate covers."""

    model: str
    share: float
    runs: int
    failed_certificate_id: int | None


class CoverageFlagOut(Schema):
    kind: str
    parent_key: str
    parent_label: str
    candidate_id: str
    label: str
    model: str
    share: float
    runs: int
    failed_certificate_id: int | None
    flagged_at: datetime
    checked_at: datetime


class SafetyFindingSourceOut(Schema):
    run_id: int | str
    step: int | None


class SafetyFindingOut(Schema):
    rule: str  # injection, secret or url
    severity: str  # critical or warning
    where: str
    excerpt: str
    message: str
    sources: list[SafetyFindingSourceOut]


class SafetyOut(Schema):
    scanned: int
    critical: int
    warnings: int
    findings: list[SafetyFindingOut]
    allowed_hosts: list[str]


class TaskPairOut(Schema):
    task_id: str
    critical: bool
    model: str
    outcome: str  # repair, breakage, both_passed, both_failed or excluded
    control: dict
    candidate: dict


class CertificateOut(Schema):
    id: int
    kind: str
    candidate_id: str
    replaces_id: str
    parent_key: str
    passed: bool
    reasons: list[str]
    sentence: str
    policy: dict
    totals: dict
    tasks: list[TaskPairOut]
    agent_models: list[str]
    provenance: dict
    split: str  # the held-out split's key
    decision_number: int
    split_decisions: int  # decisions taken on the split so far
    split_exhausted: bool
    alpha: float
    digest: str
    created_at: datetime


class RecertifyIn(InputSchema):
    kind: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]
    candidate_id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
    model: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] = ""


class RecertifyOut(Schema):
    started: str


class PolicyIn(InputSchema):
    kind: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]
    parent_key: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] = ""
    mode: Literal["non_inferiority", "superiority"] | None = None
    margin: float | None = Field(None, ge=0, le=1)
    min_n: int | None = Field(None, ge=1, le=1_000_000)
    metric: Literal["success", "score"] | None = None
    alpha: float | None = Field(None, gt=0, lt=1)
    max_decisions: int | None = Field(None, ge=1, le=10_000)


class PolicyOut(Schema):
    kind: str
    parent_key: str
    mode: str
    margin: float
    min_n: int
    metric: str
    alpha: float
    max_decisions: int


class WatchOut(Schema):
    id: int
    kind: str
    parent_key: str
    parent_label: str
    candidate_id: str
    candidate_label: str
    control_id: str
    control_label: str
    candidate_ref: str  # what runs record for each arm (graph_revision / procedure_revision)
    control_ref: str
    mode: str  # canary or full
    status: str  # running, promoted, rolled_back, rollback_requested, expired or stopped
    share: float
    policy: dict  # alpha, margin, metric, min_runs, max_canary_runs, tuned_runs
    bounds: list[dict]  # the latest look: per metric the estimate of Δ, its bound, each arm's mean and runs
    reason: str
    request_id: int | None
    rollback_request_id: int | None
    since: datetime
    window_ends_at: datetime
    decided_at: datetime | None
    created_at: datetime


class WatchSetIn(InputSchema):
    share: float | None = Field(None, gt=0, lt=1)
    alpha: float | None = Field(None, gt=0, lt=1)
    margin: float | None = Field(None, ge=0, le=1)
    min_runs: int | None = Field(None, ge=2, le=1_000_000)
    max_canary_runs: int | None = Field(None, ge=2, le=10_000_000)
    window_hours: int | None = Field(None, ge=1, le=24 * 90)


class WatchStopIn(InputSchema):
    reason: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=1000)]
