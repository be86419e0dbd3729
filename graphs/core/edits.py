"""The refiner's edit set and PrepareCandidate (spec §2.2), plus the unified diff of two graphs.

Order of application, to a copy: delete_edges (every relation between the pair), delete_nodes (with incident edges),
add_nodes, add_edges; then cycle repair under `repair`, then validation, then `unknown_action` warnings.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .diagnostics import Diagnostic, error, errors_in, has_errors, warning
from .graph import END, START, STRUCTURAL_EDGE_KEYS, Edge, Graph, Node, check_cycle_policy
from .serialize import to_markdown
from .validation import repair_cycles

EDIT_KEYS: tuple[str, ...] = ("add_nodes", "delete_nodes", "add_edges", "delete_edges")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class EditSet:
    """ΔG: four arrays. There is no update: an attribute is revised by deleting the pair and adding it again."""

    add_nodes: tuple[Node, ...] = ()
    delete_nodes: tuple[str, ...] = ()
    add_edges: tuple[Edge, ...] = ()
    delete_edges: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "add_nodes", tuple(self.add_nodes))
        object.__setattr__(self, "delete_nodes", tuple(str(n) for n in self.delete_nodes))
        object.__setattr__(self, "add_edges", tuple(self.add_edges))
        object.__setattr__(self, "delete_edges", tuple((str(s), str(t)) for s, t in self.delete_edges))

    @property
    def is_empty(self) -> bool:
        return not (self.add_nodes or self.delete_nodes or self.add_edges or self.delete_edges)

    def counts(self) -> dict[str, int]:
        return {key: len(getattr(self, key)) for key in EDIT_KEYS}

    def summary(self) -> str:
        c = self.counts()
        return (
            f"+{c['add_nodes']} node(s) −{c['delete_nodes']} node(s) "
            f"+{c['add_edges']} edge(s) −{c['delete_edges']} edge(s)"
        )

    def to_dict(self, attribute_fields: Iterable[str] | None = None) -> dict[str, Any]:
        fields = tuple(attribute_fields) if attribute_fields is not None else None
        return {
            "add_nodes": [node.to_dict(extras=False) for node in self.add_nodes],
            "delete_nodes": list(self.delete_nodes),
            "add_edges": [edge.to_dict(fields) for edge in self.add_edges],
            "delete_edges": [{"source": source, "target": target} for source, target in self.delete_edges],
        }

    @classmethod
    def from_dict(
        cls, value: Any, attribute_fields: Iterable[str] | None = None
    ) -> tuple[EditSet | None, list[Diagnostic]]:
        """Shape-check a decoded edit object; None with `malformed_edit` errors when it is not usable."""
        return edit_set_from_dict(value, attribute_fields)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _first_json_object(text: str) -> tuple[dict[str, Any] | None, bool]:
    """The first `{…}` that decodes as a JSON object, looking inside code fences first; (object, saw_a_brace)."""
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    saw_brace = False
    for candidate in [*(m.group(1) for m in _FENCE.finditer(text)), text]:
        start = candidate.find("{")
        while start != -1:
            saw_brace = True
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except ValueError:
                value = None
            if isinstance(value, dict):
                return value, True
            start = candidate.find("{", start + 1)
    return None, saw_brace


def parse_edit_set(text: str, attribute_fields: Iterable[str] | None = None) -> tuple[EditSet | None, list[Diagnostic]]:
    """Parse a refiner reply, tolerating prose and code fences. Returns (EditSet or None, diagnostics).

    An empty EditSet is a valid result: the caller turns it into the `no_action` outcome (see `no_action`).
    """
    if not isinstance(text, str):
        return None, [error("malformed_edit", "the reply is not text", "reply")]
    value, saw_brace = _first_json_object(text)
    if value is None:
        message = "the JSON object in the reply does not parse" if saw_brace else "no JSON object found in the reply"
        return None, [error("malformed_edit", message, "reply")]
    return edit_set_from_dict(value, attribute_fields)


def edit_set_from_dict(
    value: Any, attribute_fields: Iterable[str] | None = None
) -> tuple[EditSet | None, list[Diagnostic]]:
    if not isinstance(value, Mapping):
        return None, [error("malformed_edit", "the edit set must be a JSON object with four arrays", "reply")]
    if not set(value) & set(EDIT_KEYS):
        message = f"the edit set has none of {', '.join(EDIT_KEYS)} (keys found: {', '.join(sorted(value)) or 'none'})"
        return None, [error("malformed_edit", message, "reply")]
    found: list[Diagnostic] = []
    unknown = sorted(set(value) - set(EDIT_KEYS))
    if unknown:
        found.append(
            warning("malformed_edit", f"unknown keys in the edit set: {', '.join(unknown)}", ",".join(unknown))
        )
    arrays: dict[str, list[Any]] = {}
    for key in EDIT_KEYS:
        raw = value.get(key)
        if raw is not None and not isinstance(raw, list):
            found.append(error("malformed_edit", f"{key} must be an array", key))
            raw = None
        arrays[key] = raw or []
    fields = tuple(attribute_fields) if attribute_fields is not None else None
    edits = EditSet(
        add_nodes=_added_nodes(arrays["add_nodes"], found),
        delete_nodes=_deleted_nodes(arrays["delete_nodes"], found),
        add_edges=_added_edges(arrays["add_edges"], fields, found),
        delete_edges=_deleted_edges(arrays["delete_edges"], found),
    )
    if has_errors(found):
        return None, found
    return edits, found


def _added_nodes(entries: list[Any], found: list[Diagnostic]) -> list[Node]:
    nodes = []
    for raw in entries:
        if not isinstance(raw, Mapping) or not _is_text(raw.get("id")):
            found.append(error("malformed_edit", f"add_nodes entries need a non-empty id: {raw!r}", "add_nodes"))
        elif not _is_text(raw.get("type")):
            found.append(error("malformed_edit", f"add_nodes entry {raw['id']!r} has no type", raw["id"]))
        else:
            nodes.append(Node(raw["id"], raw["type"], raw.get("description")))
    return nodes


def _deleted_nodes(entries: list[Any], found: list[Diagnostic]) -> list[str]:
    ids = []
    for raw in entries:
        node_id = raw.get("id") if isinstance(raw, Mapping) else raw
        if not _is_text(node_id):
            found.append(error("malformed_edit", f"delete_nodes entries must be node ids: {raw!r}", "delete_nodes"))
        else:
            ids.append(node_id)
    return ids


def _added_edges(entries: list[Any], fields: tuple[str, ...] | None, found: list[Diagnostic]) -> list[Edge]:
    edges = []
    for raw in entries:
        if not isinstance(raw, Mapping) or not all(_is_text(raw.get(key)) for key in STRUCTURAL_EDGE_KEYS):
            message = f"add_edges entries need source, target and relation: {raw!r}"
            found.append(error("malformed_edit", message, "add_edges"))
            continue
        attributes = dict.fromkeys(fields or ())
        attributes.update((k, v) for k, v in raw.items() if k not in STRUCTURAL_EDGE_KEYS)
        edges.append(Edge(raw["source"], raw["relation"], raw["target"], attributes))
    return edges


def _deleted_edges(entries: list[Any], found: list[Diagnostic]) -> list[tuple[str, str]]:
    pairs = []
    for raw in entries:
        if isinstance(raw, list | tuple) and len(raw) == 2:
            raw = {"source": raw[0], "target": raw[1]}
        if not isinstance(raw, Mapping) or not (_is_text(raw.get("source")) and _is_text(raw.get("target"))):
            message = f"delete_edges entries need source and target: {raw!r}"
            found.append(error("malformed_edit", message, "delete_edges"))
        else:
            pairs.append((raw["source"], raw["target"]))
    return pairs


def no_action(message: str = "the refiner proposed no edits") -> Diagnostic:
    """The diagnostic a caller records when an edit set is empty or its edits cancel out."""
    return error("no_action", message, None)


def prepare_candidate(
    graph: Graph,
    edits: EditSet,
    *,
    cycle_policy: str = "repair",
    available_tools: Sequence[str] | None = None,
) -> tuple[Graph | None, list[Diagnostic]]:
    """Apply `edits` to a copy of `graph` in the reference order → (candidate or None, diagnostics).

    The candidate is None whenever any diagnostic is an error. Its meta drops an inherited `repairs` key and gains
    `repairs` (the removed edges) when cycle repair removed anything.
    """
    check_cycle_policy(cycle_policy)
    found: list[Diagnostic] = []
    nodes = dict(graph.nodes)
    edges = list(graph.edges)

    for source, target in edits.delete_edges:
        kept = [edge for edge in edges if not (edge.source == source and edge.target == target)]
        if len(kept) == len(edges):
            found.append(
                warning("no_such_edge", f"delete_edges: no edge from {source!r} to {target!r}", f"{source}→{target}")
            )
        edges = kept
    for node_id in edits.delete_nodes:
        if node_id in (START, END):
            found.append(
                error("reserved_node", f"delete_nodes: {node_id!r} is a sentinel and cannot be deleted", node_id)
            )
        elif node_id not in nodes:
            found.append(warning("no_such_node", f"delete_nodes: no node {node_id!r}", node_id))
        else:
            del nodes[node_id]
            edges = [edge for edge in edges if node_id not in (edge.source, edge.target)]
    for node in edits.add_nodes:
        if not node.id.strip():
            found.append(error("malformed_edit", "add_nodes: empty node id", node.id))
        elif node.id in nodes:
            found.append(error("duplicate_node", f"add_nodes: node {node.id!r} already exists", node.id))
        else:
            nodes[node.id] = node
    keys = {edge.key for edge in edges}
    for edge in edits.add_edges:
        complete = Edge(
            edge.source, edge.relation, edge.target, {**dict.fromkeys(graph.attribute_fields), **edge.attributes}
        )
        if complete.key in keys:
            found.append(error("duplicate_edge", f"add_edges: edge {complete.label} already exists", complete.label))
            continue
        if "guidance" in graph.attribute_fields and not (complete.guidance or "").strip():
            message = f"add_edges: edge {complete.label} has no guidance"
            found.append(warning("missing_guidance", message, complete.label))
        keys.add(complete.key)
        edges.append(complete)
    if has_errors(found):
        return None, found

    meta = {key: value for key, value in graph.meta.items() if key != "repairs"}
    candidate = replace(graph, nodes=nodes, edges=tuple(edges), meta=meta)
    if cycle_policy == "repair":
        candidate, removed = repair_cycles(candidate)
        for edge in removed:
            found.append(warning("cycle_repaired", f"removed the cycle-closing edge {edge.label}", edge.label))
        if removed:
            candidate = candidate.with_meta(repairs=[edge.to_dict(graph.attribute_fields) for edge in removed])
    found.extend(candidate.validate(cycle_policy))
    if available_tools is not None:
        tools = set(available_tools)
        for node in candidate.nodes.values():
            if node.type == "ACTION" and node.id not in tools:
                message = f"ACTION node {node.id!r} is not in the available tools"
                found.append(warning("unknown_action", message, node.id))
    if errors_in(found):
        return None, found
    return candidate, found


def unified_diff(
    before: Graph,
    after: Graph,
    *,
    context: int = 3,
    fromfile: str | None = None,
    tofile: str | None = None,
) -> str:
    """A unified diff of the two graphs' graph.md renderings; empty text when they render the same."""
    lines = difflib.unified_diff(
        to_markdown(before).splitlines(keepends=True),
        to_markdown(after).splitlines(keepends=True),
        fromfile=fromfile or f"graph {before.digest[:12]}",
        tofile=tofile or f"graph {after.digest[:12]}",
        n=context,
    )
    return "".join(lines)
