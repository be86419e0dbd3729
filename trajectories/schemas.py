"""Ingest and read schemas of /api/v1/trajectories, and the evaluation job schemas of /api/v1/jobs (shared with
/api/v1/replays). Input schemas forbid unknown fields."""

from __future__ import annotations

import copy
import math
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StringConstraints

from common.text import SURROGATE_MESSAGE, dotted, first_unencodable, require_plain_identifier, require_storable

MAX_STEPS_PER_RUN = 2000
MAX_TASK_CHARS = 20_000
MAX_TOKENS = 2**31 - 1

EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
MAX_COST = 1e12
MAX_DEPTH = 32


_without_nul = require_storable  # text every database, template and response can hold


def _storable(value: Any) -> Any:
    """JSON that PostgreSQL's JSONB can hold: no NUL in strings or keys, no lone surrogates, finite numbers, at most
    MAX_DEPTH levels."""
    where = first_unencodable(value)
    if where is not None:
        raise ValueError(f"{SURROGATE_MESSAGE}: at {dotted(where) or 'the top level'}")
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            _without_nul(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError("numbers must be finite")
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                raise ValueError(f"must not nest deeper than {MAX_DEPTH} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return value


def _nfc(value: Any) -> Any:
    """Run identity is compared in Unicode NFC (docs/decisions.md): visually identical ids are one run."""
    return unicodedata.normalize("NFC", value) if isinstance(value, str) else value


def _in_range(moment: datetime) -> datetime:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    if not EARLIEST <= aware <= LATEST:
        raise ValueError("must be between 1900-01-01 and 9999-12-30")
    # Stored in UTC: any offset a client sends is valid ISO 8601, but PostgreSQL refuses offsets beyond ±15:59.
    return aware.astimezone(UTC)


def text(max_length: int | None = None, *, required: bool = False, strip: bool = True) -> Any:
    """A string type: optionally stripped, non-empty when required, capped, never holding NUL."""
    constraints = StringConstraints(strip_whitespace=strip, min_length=1 if required else None, max_length=max_length)
    return Annotated[str, constraints, AfterValidator(_without_nul)]


def label(max_length: int) -> Any:
    """A name shown as an id elsewhere (the intent a procedure is titled by, a workspace, a revision): optional, but
    never holding an invisible or direction-changing character."""
    return Annotated[text(max_length), AfterValidator(require_plain_identifier)]


def identity(max_length: int) -> Any:
    """A run identity part (source, external_id): NFC-normalized before it is stripped and its length is checked;
    no invisible or direction-changing character (common.text.require_plain_identifier)."""
    return Annotated[text(max_length, required=True), BeforeValidator(_nfc), AfterValidator(require_plain_identifier)]


Clean = text(strip=False)
JsonObject = Annotated[dict[str, Any], AfterValidator(_storable)]
Moment = Annotated[datetime, AfterValidator(_in_range)]  # ISO 8601 or Unix seconds (docs/decisions.md)
Outcome = Literal["success", "failure", "unknown"]
# Strict numbers: "1" is not a number, true is not 1, 1.5 is not a token count (an integer is still a float).
TokenCount = Annotated[int, Field(ge=0, le=MAX_TOKENS, strict=True)]
Money = Annotated[float, Field(ge=0, le=MAX_COST, allow_inf_nan=False, strict=True)]
Score = Annotated[float, Field(allow_inf_nan=False, strict=True)]


class InputSchema(BaseModel):
    """Plain pydantic (no ninja attribute resolver): ingest validates thousands of these per batch."""

    model_config = ConfigDict(extra="forbid")


class StepIn(InputSchema):
    tool: text(200, required=True)
    action_family: text(40) | None = None
    arguments: JsonObject = Field(default_factory=dict)
    observation: Clean = ""
    ok: StrictBool | None = None
    started_at: Moment | None = None
    ended_at: Moment | None = None
    input_tokens: TokenCount = 0
    cached_input_tokens: TokenCount = 0
    output_tokens: TokenCount = 0
    cost: Money = 0.0


class RunIn(InputSchema):
    source: identity(100)
    external_id: identity(200)
    task: text(MAX_TASK_CHARS, strip=False) = ""
    intent: label(200) = ""
    outcome: Outcome = "unknown"
    score: Score | None = None
    graph_workspace: label(100) = ""
    graph_revision: label(100) = ""
    procedure_revision: label(100) = Field(
        "", description="the content revision of the procedure version the run followed (X-Waymark-Revision)"
    )
    metadata: JsonObject = Field(default_factory=dict)
    started_at: Moment | None = None
    ended_at: Moment | None = None
    steps: Annotated[list[StepIn], Field(max_length=MAX_STEPS_PER_RUN)] = Field(default_factory=list)


class IngestIn(InputSchema):
    """The POST body: a batch of runs (at most WAYMARK_INGEST_MAX_RUNS, at most WAYMARK_INGEST_MAX_BYTES)."""

    runs: list[RunIn]


class IngestOut(Schema):
    created: int
    existing: int
    created_ids: list[int]
    existing_ids: list[int]


class StepOut(Schema):
    ordinal: int
    tool: str
    action_family: str
    arguments: dict[str, Any]
    observation: str
    ok: bool | None
    started_at: datetime | None
    ended_at: datetime | None
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    cost: float


class RunOut(Schema):
    id: int
    source: str
    external_id: str
    task: str
    intent: str
    outcome: Outcome
    score: float | None
    graph_workspace: str
    graph_revision: str
    procedure_revision: str
    started_at: datetime | None
    ended_at: datetime | None
    created_at: datetime
    step_count: int
    total_tokens: int
    cost: float
    tools: list[str]


class RunDetailOut(RunOut):
    metadata: dict[str, Any]
    steps: list[StepOut]


class RunPageOut(Schema):
    items: list[RunOut]
    next_cursor: str | None = Field(None, description="pass as ?cursor= for the next (older) page; null at the end")


class RunFilterIn(Schema):
    outcome: Outcome | None = None
    source: Annotated[Clean, BeforeValidator(_nfc)] | None = None
    tool: Clean | None = None
    intent: Clean | None = None
    q: Clean | None = Field(None, description="text search in the task")
    cursor: Clean | None = None
    limit: int = Field(50, ge=1, le=200)


class JobInputSchema(Schema):
    """A request body of the job operations: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


MatchKey = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$", max_length=60)]
MatchValue = Annotated[str, StringConstraints(max_length=200), AfterValidator(_without_nul)] | StrictBool | int


class JobClaimIn(JobInputSchema):
    worker: text(200) = ""
    lease_seconds: int = Field(300, ge=1, le=3600, strict=True)
    kinds: Annotated[list[text(60, required=True)], Field(min_length=1, max_length=20)] | None = Field(
        None, description="the job kinds this agent can run; omitted: every kind (procedure_replay, graph_evaluation)"
    )
    match: (
        Annotated[
            dict[MatchKey, Annotated[list[MatchValue], Field(min_length=1, max_length=100)]],
            Field(min_length=1, max_length=10),
        ]
        | None
    ) = Field(
        None,
        description="offer only jobs whose payload holds, for every key named, one of the values listed, e.g. "
        '{"intent": ["refund request"]} or {"workspace": ["support"]}; a job whose payload lacks a key is not offered',
    )


class JobOut(Schema):
    id: int
    kind: str
    payload: dict[str, Any]
    status: str
    attempts: int
    lease_owner: str
    lease_expires_at: datetime | None
    deadline: datetime | None


class ResultIn(JobInputSchema):
    run: dict[str, Any] = Field(
        description="the run the agent produced, in the ingest format (source and external_id are set by Waymark)"
    )


class ResultOut(Schema):
    job_id: int
    run_id: int
    counted: bool


def inlined_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with every `$ref` to its `$defs` replaced by the definition (for openapi_extra)."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(copy.deepcopy(definitions[ref.removeprefix("#/$defs/")]))
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    return resolve(schema)
