"""graph_diff and to_mermaid_diff: the structural difference of two graphs and its drawing."""

from dataclasses import replace

from graphs.core import END, START, Graph, Node, skeleton
from graphs.core.diff import ADDED, CHANGED, REMOVED, graph_diff, to_mermaid_diff

from .builders import edge, five_node_graph, sentinels


def test_identical_graphs_have_no_difference():
    graph = five_node_graph()
    diff = graph_diff(graph, five_node_graph())
    assert diff.empty and diff.counts() == {
        f"{what}_{change}": 0 for what in ("nodes", "edges") for change in (ADDED, REMOVED, CHANGED)
    }


def test_nothing_before_means_everything_is_added():
    graph = five_node_graph()
    diff = graph_diff(None, graph)
    assert [n.id for n in diff.nodes_with(ADDED)] == sorted(graph.nodes)
    assert len(diff.edges_with(ADDED)) == len(graph.edges) and not diff.edges_with(REMOVED)


def test_nodes_and_edges_added_removed_and_changed():
    old = five_node_graph()
    nodes = dict(old.nodes)
    del nodes["answer"]
    nodes["read"] = replace(nodes["read"], description="Read two documents")
    nodes["verify"] = Node("verify", "REASONING", "Check the answer")
    edges = [e for e in old.edges if "answer" not in (e.source, e.target)]
    edges = [
        edge(e.source, e.target, e.relation, condition=e.condition, guidance="Read the top two hits")
        if (e.source, e.target) == ("search", "read")
        else e
        for e in edges
    ]
    edges += [edge("read", "verify"), edge("verify", END)]
    new = Graph(nodes=list(nodes.values()), edges=tuple(edges))

    diff = graph_diff(old, new)

    assert [n.id for n in diff.nodes_with(ADDED)] == ["verify"]
    assert [n.id for n in diff.nodes_with(REMOVED)] == ["answer"]
    (changed,) = diff.nodes_with(CHANGED)
    assert changed.id == "read" and [(f.name, f.before, f.after) for f in changed.fields] == [
        ("description", "Read a document", "Read two documents")
    ]
    assert [e.key for e in diff.edges_with(ADDED)] == [("read", "LEADS_TO", "verify"), ("verify", "LEADS_TO", END)]
    assert [e.key for e in diff.edges_with(REMOVED)] == [("answer", "LEADS_TO", END), ("read", "LEADS_TO", "answer")]
    (edge_change,) = diff.edges_with(CHANGED)
    assert edge_change.key == ("search", "LEADS_TO", "read")
    assert [(f.name, f.before, f.after) for f in edge_change.fields] == [
        ("guidance", "Read the top hit", "Read the top two hits")
    ]
    # unchanged nodes and edges are not listed at all (an unchanged line never reads like a deletion)
    assert START not in {n.id for n in diff.nodes} and ("read", "PROVIDES_INPUT_FOR", "search") not in {
        e.key for e in diff.edges
    }
    assert diff.counts()["nodes_added"] == 1 and diff.counts()["edges_removed"] == 2


def test_the_result_does_not_depend_on_build_order():
    old = skeleton()
    new = five_node_graph()
    shuffled = Graph(nodes=list(reversed(list(new.nodes.values()))), edges=tuple(reversed(new.edges)))
    assert graph_diff(old, new) == graph_diff(old, shuffled)


def test_the_drawing_marks_each_change_by_class_and_text():
    old = five_node_graph()
    nodes = [n for n in old.nodes.values() if n.id != "answer"] + [Node("verify", "ACTION", "Verify")]
    edges = [e for e in old.edges if "answer" not in (e.source, e.target)] + [
        edge("read", "verify"),
        edge("verify", END),
    ]
    new = Graph(nodes=nodes, edges=tuple(edges))
    text = to_mermaid_diff(old, new)
    assert text.startswith("flowchart TB\n")
    assert "classDef added" in text and "classDef removed" in text
    # the mark is text in the label (parentheses as Mermaid entity codes, drawn as "(new)")
    assert '"verify #40;new#41;"' in text and '"answer #40;removed#41;"' in text
    assert "-.->|removed LEADS_TO|" in text.replace('"', "")
    assert "==>|new LEADS_TO|" in text.replace('"', "")
    # every linkStyle index names a drawn link
    links = [line for line in text.splitlines() if "-->" in line or "==>" in line or "-.->" in line]
    for line in text.splitlines():
        if line.strip().startswith("linkStyle"):
            assert int(line.split()[1]) < len(links)
    # the removed node keeps its class, the added one too
    aliases = {line.split('"')[1]: line.split("[")[0].strip() for line in text.splitlines() if '["' in line}
    assert f"class {aliases['verify #40;new#41;']} added" in text


def test_labels_cannot_break_out_of_the_drawing():
    nodes = [*sentinels(), Node('x"]; click n0 call alert(1) %%', "ACTION", "odd")]
    new = Graph(nodes=nodes, edges=(edge(START, nodes[-1].id), edge(nodes[-1].id, END)))
    text = to_mermaid_diff(skeleton(), new)
    assert '"]; click' not in text and "%%" not in text
