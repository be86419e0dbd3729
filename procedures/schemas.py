"""Schemas of /api/v1/procedures and /api/v1/replays. Input schemas forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Schema
from pydantic import Field, StrictBool, StringConstraints

from common.schemas import InputSchema
from uplift.schemas import CertificateSummaryOut, CoverageOut


class ProcedureStepOut(Schema):  # not StepOut: trajectories has one (tests/contract)
    tool: str
    arguments: dict[str, Any]


class ReplayOut(Schema):
    id: int
    mode: str
    status: str
    passed: bool | None
    compared_with_id: int | None
    cases: int
    metrics: dict[str, Any]
    gate_report: dict[str, Any] | None
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_cases(obj) -> int:
        return len(obj.held_out_run_ids)


class VersionOut(Schema):
    id: int
    procedure_id: int
    number: int
    label: str  # "v3": how pages and reviews name the version
    status: str
    parent_id: int | None
    steps: list[ProcedureStepOut]
    preconditions: list[Any]
    failure_exits: list[Any]
    candidate_revision: str
    content_revision: str
    source_runs: int
    held_out_runs: int
    created_at: datetime

    @staticmethod
    def resolve_source_runs(obj) -> int:
        return len(obj.source_run_ids)

    @staticmethod
    def resolve_held_out_runs(obj) -> int:
        return len(obj.held_out_run_ids)


class VersionWithReplaysOut(VersionOut):
    replays: list[ReplayOut]

    @staticmethod
    def resolve_replays(obj) -> list:
        return list(obj.replays.all())


class ProcedureOut(Schema):
    id: int
    intent: str
    title: str
    revision: int
    active_version: VersionOut | None
    # The active version's newest certificate ("certified +x, lower bound y, n"), and the agent model most of its
    # recent runs come from when no passing certificate covers it ("not certified for <model>").
    certificate: CertificateSummaryOut | None = None
    not_certified_for: CoverageOut | None = None
    created_at: datetime
    updated_at: datetime


class ProcedureListOut(Schema):
    items: list[ProcedureOut]


class VersionListOut(Schema):
    items: list[VersionWithReplaysOut]


class MineIn(InputSchema):
    intent: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
    held_out_share: float = Field(0.3, gt=0, lt=1)
    seed: int = Field(17, ge=0, le=2**31 - 1)
    live: StrictBool | None = Field(None, description="also replay live with agents (default: WAYMARK_LIVE_REPLAY)")


class MineOut(Schema):
    created: bool
    version: VersionOut
    replay_ids: list[int]


class ClaimIn(InputSchema):
    worker: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] = ""
    lease_seconds: int = Field(300, ge=1, le=3600)
