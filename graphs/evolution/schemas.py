"""Schemas of /api/v1/graphs/{ws}/evolutions. Input schemas forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import Field, StringConstraints

from common.schemas import InputSchema
from graphs.schemas import RevisionRefOut  # one component for one shape (tests/contract)

from .services import MAX_ROUNDS

Count = Annotated[int, Field(ge=0, le=10_000_000)]


class GateIn(InputSchema):
    """The gate of a run: `tie` (TieAcceptingGate, the default), `strict` (StrictImprovementGate), `paired`
    (PairedGate) or `objective` (ObjectiveGate: both documents required). Parameters a gate does not take are
    refused with 422."""

    kind: Literal["tie", "strict", "paired", "objective"] = "tie"
    perfect: Annotated[float, Field(ge=0, le=1)] | None = None
    minimum_delta: Annotated[float, Field(ge=0, le=1)] | None = None
    min_win_probability: Annotated[float, Field(ge=0, le=1)] | None = None
    min_tasks: Annotated[int, Field(ge=1, le=100_000)] | None = None
    resamples: Annotated[int, Field(ge=1, le=100_000)] | None = None
    seed: int | None = None
    objective: dict[str, Any] | None = Field(default=None, description="an ObjectiveSpec document (objective gate)")
    context: dict[str, Any] | None = Field(default=None, description="an ObjectiveContext document (objective gate)")


class BudgetIn(InputSchema):
    """Ceilings of one run; a missing ceiling is unlimited."""

    max_model_calls: Count | None = None
    max_output_tokens: Count | None = None
    max_evaluations: Count | None = None
    max_seconds: Annotated[float, Field(ge=0, le=10_000_000)] | None = None


class EvolveConfigIn(InputSchema):
    """The EvolveConfig settings an operator may set (spec §6); the others keep their defaults."""

    task_description: Annotated[str, StringConstraints(max_length=4000)] | None = None
    max_rejected_streak: Annotated[int, Field(ge=1, le=1000)] | None = None
    cycle_policy: Literal["repair", "allow"] | None = None
    role_retries: Annotated[int, Field(ge=0, le=5)] | None = None
    stale_trace_policy: Literal["warn", "drop", "allow"] | None = None
    failing_sample: Annotated[int, Field(ge=0, le=10_000)] | None = None
    passing_sample: Annotated[int, Field(ge=0, le=10_000)] | None = None
    success_threshold: Annotated[float, Field(ge=0, le=1)] | None = None
    seed: int | None = None
    stride: Annotated[int, Field(ge=1, le=10_000)] | None = None
    refiner_context_cap: Annotated[int, Field(ge=1000, le=10_000_000)] | None = None


class EvolutionStartIn(InputSchema):
    rounds: Annotated[int, Field(ge=1, le=MAX_ROUNDS)] = 10
    evaluator: Annotated[str, StringConstraints(min_length=1, max_length=100)] = Field(
        default="two-hop", description="an evaluator key: two-hop, agents, or one named in settings"
    )
    gate: GateIn = Field(default_factory=GateIn)
    budget: BudgetIn = Field(default_factory=BudgetIn)
    config: EvolveConfigIn = Field(default_factory=EvolveConfigIn)


class RunPageIn(InputSchema):
    cursor: Annotated[str, StringConstraints(max_length=200)] | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 50


class EvolutionRunOut(Schema):
    id: int
    workspace: str
    status: Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled", "budget_exhausted"]
    stage: str
    cancel_requested: bool
    rounds_planned: int
    rounds_done: int
    first_iteration: int | None
    evaluator: str
    gate: str = Field(description="the gate kind: tie, strict, paired or objective")
    config: dict[str, Any]
    budget: dict[str, Any]
    meter: dict[str, Any]
    cost: str = Field(description="the run's model cost in USD, a decimal string")
    baseline_score: float | None
    best_score: float | None
    stopped_reason: str
    error: str
    warnings: list[str]
    started_by: str | None = Field(description="the username of the operator who started the run")
    created_at: datetime
    started_at: datetime | None
    updated_at: datetime
    finished_at: datetime | None


class EvolutionRunPageOut(Schema):
    items: list[EvolutionRunOut]
    next_cursor: str | None


class EvolutionRoundOut(Schema):
    iteration: int
    outcome: str
    disposition: str
    mode: str
    retained_score: float | None
    candidate_score: float | None
    edit_counts: dict[str, Any]
    edits: dict[str, Any]
    diagnostics: list[Any]
    decision: dict[str, Any] | None
    candidate_digest: str
    base_digest: str
    duplicate_of: int | None
    accepted_revision: RevisionRefOut | None = Field(description="the graph revision this round accepted")
    model_calls: int
    cost: str = Field(description="the round's model cost in USD, a decimal string")
    created_at: datetime


class EvolutionRoundListOut(Schema):
    run: int
    items: list[EvolutionRoundOut]
