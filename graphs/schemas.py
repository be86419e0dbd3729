"""Schemas of /api/v1/graphs. Input schemas forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, StringConstraints

from common.schemas import InputSchema
from graphs.core import MODES
from uplift.schemas import CertificateSummaryOut  # one component for every kind's certificate

MAX_STEPS = 500
MAX_QUERY_CHARS = 8000
MAX_OBSERVATION_CHARS = 20_000
MAX_HOPS = 6
MAX_WINDOW = 50

Mode = Literal["generative_subgraph", "generative_full", "raw_subgraph", "raw_full", "none"]
assert set(Mode.__args__) == set(MODES)
Ref = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]


class RevisionRefOut(Schema):
    seq: int
    digest: str


class RevisionOut(Schema):
    seq: int
    digest: str
    parent_digest: str | None
    meta: dict[str, Any]
    created_at: datetime


class WorkspaceOut(Schema):
    slug: str
    title: str
    task_description: str
    active: RevisionOut | None
    head: RevisionRefOut | None


class WorkspaceListOut(Schema):
    items: list[WorkspaceOut]


class RefinerNode(Schema):
    id: str
    type: str
    description: str


class RefinerEdge(Schema):
    model_config = ConfigDict(extra="allow")

    source: str
    target: str
    relation: str
    condition: str | None = None
    guidance: str | None = None
    pitfalls: str | None = None


class RefinerGraph(Schema):
    nodes: list[RefinerNode]
    edges: list[RefinerEdge]


class GraphRevisionOut(RevisionOut):
    workspace: str
    graph: RefinerGraph


class ActiveGraphOut(GraphRevisionOut):
    certificate: CertificateSummaryOut | None = Field(
        description="the revision's latest with-versus-without certificate; null when it was never certified"
    )


class CertifyIn(InputSchema):
    evaluator: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)] | None = Field(
        None, description="the evaluator to measure with; omitted: the one of the run that accepted the revision"
    )


class CertificationOut(Schema):
    id: int
    workspace: str
    status: str = Field(description="queued, running, waiting (agents have jobs to answer), done, refused or failed")
    source: str = Field(description="round: an evolution round's own evaluations; evaluation: measured for this")
    evaluator: str
    candidate: RevisionRefOut
    control: RevisionRefOut | None = Field(description="what the candidate is measured against; null: no graph")
    evolution_run: int | None
    round: int | None
    error: str
    certificate_id: int | None = Field(description="the certificate this certification issued")
    certificate: CertificateSummaryOut | None = Field(description="the revision's latest certificate")
    created_at: datetime
    finished_at: datetime | None


class RevisionPageOut(Schema):
    items: list[RevisionOut]
    next_cursor: str | None


class RevisionPageIn(InputSchema):
    cursor: Annotated[str, StringConstraints(max_length=200)] | None = None
    limit: Annotated[int, Field(ge=1, le=200)] = 50


class StepIn(InputSchema):
    action: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    args: Any = None
    observation: Annotated[str, StringConstraints(max_length=MAX_OBSERVATION_CHARS)] = ""


class GuidanceIn(InputSchema):
    query: Annotated[str, StringConstraints(max_length=MAX_QUERY_CHARS)] = ""
    steps: Annotated[list[StepIn], Field(max_length=MAX_STEPS)] = Field(default_factory=list)
    mode: Mode = "generative_subgraph"
    hops: Annotated[int, Field(ge=1, le=MAX_HOPS)] = 2
    window: Annotated[int, Field(ge=0, le=MAX_WINDOW)] = 3
    revision: Ref | None = None


class GuidanceOut(Schema):
    text: str
    node_id: str | None
    used_full_graph: bool
    subgraph_digest: str | None
    mode: str
    revision: str = Field(description="the digest of the graph revision the guidance came from (pin it with this)")
