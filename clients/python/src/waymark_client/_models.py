"""What the client returns: small frozen dataclasses over the API's JSON (docs/api.md names every field)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GraphRevision:
    """A graph revision: the workspace's active one (`active_graph`) or one fetched by seq or digest.

    `etag` and `from_cache` are set for the active graph: `from_cache` is True when the server answered 304 and the
    body came from the client's cache."""

    workspace: str
    seq: int
    digest: str
    parent_digest: str | None
    meta: dict[str, Any]
    created_at: str | None
    graph: dict[str, Any]
    etag: str | None = None
    from_cache: bool = False

    @classmethod
    def from_json(cls, body: dict[str, Any], *, etag: str | None = None, from_cache: bool = False) -> GraphRevision:
        return cls(
            workspace=str(body.get("workspace") or ""),
            seq=int(body["seq"]),
            digest=str(body["digest"]),
            parent_digest=body.get("parent_digest"),
            meta=dict(body.get("meta") or {}),
            created_at=body.get("created_at"),
            graph=dict(body.get("graph") or {}),
            etag=etag,
            from_cache=from_cache,
        )

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return list(self.graph.get("nodes") or [])

    @property
    def edges(self) -> list[dict[str, Any]]:
        return list(self.graph.get("edges") or [])


@dataclass(frozen=True)
class Procedure:
    """An active procedure: `steps` are its active version's tool calls (`[{"tool", "arguments"}]`)."""

    id: int
    intent: str
    title: str
    revision: int
    active_version: dict[str, Any] | None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Procedure:
        return cls(
            id=int(body["id"]),
            intent=str(body.get("intent") or ""),
            title=str(body.get("title") or ""),
            revision=int(body.get("revision") or 0),
            active_version=body.get("active_version"),
        )

    @property
    def steps(self) -> list[dict[str, Any]]:
        return list((self.active_version or {}).get("steps") or [])

    @property
    def version(self) -> int | None:
        return (self.active_version or {}).get("number")

    @property
    def content_revision(self) -> str | None:
        return (self.active_version or {}).get("content_revision")


@dataclass(frozen=True)
class Procedures:
    """The answer of GET /procedures: the active procedures, the ETag, `X-Waymark-Revision` when there is exactly one
    item, and whether the body came from the client's cache (a 304)."""

    items: tuple[Procedure, ...]
    etag: str | None
    revision: str | None
    from_cache: bool = False


@dataclass(frozen=True)
class Guidance:
    text: str
    node_id: str | None
    used_full_graph: bool
    subgraph_digest: str | None
    mode: str
    revision: str  # the digest of the graph revision the guidance came from

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Guidance:
        return cls(
            text=str(body.get("text") or ""),
            node_id=body.get("node_id"),
            used_full_graph=bool(body.get("used_full_graph")),
            subgraph_digest=body.get("subgraph_digest"),
            mode=str(body.get("mode") or ""),
            revision=str(body.get("revision") or ""),
        )


@dataclass(frozen=True)
class PushResult:
    """What a push stored, over every batch: runs created, and runs that existed already (a resent run, or one a lost
    attempt stored before the retry), ids in the order of the runs pushed."""

    created_ids: tuple[int, ...] = ()
    existing_ids: tuple[int, ...] = ()
    batches: int = 0

    @property
    def created(self) -> int:
        return len(self.created_ids)

    @property
    def existing(self) -> int:
        return len(self.existing_ids)

    def merge(self, body: dict[str, Any]) -> PushResult:
        return PushResult(
            created_ids=self.created_ids + tuple(body.get("created_ids") or ()),
            existing_ids=self.existing_ids + tuple(body.get("existing_ids") or ()),
            batches=self.batches + 1,
        )


@dataclass(frozen=True)
class Job:
    """An evaluation job leased to this agent (docs/api.md "Evaluation jobs"): run `payload` as its `kind` says."""

    id: int
    kind: str
    payload: dict[str, Any]
    status: str
    attempts: int
    lease_owner: str
    lease_expires_at: str | None
    deadline: str | None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Job:
        return cls(
            id=int(body["id"]),
            kind=str(body.get("kind") or ""),
            payload=dict(body.get("payload") or {}),
            status=str(body.get("status") or ""),
            attempts=int(body.get("attempts") or 0),
            lease_owner=str(body.get("lease_owner") or ""),
            lease_expires_at=body.get("lease_expires_at"),
            deadline=body.get("deadline"),
        )


@dataclass(frozen=True)
class JobAnswer:
    job_id: int
    run_id: int
    counted: bool  # False when the job had been answered already: an answer counts once


@dataclass(frozen=True)
class JobOutcome:
    """One job the helper worked: the run it answered with and the server's answer, or the handler's error (the job
    was then not answered: its lease runs out and it goes back to the queue), or the API's refusal of the answer."""

    job: Job
    run: dict[str, Any] | None = None
    answer: JobAnswer | None = None
    error: BaseException | None = field(default=None, compare=False)

    @property
    def answered(self) -> bool:
        return self.answer is not None
