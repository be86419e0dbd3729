"""Caches of the guidance path (Redis in production): what a guidance call costs is its neighbourhood, not the graph.

- The workspace card (id, slug, task description, active revision with its refiner-shape graph) per slug, dropped on
  commit whenever the active pointer moves, and kept at most ACTIVE_TTL seconds in any case.
- Exact revision refs (a seq number or a full digest) per workspace: immutable, since chains are append-only.
- Serialized contexts keyed by (graph digest, node, hops, include_relations): content-addressed, never stale.
- Parsed graphs: a small per-process LRU keyed by digest, so a document is parsed once per digest per process.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from django.core.cache import cache

from graphs.core import Graph, serialize_context, sha256_digest

ACTIVE_TTL = 60
IMMUTABLE_TTL = 24 * 3600
GRAPH_LRU_SIZE = 16
_PREFIX = "graphs:v1"


def active_key(slug: str) -> str:
    return f"{_PREFIX}:card:{slug}"


def get_card(slug: str) -> dict[str, Any] | None:
    return cache.get(active_key(slug))


def set_card(slug: str, card: dict[str, Any]) -> None:
    cache.set(active_key(slug), card, ACTIVE_TTL)


def forget_active(slug: str) -> None:
    cache.delete(active_key(slug))


def _ref_key(workspace_id: int, ref: str) -> str:
    return f"{_PREFIX}:ref:{workspace_id}:{ref}"


def get_ref(workspace_id: int, ref: str) -> dict[str, Any] | None:
    return cache.get(_ref_key(workspace_id, ref))


def set_ref(workspace_id: int, ref: str, summary: dict[str, Any]) -> None:
    cache.set(_ref_key(workspace_id, ref), summary, IMMUTABLE_TTL)


class GraphLRU:
    """Digest → parsed Graph, at most `size` graphs, thread-safe."""

    def __init__(self, size: int = GRAPH_LRU_SIZE) -> None:
        self.size = size
        self._graphs: OrderedDict[str, Graph] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def get(self, digest: str, load_document: Callable[[], Any]) -> Graph:
        with self._lock:
            graph = self._graphs.get(digest)
            if graph is not None:
                self._graphs.move_to_end(digest)
                return graph
        document = load_document()
        if sha256_digest(document) != digest:
            raise ValueError(f"the stored document of revision {digest[:12]} does not match its digest")
        graph = Graph.from_document(document)
        with self._lock:
            self.misses += 1
            self._graphs[digest] = graph
            self._graphs.move_to_end(digest)
            while len(self._graphs) > self.size:
                self._graphs.popitem(last=False)
        return graph

    def clear(self) -> None:
        with self._lock:
            self._graphs.clear()


graphs = GraphLRU()


def _context_key(digest: str, node_id: str | None, hops: int, include_relations: bool) -> str:
    where = "full" if node_id is None else hashlib.sha256(node_id.encode()).hexdigest()[:32]
    return f"{_PREFIX}:ctx:{digest}:{where}:{hops}:{int(include_relations)}"


def serialized_context(
    graph: Graph, digest: str, node_id: str | None, hops: int, include_relations: bool
) -> tuple[str, str | None]:
    """(context, neighbourhood digest) of N_hops(node_id), or of the whole graph when node_id is None."""
    key = _context_key(digest, node_id, 0 if node_id is None else hops, include_relations)
    found = cache.get(key)
    if found is not None:
        return found[0], found[1]
    if node_id is None:
        value = (serialize_context(graph, None, include_relations=include_relations), None)
    else:
        value = (
            serialize_context(graph, node_id, hops, include_relations),
            graph.neighborhood(node_id, hops).digest,
        )
    cache.set(key, value, IMMUTABLE_TTL)
    return value
