"""Schemas of /api/v1/intents/windows. Input schemas forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from ninja import Schema
from pydantic import Field, StringConstraints

from common.schemas import InputSchema

from .services import DEFAULT_MARGIN, DEFAULT_NOVELTY_THRESHOLD, DEFAULT_THRESHOLD, MAX_MARGIN

Cosine = Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)]
ClusterId = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class WindowAnalyzeIn(InputSchema):
    start: datetime = Field(description="candidates stored at or after this time (with a time zone)")
    end: datetime = Field(description="candidates stored before this time (with a time zone); after `start`")
    threshold: Cosine = DEFAULT_THRESHOLD
    margin: Annotated[float, Field(ge=0, le=MAX_MARGIN, allow_inf_nan=False)] = DEFAULT_MARGIN
    novelty_threshold: Cosine = DEFAULT_NOVELTY_THRESHOLD


class DriftCompareIn(InputSchema):
    before: int = Field(ge=1, description="the before window analysis id")
    after: int = Field(ge=1, description="the after window analysis id")
    matching: Literal["identity", "medoid"] = Field(
        default="identity",
        description="identity: clusters match when they share a medoid id (the spec's default); medoid: greedy "
        "one-to-one matching of the most similar medoids with cosine >= match_threshold",
    )
    match_threshold: Cosine | None = Field(default=None, description="medoid matching; default: the after window's")
    cluster_matches: dict[ClusterId, ClusterId] | None = Field(
        default=None, max_length=10_000, description="explicit before id → after id matches (overrides matching)"
    )


class PageIn(InputSchema):
    cursor: Annotated[str, StringConstraints(max_length=200)] | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20


class ClusterOut(Schema):
    cluster_id: str
    medoid_id: str
    medoid_label: str
    candidate_ids: list[str]
    labels: list[str]
    cohesion: float
    ambiguous_candidate_ids: list[str]
    support: int


class NoveltyOut(Schema):
    candidate_id: str
    label: str
    nearest_intent_id: str = Field(description="the nearest taxonomy intent (its centroid)")
    nearest_label: str
    similarity: float
    novel: bool


class WindowSummaryOut(Schema):
    id: int
    window_start: datetime
    window_end: datetime
    embedder: str
    similarity_threshold: float
    ambiguity_margin: float
    novelty_threshold: float
    candidates_count: int
    clusters_count: int
    ambiguous_count: int
    novelty_checked: bool = Field(description="false when no reviewed taxonomy was active")
    novelty_note: str
    taxonomy: str
    novel_count: int
    digest: str
    created_by: str | None
    created_at: datetime


class WindowOut(WindowSummaryOut):
    clusters: list[ClusterOut]
    novelty: list[NoveltyOut]


class WindowPageOut(Schema):
    items: list[WindowSummaryOut]
    next_cursor: str | None


class ChangeOut(Schema):
    before_cluster_id: str
    after_cluster_id: str
    before_label: str
    after_label: str
    before_mass: float
    after_mass: float
    mass_delta: float
    similarity: float | None = Field(description="medoid cosine (medoid matching only)")


class ClusterMassOut(Schema):
    cluster_id: str
    label: str
    support: int
    mass: float


class BiggestOut(Schema):
    kind: Literal["matched", "retired", "new"]
    before_cluster_id: str | None
    after_cluster_id: str | None
    before_label: str
    after_label: str
    before_mass: float
    after_mass: float
    mass_delta: float


class DriftSummaryOut(Schema):
    id: int
    before: int
    after: int
    matching: Literal["identity", "medoid", "explicit"]
    match_threshold: float | None
    jsd: float
    before_total: int
    after_total: int
    digest: str
    created_by: str | None
    created_at: datetime


class DriftOut(DriftSummaryOut):
    cluster_matches: dict[str, str]
    changes: list[ChangeOut]
    retired: list[ClusterMassOut]
    new: list[ClusterMassOut]
    biggest: list[BiggestOut]


class DriftPageOut(Schema):
    items: list[DriftSummaryOut]
    next_cursor: str | None
