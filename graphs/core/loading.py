"""Loading graphs: strict stored documents (`Graph.from_document`) and hand-written input (`Graph.from_human`)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .diagnostics import Diagnostic, GraphError, error, errors_in, warning, warnings_in
from .documents import SCHEMA_VERSION
from .graph import DEFAULT_RELATIONS, END, SENTINEL_DESCRIPTIONS, START, STRUCTURAL_EDGE_KEYS, Edge, Node

if TYPE_CHECKING:
    from .graph import Graph

_DOCUMENT_KEYS = frozenset({"schema", "nodes", "edges", "relations", "attribute_fields", "node_types", "meta"})
_NODE_KEYS = frozenset({"id", "type", "description", "ref", "meta"})
_VOCABULARIES = ("relations", "attribute_fields", "node_types")


def load_document(cls: type[Graph], document: Any) -> Graph:
    """A Graph from its stored document, refusing anything `to_document` would not have written."""
    if not isinstance(document, Mapping):
        raise GraphError([error("malformed_edit", "a graph document must be a JSON object", "document")])
    _check_schema(document)
    problems: list[Diagnostic] = []
    unknown = sorted(set(document) - _DOCUMENT_KEYS)
    if unknown:
        problems.append(error("malformed_edit", f"unknown document keys: {', '.join(unknown)}", "document"))
    vocabularies = {name: _stored_vocabulary(document, name, problems) for name in _VOCABULARIES}
    nodes = [
        node
        for position, raw in enumerate(_stored_list(document, "nodes", problems))
        if (node := _stored_node(raw, position, problems)) is not None
    ]
    edges = [
        edge
        for position, raw in enumerate(_stored_list(document, "edges", problems))
        if (edge := _stored_edge(raw, position, problems)) is not None
    ]
    meta = document.get("meta")
    if meta is not None and not isinstance(meta, Mapping):
        problems.append(error("malformed_edit", "meta must be an object or null", "meta"))
    if problems:
        raise GraphError(problems, "cannot load the graph document: " + "; ".join(str(d) for d in problems))
    try:
        return cls(nodes=nodes, edges=tuple(edges), meta=meta or {}, **vocabularies)
    except GraphError:
        raise
    except (TypeError, ValueError) as exc:
        raise GraphError([error("malformed_edit", str(exc), "document")]) from None


def _check_schema(document: Mapping[str, Any]) -> None:
    schema = document.get("schema", SCHEMA_VERSION)
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise GraphError([error("malformed_edit", f"schema must be a positive integer, not {schema!r}", "schema")])
    if schema > SCHEMA_VERSION:
        message = (
            f"the graph document has schema {schema}, but this version of Waymark reads up to schema "
            f"{SCHEMA_VERSION}; upgrade the package to load it"
        )
        raise GraphError([error("malformed_edit", message, "schema")], message)


def _stored_vocabulary(document: Mapping[str, Any], name: str, problems: list[Diagnostic]) -> tuple[str, ...] | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.append(error("malformed_edit", f"{name} must be a list of strings or null", name))
        return None
    return tuple(value)


def _stored_list(document: Mapping[str, Any], name: str, problems: list[Diagnostic]) -> list[Any]:
    value = document.get(name)
    if not isinstance(value, list):
        problems.append(error("malformed_edit", f"{name} must be a list", name))
        return []
    return value


def _stored_node(raw: Any, position: int, problems: list[Diagnostic]) -> Node | None:
    where = f"nodes[{position}]"
    if not isinstance(raw, Mapping):
        problems.append(error("malformed_edit", "a node must be an object", where))
        return None
    unknown = sorted(set(raw) - _NODE_KEYS)
    if unknown:
        problems.append(error("malformed_edit", f"unknown node keys: {', '.join(unknown)}", where))
    if not isinstance(raw.get("id"), str) or not isinstance(raw.get("type"), str):
        problems.append(error("malformed_edit", "a node needs a string id and type", where))
        return None
    description, ref, meta = raw.get("description"), raw.get("ref"), raw.get("meta")
    if not isinstance(description, str | None) or not isinstance(ref, str | None):
        problems.append(error("malformed_edit", "description and ref must be strings or null", where))
        return None
    if meta is not None and not isinstance(meta, Mapping):
        problems.append(error("malformed_edit", "node meta must be an object or null", where))
        return None
    return Node(raw["id"], raw["type"], description or "", ref, meta or {})


def _stored_edge(raw: Any, position: int, problems: list[Diagnostic]) -> Edge | None:
    where = f"edges[{position}]"
    if not isinstance(raw, Mapping):
        problems.append(error("malformed_edit", "an edge must be an object", where))
        return None
    if not all(isinstance(raw.get(key), str) for key in STRUCTURAL_EDGE_KEYS):
        problems.append(error("malformed_edit", "an edge needs string source, target and relation", where))
        return None
    attributes = {key: value for key, value in raw.items() if key not in STRUCTURAL_EDGE_KEYS}
    if not all(isinstance(value, str | None) for value in attributes.values()):
        problems.append(error("malformed_edit", "edge attributes must be strings or null", where))
        return None
    return Edge(raw["source"], raw["relation"], raw["target"], attributes)


# -- human input -----------------------------------------------------------------------------------------------------


def _read_human(value: Any) -> Mapping[str, Any]:
    if isinstance(value, str | os.PathLike):
        path = Path(value)
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise GraphError([error("malformed_edit", f"cannot read {path}: {exc}", str(path))]) from None
        except ValueError as exc:
            raise GraphError([error("malformed_edit", f"{path} is not valid JSON: {exc}", str(path))]) from None
    if not isinstance(value, Mapping):
        raise GraphError([error("malformed_edit", "a graph must be a JSON object with nodes and edges", "document")])
    return value


def _human_list(value: Mapping[str, Any], name: str) -> list[Any]:
    entries = value.get(name)
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise GraphError([error("malformed_edit", f"{name} must be a list", name)])
    return entries


def _human_vocabulary(value: Mapping[str, Any], name: str, override: Iterable[str] | None) -> Iterable[str] | None:
    stored = value.get(name)
    if stored is None:
        return override
    if not isinstance(stored, list) or not all(isinstance(item, str) for item in stored):
        raise GraphError([error("malformed_edit", f"{name} must be a list of strings", name)])
    return stored


def load_human(
    cls: type[Graph],
    value: Any,
    *,
    relations: Iterable[str] | None,
    attribute_fields: Iterable[str] | None,
    node_types: Iterable[str] | None,
) -> tuple[Graph, list[Diagnostic]]:
    value = _read_human(value)
    _check_schema(value)
    vocabulary = cls(
        relations=_human_vocabulary(value, "relations", relations),
        attribute_fields=_human_vocabulary(value, "attribute_fields", attribute_fields),
        node_types=_human_vocabulary(value, "node_types", node_types),
    )
    raw_nodes, raw_edges = _human_list(value, "nodes"), _human_list(value, "edges")
    problems: list[Diagnostic] = []
    nodes: dict[str, Node] = {}
    for position, raw in enumerate(raw_nodes):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str) or not raw["id"].strip():
            problems.append(
                error("malformed_edit", f"node entries need a non-empty string id: {raw!r}", f"nodes[{position}]")
            )
        elif raw["id"] in nodes:
            problems.append(error("duplicate_node", f"node {raw['id']!r} appears more than once", raw["id"]))
        else:
            meta = raw.get("meta") if isinstance(raw.get("meta"), Mapping) else {}
            nodes[raw["id"]] = Node(raw["id"], raw.get("type"), raw.get("description"), raw.get("ref"), meta)
    edges: list[Edge] = []
    for position, raw in enumerate(raw_edges):
        if not isinstance(raw, Mapping) or not all(isinstance(raw.get(k), str) for k in ("source", "target")):
            problems.append(
                error("malformed_edit", f"edge entries need source and target: {raw!r}", f"edges[{position}]")
            )
            continue
        attributes = {key: item for key, item in raw.items() if key not in STRUCTURAL_EDGE_KEYS}
        edges.append(Edge(raw["source"], raw.get("relation"), raw["target"], attributes))
    if problems:
        raise GraphError(problems, "cannot load the hand-written graph: " + "; ".join(str(d) for d in problems))

    notes: list[Diagnostic] = []
    quiet = not raw_nodes and not raw_edges
    for sentinel in (START, END):
        if sentinel not in nodes:
            nodes[sentinel] = Node(sentinel, "STATUS", SENTINEL_DESCRIPTIONS[sentinel])
            if not quiet:
                notes.append(warning("skeleton_completed", f"added the missing {sentinel} node", sentinel))
    if not edges and set(nodes) == {START, END}:
        relation = vocabulary.relations[0] if vocabulary.relations else DEFAULT_RELATIONS[0]
        edges.append(Edge(START, relation, END, {}))
        if not quiet:
            notes.append(warning("skeleton_completed", f"added the {START} → {END} edge", f"{START}→{END}"))
    meta = value.get("meta") if isinstance(value.get("meta"), Mapping) else {}
    graph = replace(vocabulary, nodes=nodes, edges=tuple(edges), meta=meta)
    found = graph.validate(cycle_policy="allow")
    failures = errors_in(found)
    if failures:
        message = "the hand-written graph fails the structural checks: " + "; ".join(str(d) for d in failures)
        raise GraphError(failures, message)
    return graph, notes + warnings_in(found)
