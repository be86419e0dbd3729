"""Structural validation (spec §3): diagnostics, terminal reachability, and deterministic cycle repair."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from .diagnostics import Diagnostic, error, warning
from .graph import END, START, Edge, check_cycle_policy

if TYPE_CHECKING:
    from .graph import Graph

_WHITE, _GREY, _BLACK = 0, 1, 2


def validate_graph(graph: Graph, *, cycle_policy: str = "repair") -> list[Diagnostic]:
    """Every check of spec §3 in a fixed order: sentinels, nodes, edges, terminal paths, reachability from Start.

    Cycles themselves are never a diagnostic here: under `repair` they are removed by prepare_candidate before
    validation, and under `allow` they are legal as long as every node still reaches a terminal.
    """
    check_cycle_policy(cycle_policy)
    found: list[Diagnostic] = []
    for sentinel in (START, END):
        if sentinel not in graph.nodes:
            found.append(error("missing_sentinel", f"the graph has no {sentinel} node", sentinel))
    allowed_types = set(graph.node_types)
    for node in graph.nodes.values():
        if not node.id.strip():
            found.append(error("malformed_edit", "a node has an empty id", node.id))
        if node.type not in allowed_types:
            allowed = ", ".join(graph.node_types) or "(none)"
            found.append(
                error("unknown_node_type", f"node {node.id!r} has type {node.type!r}; allowed: {allowed}", node.id)
            )
    found.extend(_edge_diagnostics(graph))
    for node_id in nodes_without_terminal_path(graph):
        message = f"node {node_id!r} has no directed path to a terminal (zero out-degree) node"
        found.append(error("no_path_to_terminal", message, node_id))
    if START in graph.nodes:
        reachable = graph.reachable_from(START)
        for node_id in graph.nodes:
            if node_id not in reachable:
                found.append(
                    warning("unreachable_from_start", f"node {node_id!r} is not reachable from Start", node_id)
                )
    return found


def _edge_diagnostics(graph: Graph) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    relations = set(graph.relations)
    fields = set(graph.attribute_fields)
    seen: set[tuple[str, str, str]] = set()
    for edge in graph.edges:
        label = edge.label
        for endpoint in dict.fromkeys((edge.source, edge.target)):
            if endpoint not in graph.nodes:
                message = f"edge {label} references the missing node {endpoint!r}"
                found.append(error("missing_endpoint", message, label))
        if edge.relation not in relations:
            allowed = ", ".join(graph.relations) or "(none)"
            message = f"edge {label} uses relation {edge.relation!r}; allowed: {allowed}"
            found.append(error("unknown_relation", message, label))
        if edge.key in seen:
            found.append(error("duplicate_edge", f"edge {label} appears more than once", label))
        seen.add(edge.key)
        extra = [name for name in edge.attributes if name not in fields]
        if extra:
            message = f"edge {label} carries attributes outside the schema: {', '.join(extra)}"
            found.append(warning("unknown_attribute", message, label))
    return found


def nodes_without_terminal_path(graph: Graph) -> list[str]:
    """Nodes with no directed path to a zero-out-degree node, in sorted id order.

    A reverse breadth-first search from every terminal along predecessor edges. An edge to a missing node keeps
    its source from being a terminal and leads nowhere, so it never helps; a cycle with no exit fails.
    """
    terminals = graph.terminals()
    can_finish = set(terminals)
    queue = deque(terminals)
    while queue:
        for edge in graph.predecessors(queue.popleft()):
            if edge.source in graph.nodes and edge.source not in can_finish:
                can_finish.add(edge.source)
                queue.append(edge.source)
    return [node_id for node_id in graph.nodes if node_id not in can_finish]


def find_back_edges(graph: Graph) -> list[Edge]:
    """The back edges of a depth-first search that visits roots in sorted id order and successors in edge order.

    Iterative, so a long chain cannot exhaust the interpreter's recursion limit; the visiting order is exactly that
    of the recursive search. A self-loop is a back edge.
    """
    colour: dict[str, int] = {}
    back: list[Edge] = []
    for root in graph.nodes:
        if colour.get(root, _WHITE) != _WHITE:
            continue
        colour[root] = _GREY
        stack = [(root, iter(graph.successors(root)))]
        while stack:
            node_id, pending = stack[-1]
            for edge in pending:
                state = colour.get(edge.target, _WHITE)
                if state == _GREY:
                    back.append(edge)
                elif state == _WHITE and edge.target in graph.nodes:
                    colour[edge.target] = _GREY
                    stack.append((edge.target, iter(graph.successors(edge.target))))
                    break
            else:
                colour[node_id] = _BLACK
                stack.pop()
    return back


def repair_cycles(graph: Graph) -> tuple[Graph, list[Edge]]:
    """Remove back edges until no cycle remains (at most edges + 1 passes); returns the graph and removed edges."""
    removed: list[Edge] = []
    current = graph
    for _ in range(len(graph.edges) + 1):
        back = find_back_edges(current)
        if not back:
            break
        removed.extend(back)
        dropped = {id(edge) for edge in back}
        current = current.with_edges(edge for edge in current.edges if id(edge) not in dropped)
    return current, removed
