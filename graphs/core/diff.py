"""The structural difference of two graphs (pure): nodes and edges added, removed and changed, and a Mermaid drawing
of the new graph with those changes marked.

Nodes are matched by id; edges by their triple (source, relation, target). A node changes when its type,
description, ref or meta differ; an edge changes when its attributes differ (an attribute absent on one side reads
as null). Every list is sorted (nodes by id, edges by triple), so the result never depends on build order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .graph import Edge, Graph, Node
from .serialize import _mermaid_label, _mermaid_relation

ADDED = "added"
REMOVED = "removed"
CHANGED = "changed"

NODE_FIELDS: tuple[str, ...] = ("type", "description", "ref", "meta")


@dataclass(frozen=True)
class FieldChange:
    name: str
    before: Any
    after: Any


@dataclass(frozen=True)
class NodeChange:
    id: str
    change: str  # added, removed, changed
    before: Node | None
    after: Node | None
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True)
class EdgeChange:
    key: tuple[str, str, str]
    change: str
    before: Edge | None
    after: Edge | None
    fields: tuple[FieldChange, ...] = ()

    @property
    def source(self) -> str:
        return self.key[0]

    @property
    def relation(self) -> str:
        return self.key[1]

    @property
    def target(self) -> str:
        return self.key[2]


@dataclass(frozen=True)
class GraphDiff:
    nodes: tuple[NodeChange, ...]
    edges: tuple[EdgeChange, ...]

    @property
    def empty(self) -> bool:
        return not self.nodes and not self.edges

    def nodes_with(self, change: str) -> tuple[NodeChange, ...]:
        return tuple(node for node in self.nodes if node.change == change)

    def edges_with(self, change: str) -> tuple[EdgeChange, ...]:
        return tuple(edge for edge in self.edges if edge.change == change)

    def counts(self) -> dict[str, int]:
        counts = {}
        for what, items in (("nodes", self.nodes), ("edges", self.edges)):
            for change in (ADDED, REMOVED, CHANGED):
                counts[f"{what}_{change}"] = sum(1 for item in items if item.change == change)
        return counts


def _node_value(node: Node, name: str) -> Any:
    value = getattr(node, name)
    return dict(value) if name == "meta" else value


def _node_fields(before: Node, after: Node) -> tuple[FieldChange, ...]:
    changes = []
    for name in NODE_FIELDS:
        old, new = _node_value(before, name), _node_value(after, name)
        if old != new:
            changes.append(FieldChange(name, old, new))
    return tuple(changes)


def _edge_fields(before: Edge, after: Edge) -> tuple[FieldChange, ...]:
    names = sorted(set(before.attributes) | set(after.attributes))
    return tuple(
        FieldChange(name, before.attributes.get(name), after.attributes.get(name))
        for name in names
        if before.attributes.get(name) != after.attributes.get(name)
    )


def graph_diff(old: Graph | None, new: Graph) -> GraphDiff:
    """What changes from `old` (None: nothing before, every node and edge is added) to `new`."""
    old_nodes = dict(old.nodes) if old is not None else {}
    new_nodes = dict(new.nodes)
    nodes: list[NodeChange] = []
    for node_id in sorted(set(old_nodes) | set(new_nodes)):
        before, after = old_nodes.get(node_id), new_nodes.get(node_id)
        if before is None:
            nodes.append(NodeChange(node_id, ADDED, None, after))
        elif after is None:
            nodes.append(NodeChange(node_id, REMOVED, before, None))
        else:
            fields = _node_fields(before, after)
            if fields:
                nodes.append(NodeChange(node_id, CHANGED, before, after, fields))
    old_edges = {edge.key: edge for edge in (old.edges if old is not None else ())}
    new_edges = {edge.key: edge for edge in new.edges}
    edges: list[EdgeChange] = []
    for key in sorted(set(old_edges) | set(new_edges)):
        before, after = old_edges.get(key), new_edges.get(key)
        if before is None:
            edges.append(EdgeChange(key, ADDED, None, after))
        elif after is None:
            edges.append(EdgeChange(key, REMOVED, before, None))
        else:
            fields = _edge_fields(before, after)
            if fields:
                edges.append(EdgeChange(key, CHANGED, before, after, fields))
    return GraphDiff(nodes=tuple(nodes), edges=tuple(edges))


# Colours for the marks; the mark is also in the text (" (new)", dotted lines for removed edges), never colour only.
MERMAID_CLASSES: dict[str, str] = {
    ADDED: "fill:#e6f6ea,stroke:#1a7f37,stroke-width:3px,color:#0f5323",
    CHANGED: "fill:#fff4d6,stroke:#9a6700,stroke-width:3px,color:#5c3d00",
    REMOVED: "fill:#fdeaea,stroke:#cf222e,stroke-width:2px,stroke-dasharray:5 4,color:#8c1d13",
}
EDGE_STYLES: dict[str, str] = {
    ADDED: "stroke:#1a7f37,stroke-width:3px",
    CHANGED: "stroke:#9a6700,stroke-width:3px",
    REMOVED: "stroke:#cf222e,stroke-width:2px,stroke-dasharray:5 4",
}
NODE_MARKS: dict[str, str] = {ADDED: " (new)", CHANGED: " (changed)", REMOVED: " (removed)"}
EDGE_MARKS: dict[str, str] = {ADDED: "new ", CHANGED: "changed ", REMOVED: "removed "}


def to_mermaid_diff(old: Graph | None, new: Graph, diff: GraphDiff | None = None, *, direction: str = "TB") -> str:
    """The new graph plus what it removed, as a Mermaid flowchart: added, changed and removed nodes carry the
    classes `added`, `changed`, `removed` and a mark in their label; added and changed edges are drawn thick, removed
    edges dotted, each also marked in its label. Nodes are aliased n0, n1, … in sorted-id order with escaped, quoted
    labels (no id reaches Mermaid's syntax), as in `to_mermaid`."""
    if direction not in ("TB", "LR"):
        raise ValueError("direction is TB or LR")
    diff = diff if diff is not None else graph_diff(old, new)
    node_change = {node.id: node.change for node in diff.nodes}
    edge_change = {edge.key: edge.change for edge in diff.edges}
    removed_nodes = {node.id: node.before for node in diff.nodes if node.change == REMOVED}
    all_nodes: dict[str, Node] = {**removed_nodes, **dict(new.nodes)}
    aliases = {node_id: f"n{index}" for index, node_id in enumerate(sorted(all_nodes))}
    lines = [f"flowchart {direction}"]
    for node_id in sorted(all_nodes):
        node = all_nodes[node_id]
        opening, closing = ("([", "])") if node.type == "STATUS" else ("[", "]")
        label = _mermaid_label(node_id + NODE_MARKS.get(node_change.get(node_id, ""), ""))
        lines.append(f'    {aliases[node_id]}{opening}"{label}"{closing}')
    removed_edges = [edge.before for edge in diff.edges if edge.change == REMOVED]
    styles: list[str] = []
    drawn = 0  # Mermaid numbers links in the order they are drawn (linkStyle N)
    for edge in [*new.edges, *removed_edges]:
        change = edge_change.get(edge.key, "")
        source = aliases.get(edge.source)
        target = aliases.get(edge.target)
        if source is None or target is None:  # an edge to a missing node (invalid graph): not drawable
            continue
        relation = edge.relation if not change else f"{EDGE_MARKS[change]}{edge.relation}"
        arrow = {ADDED: "==>", CHANGED: "==>", REMOVED: "-.->"}.get(change, "-->")
        lines.append(f"    {source} {arrow}|{_mermaid_relation(relation)}| {target}")
        if change:
            styles.append(f"    linkStyle {drawn} {EDGE_STYLES[change]}")
        drawn += 1
    for change, style in MERMAID_CLASSES.items():
        lines.append(f"    classDef {change} {style}")
    for change in MERMAID_CLASSES:
        members = [aliases[node_id] for node_id in sorted(all_nodes) if node_change.get(node_id) == change]
        if members:
            lines.append(f"    class {','.join(members)} {change}")
    lines.extend(styles)
    return "\n".join(lines) + "\n"
