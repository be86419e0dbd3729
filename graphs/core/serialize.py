"""Text renderings of a graph: the guidance context (spec §7, Appendix), trajectories, graph.md, graph.mmd, graph.json.

`serialize_context` with `include_relations=False` reproduces the paper's App. B.5 layout byte for byte; relation
labels are on by default. Its cost follows the neighbourhood: it touches only the edges N_h(active) holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .graph import Edge, Graph

ARROW = "→"
TERMINAL_LINE = "- (none: this node has no outgoing transitions; it is a terminal node)"
NO_STEPS_LINE = "(no steps yet; the agent is at Start)"
ARGS_LIMIT = 200
_LABELS = {"guidance": "Guidance", "pitfalls": "Pitfalls to Avoid"}


def _label(name: str) -> str:
    return _LABELS.get(name) or name.replace("_", " ").strip().capitalize()


def _hop_header(hop: int) -> str:
    if hop == 1:
        return "Immediate Transition Options (Hop 1):"
    if hop == 2:
        return "Subsequent Horizon (Hop 2):"
    return f"Further Horizon (Hop {hop}):"


def render_transition(edge: Edge, attribute_fields: Sequence[str], *, include_relations: bool = True) -> list[str]:
    """One transition: `- Transition: [A] → [B] (REL; Condition: c)` and its indented attribute bullets."""
    condition = edge.condition if edge.condition is not None else "unconditional"
    inner = f"{edge.relation}; Condition: {condition}" if include_relations else f"Condition: {condition}"
    lines = [f"- Transition: [{edge.source}] {ARROW} [{edge.target}] ({inner})"]
    for name in attribute_fields:
        if name == "condition":
            continue
        value = edge.attributes.get(name)
        if name == "guidance":
            lines.append(f"  * Guidance: {value if value is not None else '(none)'}")
        elif value is not None:
            lines.append(f"  * {_label(name)}: {value}")
    for name, value in edge.attributes.items():
        if name not in attribute_fields and name != "condition" and value is not None:
            lines.append(f"  * {_label(name)}: {value}")
    return lines


def _transitions(edges: Iterable[Edge], graph: Graph, include_relations: bool) -> list[str]:
    lines: list[str] = []
    for edge in edges:
        lines.extend(render_transition(edge, graph.attribute_fields, include_relations=include_relations))
    return lines


def serialize_context(graph: Graph, active: str | None, hops: int = 2, include_relations: bool = True) -> str:
    """The local form around `active` (N_h), or the full form when `active` is None."""
    if active is None:
        return serialize_full(graph, include_relations=include_relations)
    node = graph.node(active)
    if node is None:
        raise KeyError(active)
    neighborhood = graph.neighborhood(active, hops)
    blocks = [f"Active Cognitive Node: [{node.id}] (Type: {node.type})\nDescription: {node.description}"]
    for hop in range(1, hops + 1):
        edges = neighborhood.edges_at(hop)
        if hop >= 2 and not edges:
            break
        body = _transitions(edges, graph, include_relations) if edges else [TERMINAL_LINE]
        blocks.append("\n".join([_hop_header(hop), *body]))
    return "\n\n".join(blocks)


def serialize_full(graph: Graph, include_relations: bool = True) -> str:
    """Every node and every transition: the fallback when localization fails, and the `*_full` modes."""
    header = f"Complete Procedural Graph: {len(graph.nodes)} nodes, {len(graph.edges)} transitions"
    nodes = ["Nodes:"]
    for node in graph.nodes.values():
        suffix = f": {node.description}" if node.description else ""
        nodes.append(f"- [{node.id}] (Type: {node.type}){suffix}")
    transitions = ["Transitions:", *(_transitions(graph.edges, graph, include_relations) or ["- (none)"])]
    return "\n\n".join([header, "\n".join(nodes), "\n".join(transitions)])


# -- trajectories ----------------------------------------------------------------------------------------------------


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_args(args: Any) -> str:
    """Step arguments as text: strings as they are, anything else as JSON; cut to 200 characters."""
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
    return _shorten(text, ARGS_LIMIT)


def _field(step: Any, name: str) -> Any:
    return step.get(name) if isinstance(step, dict) else getattr(step, name, None)


def render_step(step: Any) -> str:
    """`Action: name(args)` (args left out when None), then `Observation: …` when there is one."""
    action, args, observation = _field(step, "action"), _field(step, "args"), _field(step, "observation")
    head = f"Action: {action}" + (f"({render_args(args)})" if args is not None else "")
    return head + (f"\nObservation: {observation}" if observation else "")


def render_trajectory(steps: Sequence[Any], window: int | None = 3) -> str:
    """The last `window` steps numbered by absolute position (all steps when `window` is None)."""
    if not steps:
        return NO_STEPS_LINE
    total = len(steps)
    if window == 0:
        return f"({total} step(s) taken; the trajectory window is 0, so none are shown)"
    shown = list(steps) if window is None else list(steps)[-window:]
    omitted = total - len(shown)
    lines = [f"[... {omitted} earlier step(s) omitted ...]"] if omitted else []
    for number, step in enumerate(shown, start=omitted + 1):
        lines.append(f"Step {number}:\n{render_step(step)}")
    return "\n".join(lines)


# -- exports ---------------------------------------------------------------------------------------------------------


def to_markdown(graph: Graph, include_relations: bool = True) -> str:
    """graph.md: title, counts and vocabularies, the node list, and each node's 1-hop transitions in a fence."""
    lines = [
        "# Procedural Graph",
        "",
        f"{len(graph.nodes)} node(s), {len(graph.edges)} edge(s). Relations: {', '.join(graph.relations)}. "
        f"Attributes: {', '.join(graph.attribute_fields)}.",
        "",
        "## Nodes",
        "",
    ]
    for node in graph.nodes.values():
        ref = f" (ref: {node.ref})" if node.ref else ""
        lines.append(f"- `{node.id}` ({node.type}){ref}: {node.description}")
    lines += ["", "## Transitions by node", ""]
    for node_id in graph.nodes:
        lines += ["```", serialize_context(graph, node_id, 1, include_relations), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


_UNSAFE_ALIAS = re.compile(r"[^A-Za-z0-9_]")


def mermaid_aliases(graph: Graph) -> dict[str, str]:
    """Node id → n0, n1, … in sorted-id order."""
    return {node_id: f"n{index}" for index, node_id in enumerate(graph.nodes)}


_LABEL_SAFE = re.compile(r"[\w .,:/\-]")
_PLAIN_RELATION = re.compile(r"[A-Za-z0-9_]+")


def _mermaid_label(text: str) -> str:
    """Label text as Mermaid entity codes wherever it is not a letter, digit, space or `_.,:/-`: quotes, `%%{…}%%`
    directives, backticks (markdown strings), `<…>` markup, brackets and `#` all stay literal text in the drawing
    and can neither end the label nor become an element."""
    return "".join(ch if _LABEL_SAFE.fullmatch(ch) else ("#quot;" if ch == '"' else f"#{ord(ch)};") for ch in text)


def _mermaid_relation(relation: str) -> str:
    return relation if _PLAIN_RELATION.fullmatch(relation) else f'"{_mermaid_label(relation)}"'


def to_mermaid(graph: Graph) -> str:
    """graph.mmd: `flowchart LR`, STATUS nodes as stadiums, other nodes as boxes, `nA -->|REL| nB` edges. Nodes are
    defined by alias only (`n0`, `n1`, …) with the id as an escaped, quoted label: no id reaches Mermaid's syntax."""
    aliases = mermaid_aliases(graph)
    lines = ["flowchart LR"]
    for node_id, node in graph.nodes.items():
        opening, closing = ("([", "])") if node.type == "STATUS" else ("[", "]")
        lines.append(f'    {aliases[node_id]}{opening}"{_mermaid_label(node_id)}"{closing}')
    for edge in graph.edges:
        source = aliases.get(edge.source) or "missing_" + _UNSAFE_ALIAS.sub("_", edge.source)
        target = aliases.get(edge.target) or "missing_" + _UNSAFE_ALIAS.sub("_", edge.target)
        lines.append(f"    {source} -->|{_mermaid_relation(edge.relation)}| {target}")
    return "\n".join(lines) + "\n"


def to_graph_json(graph: Graph) -> str:
    """graph.json: the refiner shape, indented by 1, UTF-8 kept, with a final newline."""
    return json.dumps(graph.to_refiner_json(), indent=1, ensure_ascii=False) + "\n"
