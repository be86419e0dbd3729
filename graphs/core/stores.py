"""Stores (spec §8): the RevisionStore protocol, an in-memory adapter, and the layer stores over any RevisionStore.

A revision is one immutable JSON document in an append-only chain per (workspace, kind); its digest is the SHA-256 of
the document alone. Every write states the head it expects and fails with HeadMoved when another writer got there
first, so two workers can never fork a chain; the loop never catches HeadMoved.

The layer wrappers (`RevisionGraphStore`, `RevisionRejectionStore`, `RevisionTraceStore`, `RevisionCheckpointStore`)
are each a `RevisionChain` (one workspace's chain of one kind) and only call the four protocol methods, so the host
reuses them unchanged over its own RevisionStore.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from .documents import SCHEMA_VERSION, canonical_json, sha256_digest
from .edits import EditSet
from .evaluation import Trace
from .graph import Graph, skeleton
from .rejections import RejectionMemory
from .traces import traces_document

__all__ = [
    "CHECKPOINT_WINDOW",
    "KINDS",
    "TRACE_SCAN_LIMIT",
    "Candidate",
    "CheckpointStore",
    "GraphStore",
    "HeadMoved",
    "MemoryRevisionStore",
    "NullCheckpointStore",
    "NullTraceStore",
    "RejectionStore",
    "Revision",
    "RevisionChain",
    "RevisionCheckpointStore",
    "RevisionGraphStore",
    "RevisionRejectionStore",
    "RevisionStore",
    "RevisionTraceStore",
    "TraceStore",
    "utc_now_iso",
]

GRAPH, REJECTIONS, TRACES, CHECKPOINTS = "graph", "rejections", "traces", "checkpoints"
KINDS: tuple[str, ...] = (GRAPH, REJECTIONS, TRACES, CHECKPOINTS)
CHECKPOINT_WINDOW = 200
TRACE_SCAN_LIMIT = 10_000


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _json_copy(value: Any) -> Any:
    """A deep, plain-JSON copy (refuses NaN and anything JSON cannot hold)."""
    return json.loads(canonical_json(value))


# -- revisions -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Revision:
    """One immutable document in a (workspace, kind) chain. `seq` is 0 for the first; `digest` covers the document."""

    workspace: str
    kind: str
    seq: int
    digest: str
    parent_digest: str | None
    document: Any
    meta: Mapping[str, Any] = field(default_factory=dict)
    created_at: str = ""


class HeadMoved(Exception):
    """The chain's head is not the one the writer expected (None stands for an empty chain)."""

    def __init__(self, workspace: str, kind: str, expected: str | None, actual: str | None) -> None:
        self.workspace = workspace
        self.kind = kind
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"the {kind} head of workspace {workspace!r} moved: expected {_short(expected)}, found {_short(actual)}"
        )


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "an empty chain"


@runtime_checkable
class RevisionStore(Protocol):
    """One append-only chain per (workspace, kind). Synchronous."""

    def head(self, workspace: str, kind: str) -> Revision | None: ...

    def append(
        self,
        workspace: str,
        kind: str,
        document: Any,
        *,
        expected_head: str | None,
        meta: Mapping[str, Any] | None = None,
    ) -> Revision: ...

    def get(self, workspace: str, kind: str, digest: str) -> Revision | None: ...

    def list(self, workspace: str, kind: str, limit: int = 50) -> Sequence[Revision]: ...


class MemoryRevisionStore:
    """RevisionStore in a dict: for tests and scripts. Documents are copied in and out, so callers cannot alter it."""

    def __init__(self, *, clock: Callable[[], str] = utc_now_iso) -> None:
        self._chains: dict[tuple[str, str], list[Revision]] = {}
        self._clock = clock

    def head(self, workspace: str, kind: str) -> Revision | None:
        chain = self._chains.get((workspace, kind))
        return _copied(chain[-1]) if chain else None

    def append(
        self,
        workspace: str,
        kind: str,
        document: Any,
        *,
        expected_head: str | None,
        meta: Mapping[str, Any] | None = None,
    ) -> Revision:
        chain = self._chains.setdefault((workspace, kind), [])
        actual = chain[-1].digest if chain else None
        if expected_head != actual:
            raise HeadMoved(workspace, kind, expected_head, actual)
        revision = Revision(
            workspace=workspace,
            kind=kind,
            seq=len(chain),
            digest=sha256_digest(document),
            parent_digest=actual,
            document=_json_copy(document),
            meta=_json_copy(dict(meta or {})),
            created_at=self._clock(),
        )
        chain.append(revision)
        return _copied(revision)

    def get(self, workspace: str, kind: str, digest: str) -> Revision | None:
        for revision in reversed(self._chains.get((workspace, kind), [])):
            if revision.digest == digest:
                return _copied(revision)
        return None

    def list(self, workspace: str, kind: str, limit: int = 50) -> list[Revision]:
        chain = self._chains.get((workspace, kind), [])
        return [_copied(revision) for revision in reversed(chain[max(0, len(chain) - max(0, limit)) :])]


def _copied(revision: Revision) -> Revision:
    return Revision(
        workspace=revision.workspace,
        kind=revision.kind,
        seq=revision.seq,
        digest=revision.digest,
        parent_digest=revision.parent_digest,
        document=_json_copy(revision.document),
        meta=_json_copy(dict(revision.meta)),
        created_at=revision.created_at,
    )


class RevisionChain:
    """One workspace's chain of one kind (`kind`) in a RevisionStore: what the layer stores below read and write."""

    kind: str

    def __init__(self, revisions: RevisionStore, workspace: str) -> None:
        self.revisions = revisions
        self.workspace = workspace

    def head(self) -> Revision | None:
        return self.revisions.head(self.workspace, self.kind)

    def head_digest(self) -> str | None:
        """The head's digest; a store may offer `head_digest` to answer without reading the document."""
        fast = getattr(self.revisions, "head_digest", None)
        if fast is not None:
            return fast(self.workspace, self.kind)
        head = self.head()
        return head.digest if head is not None else None

    def newest(self, limit: int) -> Sequence[Revision]:
        return self.revisions.list(self.workspace, self.kind, limit)

    def append(self, document: Any, *, expected_head: str | None, meta: Mapping[str, Any]) -> str:
        """The digest of the revision appended after `expected_head` (HeadMoved when the head is another)."""
        return self.revisions.append(self.workspace, self.kind, document, expected_head=expected_head, meta=meta).digest


# -- graphs ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A candidate as the host materialised it: its ref, the (canonical) graph, the edits and the revision meta."""

    ref: str
    graph: Graph
    edits: EditSet
    meta: Mapping[str, Any] = field(default_factory=dict)


class GraphStore(Protocol):
    def load(self) -> tuple[str | None, Graph]: ...

    def seed(self, graph: Graph, *, meta: Mapping[str, Any]) -> str: ...

    def propose(
        self,
        current_ref: str,
        current: Graph,
        edits: EditSet,
        candidate: Graph,
        *,
        iteration: int,
        rejections_ref: str | None,
    ) -> Candidate: ...

    def accept(self, candidate: Candidate, *, expected_ref: str) -> str: ...


class RevisionGraphStore(RevisionChain):
    """The graph chain: the seed and every accepted graph. Candidates are never stored here; the ref is the digest."""

    kind = GRAPH

    def load(self) -> tuple[str | None, Graph]:
        """(head ref, head graph), or (None, skeleton) for an empty chain. The stored digest is verified."""
        head = self.head()
        if head is None:
            return None, skeleton()
        graph = Graph.from_document(head.document)
        if graph.digest != head.digest:
            raise ValueError(
                f"the graph head of workspace {self.workspace!r} (#{head.seq}) does not match its digest "
                f"{head.digest[:12]}: the stored document was altered"
            )
        return head.digest, graph

    def seed(self, graph: Graph, *, meta: Mapping[str, Any]) -> str:
        """Revision 0; HeadMoved when the workspace already has a graph. The meta is {iteration: 0, …}."""
        return self.append(graph.to_document(), expected_head=None, meta={"iteration": 0, **dict(meta)})

    def propose(
        self,
        current_ref: str,
        current: Graph,
        edits: EditSet,
        candidate: Graph,
        *,
        iteration: int,
        rejections_ref: str | None,
    ) -> Candidate:
        """The candidate as is (idempotent per (iteration, edits)): ref = its digest."""
        meta = {"iteration": iteration, "rejections_ref": rejections_ref, "base_ref": current_ref}
        return Candidate(ref=candidate.digest, graph=candidate, edits=edits, meta=meta)

    def accept(self, candidate: Candidate, *, expected_ref: str) -> str:
        """Append the candidate after `expected_ref` with its meta, its edits and origin "accepted"."""
        meta = {
            **dict(candidate.meta),
            "edits": candidate.edits.to_dict(candidate.graph.attribute_fields),
            "origin": "accepted",
        }
        return self.append(candidate.graph.to_document(), expected_head=expected_ref, meta=meta)

    def history(self, limit: int = 50) -> list[Revision]:
        return list(self.newest(limit))


# -- rejection memory ------------------------------------------------------------------------------------------------


class RejectionStore(Protocol):
    def load(self) -> tuple[str | None, RejectionMemory]: ...

    def save(self, memory: RejectionMemory, *, expected_ref: str | None, iteration: int) -> str: ...


class RevisionRejectionStore(RevisionChain):
    """The rejection-memory chain: one revision per round, meta {iteration}."""

    kind = REJECTIONS

    def load(self) -> tuple[str | None, RejectionMemory]:
        head = self.head()
        if head is None:
            return None, RejectionMemory()
        return head.digest, RejectionMemory.from_document(head.document)

    def save(self, memory: RejectionMemory, *, expected_ref: str | None, iteration: int) -> str:
        return self.append(memory.to_document(), expected_head=expected_ref, meta={"iteration": iteration})


# -- traces ----------------------------------------------------------------------------------------------------------


class TraceStore(Protocol):
    def put(self, traces: Sequence[Trace], *, iteration: int) -> str | None: ...

    def get(self, trace_id: str) -> Trace | None: ...


class RevisionTraceStore(RevisionChain):
    """The traces chain: one revision `{schema, iteration, traces}` per round's rollout.

    Writing the document the head already holds is a no-op, so a round that is run again after a crash does not
    store its traces twice.
    """

    kind = TRACES

    def put(self, traces: Sequence[Trace], *, iteration: int) -> str:
        document = traces_document(list(traces), iteration)
        expected = self.head_digest()
        digest = sha256_digest(document)
        if expected == digest:
            return digest
        return self.append(document, expected_head=expected, meta={"iteration": iteration})

    def get(self, trace_id: str) -> Trace | None:
        """The newest stored trace with this id, scanning up to 10,000 revisions."""
        for revision in self.newest(TRACE_SCAN_LIMIT):
            for raw in _stored_traces(revision.document):
                if raw.get("id") == trace_id:
                    return Trace.from_document(raw)
        return None


def _stored_traces(document: Any) -> Iterable[Mapping[str, Any]]:
    traces = document.get("traces") if isinstance(document, Mapping) else None
    return [raw for raw in traces or () if isinstance(raw, Mapping)]


class NullTraceStore:
    """Keeps nothing (the default)."""

    def put(self, traces: Sequence[Trace], *, iteration: int) -> None:
        return None

    def get(self, trace_id: str) -> Trace | None:
        return None


# -- checkpoints -----------------------------------------------------------------------------------------------------


class CheckpointStore(Protocol):
    def load(self, iteration: int) -> Mapping[str, Any] | None: ...

    def save(self, iteration: int, payload: Mapping[str, Any]) -> None: ...


class RevisionCheckpointStore(RevisionChain):
    """The checkpoints chain: `{schema, iteration, payload}` revisions; `load` reads the newest for an iteration."""

    kind = CHECKPOINTS

    def load(self, iteration: int) -> dict[str, Any] | None:
        """The newest payload saved for `iteration`, looking at the last 200 revisions."""
        for revision in self.newest(CHECKPOINT_WINDOW):
            document = revision.document
            if isinstance(document, Mapping) and document.get("iteration") == iteration:
                payload = document.get("payload")
                return dict(payload) if isinstance(payload, Mapping) else None
        return None

    def save(self, iteration: int, payload: Mapping[str, Any]) -> None:
        document = {"schema": SCHEMA_VERSION, "iteration": iteration, "payload": dict(payload)}
        self.append(document, expected_head=self.head_digest(), meta={"iteration": iteration})


class NullCheckpointStore:
    """Keeps nothing (the default): without a real checkpoint store there is no resume."""

    def load(self, iteration: int) -> None:
        return None

    def save(self, iteration: int, payload: Mapping[str, Any]) -> None:
        return None
