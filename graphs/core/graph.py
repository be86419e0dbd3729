"""The procedural graph data model (spec §2.1): immutable nodes, edges and graphs, documents and digests.

G = (V, R, E, Φ): nodes, a relation vocabulary, directed triples (source, relation, target) and each edge's named
text attributes. Nodes are kept sorted by id and edges by their triple, so the digest never depends on the order a
graph was built in. Adjacency is computed once per graph, lazily, so neighbourhood queries cost what the
neighbourhood costs, never a scan of every edge.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import pairwise
from types import MappingProxyType
from typing import Any

from .diagnostics import Diagnostic, GraphError, error, errors_in
from .documents import SCHEMA_VERSION, canonical_json, sha256_digest

START = "Start"
END = "End"
DEFAULT_RELATIONS: tuple[str, ...] = ("LEADS_TO", "TRIGGERS", "PROVIDES_INPUT_FOR", "CONVERGES_TO")
DEFAULT_ATTRIBUTE_FIELDS: tuple[str, ...] = ("condition", "guidance", "pitfalls")
DEFAULT_NODE_TYPES: tuple[str, ...] = ("ACTION", "REASONING", "STATUS")
SENTINEL_DESCRIPTIONS: Mapping[str, str] = MappingProxyType({START: "Task start", END: "Task end"})
STRUCTURAL_EDGE_KEYS: tuple[str, ...] = ("source", "target", "relation")
RESERVED_ATTRIBUTE_NAMES = frozenset({"source", "target", "relation", "id"})
CYCLE_POLICIES: tuple[str, ...] = ("repair", "allow")

_EMPTY: Mapping[str, Any] = MappingProxyType({})

__all__ = [
    "CYCLE_POLICIES",
    "DEFAULT_ATTRIBUTE_FIELDS",
    "DEFAULT_NODE_TYPES",
    "DEFAULT_RELATIONS",
    "END",
    "RESERVED_ATTRIBUTE_NAMES",
    "SCHEMA_VERSION",
    "START",
    "Diagnostic",
    "Edge",
    "Graph",
    "GraphError",
    "Neighborhood",
    "Node",
    "canonical_json",
    "check_cycle_policy",
    "sha256_digest",
    "skeleton",
]


def _frozen_json(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only deep copy of a JSON object (refuses NaN and anything JSON cannot hold)."""
    if not value:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise ValueError(f"meta must be a mapping, not {type(value).__name__}")
    return MappingProxyType(json.loads(canonical_json(value)))


def _thaw(value: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(canonical_json(value)) if value else {}


def attribute_text(value: Any) -> str | None:
    """Edge attributes are text or null; anything else a model wrote is kept as its JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _vocabulary(values: Iterable[str] | None, default: tuple[str, ...], *, upper: bool) -> tuple[str, ...]:
    if values is None:
        return default
    if isinstance(values, str):
        raise ValueError("a vocabulary is a list of names, not one string")
    cleaned = (str(v).strip() for v in values)
    return tuple(dict.fromkeys(v.upper() if upper else v for v in cleaned if v))


def check_cycle_policy(cycle_policy: str) -> str:
    if cycle_policy not in CYCLE_POLICIES:
        raise ValueError(f"cycle_policy must be one of {CYCLE_POLICIES}, not {cycle_policy!r}")
    return cycle_policy


@dataclass(frozen=True)
class Node:
    """A tool call, skill, reasoning step or task status. Types are stored upper-case; ids are case-sensitive."""

    id: str
    type: str
    description: str = ""
    ref: str | None = None
    meta: Mapping[str, Any] = field(default=_EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", str(self.id))
        object.__setattr__(self, "type", "" if self.type is None else str(self.type).strip().upper())
        object.__setattr__(self, "description", "" if self.description is None else str(self.description))
        object.__setattr__(self, "ref", None if self.ref is None else str(self.ref))
        object.__setattr__(self, "meta", _frozen_json(self.meta))

    def __hash__(self) -> int:
        return hash((self.id, self.type, self.description, self.ref, canonical_json(self.meta) if self.meta else ""))

    def __reduce__(self) -> tuple[Any, ...]:  # read-only mappings do not pickle; caches pickle graphs
        return (Node, (self.id, self.type, self.description, self.ref, _thaw(self.meta)))

    def to_dict(self, *, extras: bool = True) -> dict[str, Any]:
        value: dict[str, Any] = {"id": self.id, "type": self.type, "description": self.description}
        if extras:
            value["ref"] = self.ref
            value["meta"] = _thaw(self.meta)
        return value


@dataclass(frozen=True)
class Edge:
    """A directed attributed triple: `target` may follow `source` under `relation` (stored upper-case)."""

    source: str
    relation: str
    target: str
    attributes: Mapping[str, str | None] = field(default=_EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", str(self.source))
        object.__setattr__(self, "target", str(self.target))
        object.__setattr__(self, "relation", "" if self.relation is None else str(self.relation).strip().upper())
        attributes = {str(k): attribute_text(v) for k, v in dict(self.attributes or {}).items()}
        object.__setattr__(self, "attributes", MappingProxyType(attributes))

    def __hash__(self) -> int:
        return hash((self.key, tuple(sorted((k, v or "") for k, v in self.attributes.items()))))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Edge, (self.source, self.relation, self.target, dict(self.attributes)))

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.relation, self.target)

    @property
    def label(self) -> str:
        return f"{self.source} -{self.relation}-> {self.target}"

    @property
    def condition(self) -> str | None:
        return self.attributes.get("condition")

    @property
    def guidance(self) -> str | None:
        return self.attributes.get("guidance")

    @property
    def pitfalls(self) -> str | None:
        return self.attributes.get("pitfalls")

    def to_dict(self, attribute_fields: Iterable[str] | None = None) -> dict[str, Any]:
        """The flat shape: source, target, relation, every schema field (null when missing), then any extras."""
        value: dict[str, Any] = {"source": self.source, "target": self.target, "relation": self.relation}
        for name in attribute_fields if attribute_fields is not None else self.attributes:
            value[name] = self.attributes.get(name)
        for name, text in self.attributes.items():
            value.setdefault(name, text)
        return value


@dataclass(frozen=True)
class Neighborhood:
    """N_h(active): the outgoing transitions reached breadth-first within `hops`, each tagged with its hop.

    `edges` is ordered by hop, then by edge sort order; `node_ids` lists the nodes in the order they were reached.
    """

    active: str
    hops: int
    edges: tuple[tuple[int, Edge], ...]
    node_ids: tuple[str, ...]

    @cached_property
    def digest(self) -> str:
        tagged = [[hop, edge.to_dict()] for hop, edge in self.edges]
        return sha256_digest({"active": self.active, "hops": self.hops, "edges": tagged})

    def edges_at(self, hop: int) -> tuple[Edge, ...]:
        return tuple(edge for h, edge in self.edges if h == hop)

    @property
    def max_hop(self) -> int:
        return max((h for h, _ in self.edges), default=0)


@dataclass(frozen=True, repr=False)
class Graph:
    """An immutable procedural graph. `nodes` maps id → Node (or is an iterable of Nodes) and is kept sorted."""

    nodes: Mapping[str, Node] = field(default=_EMPTY)
    edges: tuple[Edge, ...] = ()
    relations: tuple[str, ...] = DEFAULT_RELATIONS
    attribute_fields: tuple[str, ...] = DEFAULT_ATTRIBUTE_FIELDS
    node_types: tuple[str, ...] = DEFAULT_NODE_TYPES
    meta: Mapping[str, Any] = field(default=_EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "relations", _vocabulary(self.relations, DEFAULT_RELATIONS, upper=True))
        object.__setattr__(self, "node_types", _vocabulary(self.node_types, DEFAULT_NODE_TYPES, upper=True))
        fields = _vocabulary(self.attribute_fields, DEFAULT_ATTRIBUTE_FIELDS, upper=False)
        clash = sorted(set(fields) & RESERVED_ATTRIBUTE_NAMES)
        if clash:
            raise ValueError(f"attribute fields may not be named {', '.join(clash)}")
        object.__setattr__(self, "attribute_fields", fields)
        object.__setattr__(self, "nodes", MappingProxyType(self._sorted_nodes(self.nodes)))
        object.__setattr__(self, "edges", self._sorted_edges(self.edges, fields))
        object.__setattr__(self, "meta", _frozen_json(self.meta))

    @staticmethod
    def _sorted_nodes(nodes: Mapping[str, Node] | Iterable[Node]) -> dict[str, Node]:
        if isinstance(nodes, Mapping):
            for key, node in nodes.items():
                if key != node.id:
                    raise ValueError(f"node mapping key {key!r} does not match the node id {node.id!r}")
            values = list(nodes.values())
        else:
            values = list(nodes)
        by_id: dict[str, Node] = {}
        for node in values:
            if node.id in by_id:
                raise GraphError([error("duplicate_node", f"node {node.id!r} appears more than once", node.id)])
            by_id[node.id] = node
        return {node_id: by_id[node_id] for node_id in sorted(by_id)}

    @staticmethod
    def _sorted_edges(edges: Iterable[Edge], fields: tuple[str, ...]) -> tuple[Edge, ...]:
        complete = []
        for edge in edges:
            if any(name not in edge.attributes for name in fields):
                filled = {**dict.fromkeys(fields), **edge.attributes}
                edge = Edge(edge.source, edge.relation, edge.target, filled)
            complete.append(edge)
        ordered = sorted(complete, key=lambda e: e.key)
        if any(a.key == b.key for a, b in pairwise(ordered)):
            # duplicate triples are invalid, but their order must still not depend on construction order
            ordered.sort(key=lambda e: (e.key, canonical_json(e.attributes)))
        return tuple(ordered)

    def __hash__(self) -> int:
        return hash(self.digest)

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.relations, self.attribute_fields, self.node_types, _thaw(self.meta))
        return (Graph, (tuple(self.nodes.values()), self.edges, *fields))

    def __repr__(self) -> str:
        return f"<Graph {len(self.nodes)} node(s), {len(self.edges)} edge(s) {self.digest[:12]}>"

    # -- construction ------------------------------------------------------------------------------------------------

    @classmethod
    def skeleton(
        cls,
        *,
        relations: Iterable[str] | None = None,
        attribute_fields: Iterable[str] | None = None,
        node_types: Iterable[str] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Graph:
        """Start → End, one edge of the first configured relation with every attribute null."""
        vocabulary = cls(relations=relations, attribute_fields=attribute_fields, node_types=node_types)
        relation = vocabulary.relations[0] if vocabulary.relations else DEFAULT_RELATIONS[0]
        return replace(
            vocabulary,
            nodes=[
                Node(START, "STATUS", SENTINEL_DESCRIPTIONS[START]),
                Node(END, "STATUS", SENTINEL_DESCRIPTIONS[END]),
            ],
            edges=(Edge(START, relation, END, dict.fromkeys(vocabulary.attribute_fields)),),
            meta=meta or {},
        )

    @property
    def is_skeleton(self) -> bool:
        return set(self.nodes) == {START, END} and len(self.edges) == 1

    def with_meta(self, **updates: Any) -> Graph:
        """A copy whose meta is this meta updated with `updates`."""
        return replace(self, meta={**_thaw(self.meta), **updates})

    def replace_meta(self, meta: Mapping[str, Any] | None) -> Graph:
        """A copy with exactly `meta`."""
        return replace(self, meta=meta or {})

    def with_nodes(self, nodes: Mapping[str, Node] | Iterable[Node]) -> Graph:
        return replace(self, nodes=nodes)

    def with_edges(self, edges: Iterable[Edge]) -> Graph:
        return replace(self, edges=tuple(edges))

    # -- documents ---------------------------------------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        """The stored document: schema 1, sorted nodes and edges, vocabularies and meta."""
        return {
            "schema": SCHEMA_VERSION,
            "nodes": [node.to_dict() for node in self.nodes.values()],
            "edges": [edge.to_dict(self.attribute_fields) for edge in self.edges],
            "relations": list(self.relations),
            "attribute_fields": list(self.attribute_fields),
            "node_types": list(self.node_types),
            "meta": _thaw(self.meta),
        }

    def to_refiner_json(self) -> dict[str, Any]:
        """The refiner's `{nodes: [{id, type, description}], edges: [{source, target, relation, <fields>}]}`."""
        return {
            "nodes": [node.to_dict(extras=False) for node in self.nodes.values()],
            "edges": [edge.to_dict(self.attribute_fields) for edge in self.edges],
        }

    @cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the whole document, meta included."""
        return sha256_digest(self.to_document())

    def content_digest(self, exclude_meta: bool = True) -> str:
        """The digest without node ref/meta and graph meta (or the full digest when `exclude_meta` is False)."""
        if not exclude_meta:
            return self.digest
        document = self.to_document()
        document["nodes"] = [node.to_dict(extras=False) for node in self.nodes.values()]
        del document["meta"]
        return sha256_digest(document)

    @classmethod
    def from_document(cls, document: Any) -> Graph:
        """Strict inverse of `to_document`: no completion, no repair; malformed documents raise GraphError."""
        from .loading import load_document

        return load_document(cls, document)

    @classmethod
    def from_human(
        cls,
        value: Mapping[str, Any] | str | os.PathLike[str],
        *,
        relations: Iterable[str] | None = None,
        attribute_fields: Iterable[str] | None = None,
        node_types: Iterable[str] | None = None,
    ) -> tuple[Graph, list[Diagnostic]]:
        """A hand-written graph in the refiner shape (a dict or a JSON file path) → (graph, warnings).

        Adds a missing Start or End and the Start→End edge when the graph is only those two nodes
        (`skeleton_completed`); fills missing attribute fields with null. Everything else that fails validation raises
        GraphError: a missing type or relation is refused, never defaulted. Empty input gives the skeleton quietly.
        """
        from .loading import load_human

        return load_human(cls, value, relations=relations, attribute_fields=attribute_fields, node_types=node_types)

    # -- queries -----------------------------------------------------------------------------------------------------

    @cached_property
    def _outgoing(self) -> Mapping[str, tuple[Edge, ...]]:
        grouped: dict[str, list[Edge]] = {}
        for edge in self.edges:
            grouped.setdefault(edge.source, []).append(edge)
        return {source: tuple(edges) for source, edges in grouped.items()}

    @cached_property
    def _incoming(self) -> Mapping[str, tuple[Edge, ...]]:
        grouped: dict[str, list[Edge]] = {}
        for edge in self.edges:
            grouped.setdefault(edge.target, []).append(edge)
        return {target: tuple(edges) for target, edges in grouped.items()}

    def node(self, node_id: str) -> Node | None:
        return self.nodes.get(node_id)

    def successors(self, node_id: str) -> tuple[Edge, ...]:
        """Outgoing edges of `node_id`, in edge sort order."""
        return self._outgoing.get(node_id, ())

    def predecessors(self, node_id: str) -> tuple[Edge, ...]:
        """Incoming edges of `node_id`, in edge sort order."""
        return self._incoming.get(node_id, ())

    def out_degree(self, node_id: str) -> int:
        return len(self.successors(node_id))

    def edges_between(self, source: str, target: str) -> tuple[Edge, ...]:
        return tuple(edge for edge in self.successors(source) if edge.target == target)

    def terminals(self) -> list[str]:
        """Nodes with zero out-degree (not necessarily End)."""
        return [node_id for node_id in self.nodes if not self.successors(node_id)]

    def reachable_from(self, node_id: str) -> set[str]:
        """Every node reachable from `node_id` along outgoing edges, itself included."""
        seen = {node_id}
        queue = deque([node_id])
        while queue:
            for edge in self.successors(queue.popleft()):
                if edge.target not in seen:
                    seen.add(edge.target)
                    queue.append(edge.target)
        return seen

    def neighborhood(self, node_id: str, hops: int) -> Neighborhood:
        """N_h(node_id): breadth-first over outgoing edges, each node expanded once, edges tagged with their hop."""
        if node_id not in self.nodes:
            raise KeyError(node_id)
        if isinstance(hops, bool) or not isinstance(hops, int) or hops < 1:
            raise ValueError("hops must be an integer >= 1")
        seen = {node_id}
        order = [node_id]
        frontier = [node_id]
        tagged: list[tuple[int, Edge]] = []
        for hop in range(1, hops + 1):
            expanded = [edge for source in frontier for edge in self.successors(source)]
            expanded.sort(key=lambda e: e.key)
            following: list[str] = []
            for edge in expanded:
                tagged.append((hop, edge))
                if edge.target not in seen:
                    seen.add(edge.target)
                    order.append(edge.target)
                    following.append(edge.target)
            frontier = following
            if not frontier:
                break
        return Neighborhood(active=node_id, hops=hops, edges=tuple(tagged), node_ids=tuple(order))

    # -- invariants --------------------------------------------------------------------------------------------------

    def validate(self, cycle_policy: str = "repair") -> list[Diagnostic]:
        """Every structural check of spec §3 (validation never changes the graph; repair is prepare_candidate's)."""
        from .validation import validate_graph

        return validate_graph(self, cycle_policy=cycle_policy)

    def is_valid(self, cycle_policy: str = "repair") -> bool:
        return not errors_in(self.validate(cycle_policy))

    def summary(self) -> str:
        return f"{len(self.nodes)} node(s), {len(self.edges)} edge(s), digest {self.digest[:12]}"


def skeleton(**vocabulary: Any) -> Graph:
    """The Start → End graph (see `Graph.skeleton`)."""
    return Graph.skeleton(**vocabulary)
