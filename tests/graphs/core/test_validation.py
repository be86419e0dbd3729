import itertools

import pytest

from graphs.core import (
    DIAGNOSTIC_CODES,
    END,
    START,
    Diagnostic,
    EditSet,
    Graph,
    Node,
    edit_set_from_dict,
    find_back_edges,
    no_action,
    nodes_without_terminal_path,
    parse_edit_set,
    prepare_candidate,
    repair_cycles,
)
from tests.graphs.core.builders import edge, five_node_graph, sentinels


def found(diagnostics, code):
    return [d for d in diagnostics if d.code == code]


def graph_of(*extra_nodes, edges):
    return Graph(nodes=[*sentinels(), *extra_nodes], edges=tuple(edges))


def test_a_diagnostic_renders_severity_code_subject_and_message():
    assert str(Diagnostic("missing_endpoint", "edge a -LEADS_TO-> b references b", "a -LEADS_TO-> b")) == (
        "error:missing_endpoint [a -LEADS_TO-> b]: edge a -LEADS_TO-> b references b"
    )
    assert str(Diagnostic("no_such_node", "no node 'x'", None, "warning")) == "warning:no_such_node: no node 'x'"
    with pytest.raises(ValueError):
        Diagnostic("x", "y", severity="fatal")
    assert Diagnostic.from_dict(Diagnostic("a", "b", "c", "warning").to_dict()) == Diagnostic("a", "b", "c", "warning")


def test_the_code_table_lists_every_code_of_the_spec_with_its_severity():
    assert DIAGNOSTIC_CODES == {
        "missing_sentinel": "error",
        "malformed_edit": "error",
        "unknown_node_type": "error",
        "missing_endpoint": "error",
        "unknown_relation": "error",
        "duplicate_edge": "error",
        "duplicate_node": "error",
        "reserved_node": "error",
        "no_path_to_terminal": "error",
        "unreachable_from_start": "warning",
        "unknown_attribute": "warning",
        "missing_guidance": "warning",
        "cycle_repaired": "warning",
        "unknown_action": "warning",
        "no_such_edge": "warning",
        "no_such_node": "warning",
        "skeleton_completed": "warning",
        "no_action": "error",
    }


# -- every code, raised where the spec raises it ----------------------------------------------------------------------

BAD_GRAPHS = {
    "missing_sentinel": lambda: Graph(nodes=[Node(START, "STATUS")], edges=()),
    "malformed_edit": lambda: graph_of(Node(" ", "ACTION"), edges=[edge(START, " "), edge(" ", END)]),
    "unknown_node_type": lambda: graph_of(Node("a", "TOOL"), edges=[edge(START, "a"), edge("a", END)]),
    "missing_endpoint": lambda: graph_of(edges=[edge(START, END), edge(START, "ghost")]),
    "unknown_relation": lambda: graph_of(edges=[edge(START, END, "JUMPS_TO")]),
    "duplicate_edge": lambda: graph_of(edges=[edge(START, END), edge(START, END, guidance="again")]),
    "no_path_to_terminal": lambda: graph_of(
        Node("a", "ACTION"), Node("b", "ACTION"), edges=[edge(START, "a"), edge("a", "b"), edge("b", "a")]
    ),
}


@pytest.mark.parametrize("code", sorted(BAD_GRAPHS))
def test_validate_reports_each_structural_error(code):
    diagnostics = found(BAD_GRAPHS[code]().validate(), code)
    assert diagnostics
    assert {d.severity for d in diagnostics} == {"error"}


def test_validate_warns_about_nodes_unreachable_from_start_and_unknown_attributes():
    graph = graph_of(Node("island", "REASONING"), edges=[edge(START, END), edge("island", END, tone="dry")])
    diagnostics = graph.validate()
    assert [(d.code, d.severity, d.subject) for d in diagnostics] == [
        ("unknown_attribute", "warning", "island -LEADS_TO-> End"),
        ("unreachable_from_start", "warning", "island"),
    ]


def test_a_missing_endpoint_is_reported_once_per_bad_endpoint():
    graph = graph_of(edges=[edge(START, END), edge("ghost", "phantom"), edge("spirit", "spirit")])
    assert [d.message.rsplit(" ", 1)[-1] for d in found(graph.validate(), "missing_endpoint")] == [
        "'ghost'",
        "'phantom'",
        "'spirit'",
    ]


def test_a_valid_graph_has_no_diagnostics():
    assert five_node_graph().validate() == []
    assert five_node_graph().is_valid()


def test_edit_and_candidate_codes_carry_their_severities():
    graph = five_node_graph()
    _, diagnostics = prepare_candidate(
        graph,
        EditSet(
            delete_nodes=("ghost", START),
            add_nodes=(Node("search", "ACTION"),),
            delete_edges=(("answer", "search"),),
            add_edges=(edge("search", "read"),),
        ),
    )
    assert [(d.code, d.severity) for d in diagnostics] == [
        ("no_such_edge", "warning"),
        ("no_such_node", "warning"),
        ("reserved_node", "error"),
        ("duplicate_node", "error"),
        ("duplicate_edge", "error"),
    ]
    candidate, diagnostics = prepare_candidate(
        graph,
        EditSet(
            add_nodes=(Node("verify", "ACTION"),),
            add_edges=(edge("answer", "verify", guidance=None), edge("verify", END, guidance=" ")),
        ),
        available_tools=["search", "read", "answer"],
    )
    assert candidate is not None
    assert [(d.code, d.severity) for d in diagnostics] == [
        ("missing_guidance", "warning"),
        ("missing_guidance", "warning"),
        ("cycle_repaired", "warning"),
        ("unknown_action", "warning"),
    ]
    _, diagnostics = parse_edit_set('{"add_nodes": [], "comment": "x"}')
    assert [(d.code, d.severity) for d in diagnostics] == [("malformed_edit", "warning")]
    _, diagnostics = parse_edit_set("no json here")
    assert [(d.code, d.severity) for d in diagnostics] == [("malformed_edit", "error")]
    assert (no_action().code, no_action().severity) == ("no_action", "error")
    _, human_warnings = Graph.from_human({"nodes": [{"id": "Start", "type": "STATUS"}]})
    assert [(d.code, d.severity) for d in human_warnings] == [("skeleton_completed", "warning")] * 2


def test_an_edit_set_can_be_built_from_a_decoded_object():
    edits, diagnostics = edit_set_from_dict({"delete_nodes": ["read"]})
    assert edits == EditSet(delete_nodes=("read",)) and diagnostics == []
    assert EditSet.from_dict({"delete_nodes": [1]})[0] is None


# -- terminal reachability --------------------------------------------------------------------------------------------


def test_any_zero_out_degree_node_is_a_terminal_not_only_end():
    graph = graph_of(Node("give_up", "STATUS"), edges=[edge(START, END), edge(START, "give_up")])
    assert nodes_without_terminal_path(graph) == []
    assert graph.terminals() == [END, "give_up"]


def test_an_edge_to_a_missing_node_does_not_reach_a_terminal():
    graph = graph_of(Node("a", "ACTION"), edges=[edge(START, END), edge(START, "a"), edge("a", "ghost")])
    assert nodes_without_terminal_path(graph) == ["a"]
    assert [d.subject for d in found(graph.validate(), "no_path_to_terminal")] == ["a"]


def test_nodes_in_a_cycle_without_an_exit_fail_and_those_with_an_exit_pass():
    stuck = graph_of(
        Node("a", "ACTION"),
        Node("b", "ACTION"),
        edges=[edge(START, END), edge(START, "a"), edge("a", "b"), edge("b", "a")],
    )
    assert nodes_without_terminal_path(stuck) == ["a", "b"]
    escaping = stuck.with_edges([*stuck.edges, edge("b", END)])
    assert nodes_without_terminal_path(escaping) == []


# -- cycle policies ---------------------------------------------------------------------------------------------------


def cyclic_graph():
    """Start → a → b → c → a, c → End, plus a self-loop on b."""
    nodes = [Node(x, "ACTION") for x in "abc"]
    return graph_of(
        *nodes, edges=[edge(START, "a"), edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", END), edge("b", "b")]
    )


def test_the_depth_first_search_finds_back_edges_in_sorted_order():
    back = find_back_edges(cyclic_graph())
    assert [(e.source, e.target) for e in back] == [("b", "b"), ("c", "a")]


def test_cycle_repair_removes_back_edges_and_records_them():
    repaired, removed = repair_cycles(cyclic_graph())
    assert [(e.source, e.target) for e in removed] == [("b", "b"), ("c", "a")]
    assert find_back_edges(repaired) == []
    assert len(repaired.edges) == 4


def test_cycle_repair_is_deterministic_whatever_the_construction_order():
    graph = cyclic_graph()
    shuffled = Graph(nodes=list(reversed(graph.nodes.values())), edges=tuple(reversed(graph.edges)))
    first, _ = repair_cycles(graph)
    second, _ = repair_cycles(shuffled)
    assert first.digest == second.digest


def test_prepare_candidate_repairs_cycles_into_meta_repairs():
    base = cyclic_graph().with_meta(repairs=["stale"], origin="seed")
    candidate, diagnostics = prepare_candidate(base, EditSet(delete_nodes=("nothing",)))
    assert candidate is not None
    assert [d.subject for d in found(diagnostics, "cycle_repaired")] == ["b -LEADS_TO-> b", "c -LEADS_TO-> a"]
    assert candidate.meta["origin"] == "seed"
    assert [(r["source"], r["target"], r["relation"]) for r in candidate.meta["repairs"]] == [
        ("b", "b", "LEADS_TO"),
        ("c", "a", "LEADS_TO"),
    ]
    assert set(candidate.meta["repairs"][0]) == {"source", "target", "relation", "condition", "guidance", "pitfalls"}


def test_a_candidate_without_repair_drops_inherited_repairs():
    base = five_node_graph().with_meta(repairs=[{"source": "x"}])
    candidate, _ = prepare_candidate(base, EditSet(delete_nodes=("ghost",)), cycle_policy="allow")
    assert "repairs" not in candidate.meta
    candidate, _ = prepare_candidate(skeleton_with_repairs(), EditSet(delete_nodes=("ghost",)))
    assert "repairs" not in candidate.meta


def skeleton_with_repairs():
    return graph_of(edges=[edge(START, END)]).with_meta(repairs=[1])


def test_allow_keeps_cycles_but_still_needs_an_exit():
    candidate, diagnostics = prepare_candidate(cyclic_graph(), EditSet(delete_nodes=("ghost",)), cycle_policy="allow")
    assert candidate is not None and len(candidate.edges) == 6
    assert not found(diagnostics, "cycle_repaired")
    candidate, diagnostics = prepare_candidate(
        cyclic_graph(), EditSet(delete_edges=(("c", END),)), cycle_policy="allow"
    )
    assert candidate is None
    assert [d.subject for d in found(diagnostics, "no_path_to_terminal")] == [START, "a", "b", "c"]


def test_repair_can_rescue_a_cycle_without_an_exit():
    candidate, diagnostics = prepare_candidate(cyclic_graph(), EditSet(delete_edges=(("c", END),)))
    assert candidate is not None
    assert len(found(diagnostics, "cycle_repaired")) == 2


@pytest.mark.parametrize("policy", ["forbid", "", None])
def test_an_unknown_cycle_policy_is_refused(policy):
    with pytest.raises(ValueError):
        five_node_graph().validate(policy)
    with pytest.raises(ValueError):
        prepare_candidate(five_node_graph(), EditSet(), cycle_policy=policy)


def test_the_five_node_graph_loses_read_to_search_under_repair_only():
    candidate, diagnostics = prepare_candidate(five_node_graph(), EditSet(delete_nodes=("ghost",)))
    assert [(e.source, e.target) for e in candidate.edges if e.relation == "PROVIDES_INPUT_FOR"] == []
    assert len(found(diagnostics, "cycle_repaired")) == 1
    kept, _ = prepare_candidate(five_node_graph(), EditSet(delete_nodes=("ghost",)), cycle_policy="allow")
    assert kept.edges == five_node_graph().edges


def test_a_long_chain_does_not_exhaust_the_recursion_limit():
    nodes = [Node(f"n{i:05d}", "ACTION") for i in range(5000)]
    ids = [START, *(n.id for n in nodes), END]
    edges = [edge(a, b) for a, b in itertools.pairwise(ids)] + [edge(ids[-2], ids[1])]
    graph = graph_of(*nodes, edges=edges)
    repaired, removed = repair_cycles(graph)
    assert [(e.source, e.target) for e in removed] == [(ids[-2], ids[1])]
    assert repaired.validate() == []
