"""Graphs the core tests share, built through the public API."""

import itertools

from graphs.core import END, START, Edge, Graph, Node

QA_TOOLS = ("search", "read", "answer")


def edge(source, target, relation="LEADS_TO", *, condition=None, guidance="go on", pitfalls=None, **extra):
    return Edge(source, relation, target, {"condition": condition, "guidance": guidance, "pitfalls": pitfalls, **extra})


def sentinels():
    return [Node(START, "STATUS", "Task start"), Node(END, "STATUS", "Task end")]


def five_node_graph() -> Graph:
    """Spec §10's question-answering graph: Start→search→read→answer→End plus read→search PROVIDES_INPUT_FOR."""
    nodes = [
        *sentinels(),
        Node("search", "ACTION", "Search the corpus"),
        Node("read", "ACTION", "Read a document"),
        Node("answer", "ACTION", "Answer the question"),
    ]
    edges = [
        edge(START, "search", guidance="Search for the question's subject"),
        edge("search", "read", condition="search returned at least one document", guidance="Read the top hit"),
        edge("read", "answer", guidance="Answer with the document's fact"),
        edge("answer", END, guidance="Stop"),
        edge(
            "read",
            "search",
            "PROVIDES_INPUT_FOR",
            condition="the document names a bridge entity",
            guidance="Search the bridge entity",
        ),
    ]
    return Graph(nodes=nodes, edges=tuple(edges))


def chain_graph(length: int) -> Graph:
    """Start → s0 → s1 → … → End, each step also able to jump straight to End."""
    ids = [f"s{i}" for i in range(length)]
    nodes = [*sentinels(), *(Node(node_id, "ACTION", f"step {node_id}") for node_id in ids)]
    path = [START, *ids, END]
    edges = [edge(a, b) for a, b in itertools.pairwise(path)]
    edges += [edge(node_id, END, "CONVERGES_TO") for node_id in ids]
    return Graph(nodes=nodes, edges=tuple(edges))
