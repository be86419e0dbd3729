"""Schemas of /api/v1/intents. Input schemas forbid unknown fields; an intent item is checked by the same parser as
model output (spec §2.3), so its fields are read as the parser reads them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Schema
from pydantic import AfterValidator, Field, StringConstraints

from common.schemas import InputSchema
from common.text import require_storable

from .services import MAX_CLIENT_CANDIDATES


class CandidatePageIn(InputSchema):
    cursor: str | None = None
    limit: Annotated[int, Field(ge=1, le=200)] = 50
    kind: Annotated[str, StringConstraints(pattern=r"^(declared|inferred|hindsight)$")] | None = None
    label: Annotated[str, StringConstraints(max_length=200)] | None = None
    source: Annotated[str, StringConstraints(pattern=r"^(model|client)$")] | None = None


class CandidatesIn(InputSchema):
    """Your own labeled intents, each `{intent, kind?, evidence: [{trajectory_id, start, end}], actual_outcome?,
    limitations?}` exactly as the model is asked to answer. The first bad item is named in a 422 and nothing is
    written."""

    intents: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=MAX_CLIENT_CANDIDATES)]


class EvidenceOut(Schema):
    run_id: int | None
    trajectory_id: str
    start: int
    end: int


class CandidateOut(Schema):
    candidate_id: str
    intent: str
    normalized: str
    kind: str
    evidence: list[EvidenceOut]
    actual_outcome: str
    limitations: list[str]
    schema_version: str
    source: str
    proposal_run: int | None
    batch: int | None
    submitted_by: str | None
    created_at: datetime


class CandidatePageOut(Schema):
    items: list[CandidateOut]
    next_cursor: str | None


class CandidatesSubmitOut(Schema):
    created: list[str]
    existing: list[str]
    items: list[CandidateOut]


class VectorIn(InputSchema):
    text: Annotated[str, StringConstraints(min_length=1, max_length=4000), AfterValidator(require_storable)]
    vector: Annotated[list[float], Field(min_length=1, max_length=8192)]


class VectorsIn(InputSchema):
    """Vectors of your own embedder for texts (labels): one dimension count per embedder, each text stored once."""

    embedder: Annotated[str, StringConstraints(min_length=1, max_length=80), AfterValidator(require_storable)]
    items: Annotated[list[VectorIn], Field(min_length=1, max_length=1000)]


class VectorsOut(Schema):
    embedder: str
    dimensions: int
    created: int
    existing: int
