"""Ingest and read schemas of /api/v1/trajectories. Input schemas forbid unknown fields."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints

MAX_STEPS_PER_RUN = 2000
MAX_TASK_CHARS = 20_000
MAX_TOKENS = 2**31 - 1

Text = Annotated[str, StringConstraints(strip_whitespace=True)]
Key = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Outcome = Literal["success", "failure", "unknown"]
TokenCount = Annotated[int, Field(ge=0, le=MAX_TOKENS)]
Money = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class InputSchema(BaseModel):
    """Plain pydantic (no ninja attribute resolver): ingest validates thousands of these per batch."""

    model_config = ConfigDict(extra="forbid")


class StepIn(InputSchema):
    tool: Annotated[Key, StringConstraints(max_length=200)]
    action_family: Annotated[Text, StringConstraints(max_length=40)] | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    observation: str = ""
    ok: StrictBool | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    input_tokens: TokenCount = 0
    cached_input_tokens: TokenCount = 0
    output_tokens: TokenCount = 0
    cost: Money = 0.0


class RunIn(InputSchema):
    source: Annotated[Key, StringConstraints(max_length=100)]
    external_id: Annotated[Key, StringConstraints(max_length=200)]
    task: Annotated[str, StringConstraints(max_length=MAX_TASK_CHARS)] = ""
    intent: Annotated[Text, StringConstraints(max_length=200)] = ""
    outcome: Outcome = "unknown"
    score: Annotated[float, Field(allow_inf_nan=False)] | None = None
    graph_workspace: Annotated[Text, StringConstraints(max_length=100)] = ""
    graph_revision: Annotated[Text, StringConstraints(max_length=100)] = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime | None = None
    ended_at: datetime | None = None
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
    source: str | None = None
    tool: str | None = None
    intent: str | None = None
    q: str | None = Field(None, description="text search in the task")
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=200)


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
