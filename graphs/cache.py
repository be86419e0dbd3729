"""Caches of the guidance path (Redis in production): what a guidance call costs is its neighbourhood, not the graph.

- The workspace card (id, slug, task description, active revision summary, the active revision's certificate
  summary, and while a canary runs its share and its control's summary and certificate: each per-step call picks
  its arm from the card with no query) per slug and card version; every commit that moves the active pointer,
  starts, changes or ends a canary, or issues the active revision a certificate, replaces the version, so the
  shared entry is never stale (and expires after ACTIVE_TTL seconds anyway). Each process reuses the card it read
  for at most CARD_LOCAL_SECONDS (1 s) before asking the shared cache again, so a pointer move reaches every
  process within a second.
- Exact revision refs (a seq number or a full digest) per workspace: immutable, since chains are append-only.
- Serialized contexts keyed by (graph digest, node, hops, include_relations): content-addressed, never stale.
- Parsed graphs: a small per-process LRU keyed by digest, so a document is parsed once per digest per process; recent
  contexts and encoded active-graph bodies (immutable per revision and certificate) are kept per process in front of
  the shared cache.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from django.core.cache import cache

from common.local_copies import Recent, forgets
from graphs.core import Graph, serialize_context, sha256_digest

ACTIVE_TTL = 60
CARD_LOCAL_SECONDS = 1.0
IMMUTABLE_TTL = 24 * 3600
GRAPH_LRU_SIZE = 16
_PREFIX = "graphs:v1"


def _version_key(slug: str) -> str:
    return f"{_PREFIX}:cardversion:{slug}"


def _card_key(slug: str, version: str) -> str:
    return f"{_PREFIX}:card:{slug}:{version}"


recent_cards: Recent[str, dict[str, Any]] = Recent(CARD_LOCAL_SECONDS)  # slug → card


def card(slug: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The workspace card: this process's copy (at most 1 s old), else the shared one, else `build()` (the database).

    The shared entry is keyed by the slug's current card version, which every pointer move replaces on commit. A
    reader that built its card from the database just before a move stores it under the old version, where nobody
    looks any more: a stale card can never be stored as the current one.
    """
    found = recent_cards.get(slug)
    if found is not None:
        return found
    version = cache.get(_version_key(slug)) or "0"
    found = cache.get(_card_key(slug, version))
    if found is None:
        found = build()
        cache.set(_card_key(slug, version), found, ACTIVE_TTL)
    recent_cards.put(slug, found)
    return found


def forget_active(slug: str) -> None:
    """On commit of a pointer move (or of a certificate of the active revision): a new card version at once; other
    processes' local copies within a second."""
    cache.set(_version_key(slug), uuid.uuid4().hex, None)
    recent_cards.forget(slug)


def shared_card(slug: str) -> dict[str, Any] | None:
    """The card the shared cache holds now (for tests and diagnostics)."""
    return cache.get(_card_key(slug, cache.get(_version_key(slug)) or "0"))


def _ref_key(workspace_id: int, ref: str) -> str:
    return f"{_PREFIX}:ref:{workspace_id}:{ref}"


def get_ref(workspace_id: int, ref: str) -> dict[str, Any] | None:
    return cache.get(_ref_key(workspace_id, ref))


def set_ref(workspace_id: int, ref: str, summary: dict[str, Any]) -> None:
    cache.set(_ref_key(workspace_id, ref), summary, IMMUTABLE_TTL)


class LRU:
    """A small thread-safe per-process LRU for immutable values (keyed by content digests or revision ids)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> Any:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class GraphLRU(LRU):
    """Digest → parsed Graph, at most `size` graphs: a document is parsed once per digest per process."""

    def __init__(self, size: int = GRAPH_LRU_SIZE) -> None:
        super().__init__(size)
        self.misses = 0

    def graph(self, digest: str, load_document: Callable[[], Any]) -> Graph:
        graph = self.get(digest)
        if graph is not None:
            return graph
        document = load_document()
        if sha256_digest(document) != digest:
            raise ValueError(f"the stored document of revision {digest[:12]} does not match its digest")
        self.misses += 1
        return self.put(digest, Graph.from_document(document))


graphs = GraphLRU()
# Serialized contexts and encoded active-graph bodies are immutable too: a process keeps the recent ones in memory
# in front of the shared cache, so a warm guidance call makes one cache round trip (the workspace card).
contexts = LRU(1024)
bodies = LRU(64)


@forgets
def clear_local() -> None:
    for local in (graphs, contexts, bodies, recent_cards):
        local.clear()


def _context_key(digest: str, node_id: str | None, hops: int, include_relations: bool) -> str:
    where = "full" if node_id is None else hashlib.sha256(node_id.encode()).hexdigest()[:32]
    return f"{_PREFIX}:ctx:{digest}:{where}:{hops}:{int(include_relations)}"


def serialized_context(
    graph: Graph, digest: str, node_id: str | None, hops: int, include_relations: bool
) -> tuple[str, str | None]:
    """(context, neighbourhood digest) of N_hops(node_id), or of the whole graph when node_id is None."""
    key = _context_key(digest, node_id, 0 if node_id is None else hops, include_relations)
    found = contexts.get(key)
    if found is not None:
        return found
    found = cache.get(key)
    if found is not None:
        return contexts.put(key, (found[0], found[1]))
    if node_id is None:
        value = (serialize_context(graph, None, include_relations=include_relations), None)
    else:
        value = (
            serialize_context(graph, node_id, hops, include_relations),
            graph.neighborhood(node_id, hops).digest,
        )
    cache.set(key, value, IMMUTABLE_TTL)
    return contexts.put(key, value)
