import json

import pytest

from graphs.core import END, START, Edge, EditSet, Node, parse_edit_set, prepare_candidate, skeleton, unified_diff
from tests.graphs.core.builders import QA_TOOLS, edge, five_node_graph

ROUND_1_BUILD = {
    "add_nodes": [
        {"id": "search", "type": "ACTION", "description": "Search the corpus"},
        {"id": "read", "type": "ACTION", "description": "Read a document"},
        {"id": "answer", "type": "ACTION", "description": "Answer the question"},
    ],
    "delete_nodes": [],
    "add_edges": [
        {"source": "Start", "target": "search", "relation": "LEADS_TO", "condition": None, "guidance": "Search"},
        {
            "source": "search",
            "target": "read",
            "relation": "LEADS_TO",
            "condition": "search returned at least one document",
            "guidance": "Read the top hit",
            "pitfalls": "Answering from titles alone",
        },
        {"source": "read", "target": "answer", "relation": "LEADS_TO", "guidance": "Answer"},
        {"source": "answer", "target": "End", "relation": "LEADS_TO", "guidance": "Stop"},
        {"source": "read", "target": "search", "relation": "PROVIDES_INPUT_FOR", "guidance": "Search the bridge"},
    ],
    "delete_edges": [{"source": "Start", "target": "End"}],
}


def codes(diagnostics):
    return [d.code for d in diagnostics]


# -- parsing ----------------------------------------------------------------------------------------------------------


def test_it_parses_a_bare_json_reply():
    edits, diagnostics = parse_edit_set(json.dumps(ROUND_1_BUILD))
    assert diagnostics == []
    assert [n.id for n in edits.add_nodes] == ["search", "read", "answer"]
    assert edits.delete_edges == ((START, END),)
    assert edits.add_edges[1].condition == "search returned at least one document"
    assert edits.counts() == {"add_nodes": 3, "delete_nodes": 0, "add_edges": 5, "delete_edges": 1}


def test_it_tolerates_prose_and_code_fences():
    reply = f"Here is my proposal {{with braces}}.\n```json\n{json.dumps(ROUND_1_BUILD, indent=2)}\n```\nThanks!"
    edits, diagnostics = parse_edit_set(reply)
    assert diagnostics == [] and len(edits.add_edges) == 5
    prose_only = "I suggest the following edit: " + json.dumps({"delete_nodes": ["read"]}) + " and nothing more."
    assert parse_edit_set(prose_only)[0].delete_nodes == ("read",)


def test_it_looks_inside_fences_before_the_surrounding_text():
    reply = 'Earlier idea: {"delete_nodes": ["search"]}\n```\n{"delete_nodes": ["read"]}\n```'
    edits, _ = parse_edit_set(reply)
    assert edits.delete_nodes == ("read",)


def test_it_accepts_a_reply_with_only_one_of_the_four_keys():
    edits, diagnostics = parse_edit_set('{"delete_edges": [["read", "search"]]}')
    assert diagnostics == []
    assert edits.delete_edges == (("read", "search"),)
    assert edits.add_nodes == () and edits.add_edges == () and edits.delete_nodes == ()


def test_an_unknown_extra_key_is_only_a_warning():
    edits, diagnostics = parse_edit_set('{"delete_nodes": ["read"], "rationale": "too slow"}')
    assert edits.delete_nodes == ("read",)
    assert [(d.code, d.severity, d.subject) for d in diagnostics] == [("malformed_edit", "warning", "rationale")]


def test_it_tolerates_id_objects_and_pairs_in_delete_entries():
    edits, diagnostics = parse_edit_set('{"delete_nodes": [{"id": "read"}], "delete_edges": [["a", "b"]]}')
    assert diagnostics == []
    assert edits.delete_nodes == ("read",) and edits.delete_edges == (("a", "b"),)


def test_an_empty_edit_set_parses_and_is_left_to_the_caller_as_no_action():
    edits, diagnostics = parse_edit_set('{"add_nodes": [], "delete_nodes": [], "add_edges": [], "delete_edges": []}')
    assert diagnostics == []
    assert edits.is_empty
    assert not parse_edit_set('{"delete_nodes": ["x"]}')[0].is_empty


@pytest.mark.parametrize(
    ("reply", "subject"),
    [
        ("I would not change anything.", "reply"),
        ("```json\n{add_nodes: [}\n```", "reply"),
        ('{"delete_nodes": ["x"], "note": NaN}', "reply"),
        ('{"rationale": "nothing to add"}', "reply"),
        ('["add_nodes"]', "reply"),
        ('{"add_nodes": {"id": "x"}}', "add_nodes"),
        ('{"delete_nodes": "read"}', "delete_nodes"),
        ('{"add_nodes": [{"type": "ACTION"}]}', "add_nodes"),
        ('{"add_nodes": [{"id": "  ", "type": "ACTION"}]}', "add_nodes"),
        ('{"add_nodes": [{"id": "x"}]}', "x"),
        ('{"add_edges": [{"source": "a", "target": "b"}]}', "add_edges"),
        ('{"add_edges": [{"source": "a", "relation": "LEADS_TO"}]}', "add_edges"),
        ('{"add_edges": ["a->b"]}', "add_edges"),
        ('{"delete_edges": [{"source": "a"}]}', "delete_edges"),
        ('{"delete_edges": [["a", "b", "c"]]}', "delete_edges"),
        ('{"delete_nodes": [7]}', "delete_nodes"),
    ],
)
def test_each_malformed_reply_is_an_error(reply, subject):
    edits, diagnostics = parse_edit_set(reply)
    assert edits is None
    errors = [d for d in diagnostics if d.is_error]
    assert errors and {d.code for d in errors} == {"malformed_edit"}
    assert subject in {d.subject for d in errors}


def test_an_edit_set_round_trips_through_its_dict():
    edits, _ = parse_edit_set(json.dumps(ROUND_1_BUILD), ("condition", "guidance", "pitfalls"))
    again, diagnostics = parse_edit_set(json.dumps(edits.to_dict(("condition", "guidance", "pitfalls"))))
    assert diagnostics == [] and again == edits
    assert edits.to_dict()["delete_edges"] == [{"source": "Start", "target": "End"}]
    assert edits.summary() == "+3 node(s) −0 node(s) +5 edge(s) −1 edge(s)"


# -- prepare_candidate ------------------------------------------------------------------------------------------------


def test_round_one_builds_the_five_node_graph_from_the_skeleton():
    edits, _ = parse_edit_set(json.dumps(ROUND_1_BUILD))
    candidate, diagnostics = prepare_candidate(skeleton(), edits, cycle_policy="allow", available_tools=QA_TOOLS)
    assert diagnostics == []
    assert list(candidate.nodes) == ["End", "Start", "answer", "read", "search"]
    assert len(candidate.edges) == 5
    assert candidate.edges_between("read", "search")[0].relation == "PROVIDES_INPUT_FOR"


def test_delete_edges_removes_every_relation_between_the_pair_and_only_that_direction():
    graph = five_node_graph()
    graph = graph.with_edges([*graph.edges, edge("search", "read", "TRIGGERS"), edge("read", "search")])
    candidate, diagnostics = prepare_candidate(graph, EditSet(delete_edges=(("read", "search"),)), cycle_policy="allow")
    assert diagnostics == []
    assert candidate.edges_between("read", "search") == ()
    assert len(candidate.edges_between("search", "read")) == 2


def test_an_attribute_is_revised_by_deleting_and_re_adding_the_triple():
    graph = five_node_graph()
    edits = EditSet(
        delete_edges=(("search", "read"),),
        add_edges=(edge("search", "read", condition="two hits or more", guidance="Read the best hit"),),
    )
    candidate, diagnostics = prepare_candidate(graph, edits, cycle_policy="allow")
    assert diagnostics == []
    (revised,) = candidate.edges_between("search", "read")
    assert (revised.condition, revised.guidance) == ("two hits or more", "Read the best hit")
    assert graph.edges_between("search", "read")[0].guidance == "Read the top hit"


def test_adding_an_existing_triple_without_deleting_it_is_a_duplicate_edge():
    candidate, diagnostics = prepare_candidate(
        five_node_graph(), EditSet(add_edges=(Edge("search", "leads_to", "read", {"guidance": "again"}),))
    )
    assert candidate is None
    assert [(d.code, d.subject) for d in diagnostics] == [("duplicate_edge", "search -LEADS_TO-> read")]


def test_the_same_triple_added_twice_in_one_edit_set_is_a_duplicate_edge():
    edits = EditSet(add_edges=(edge("answer", "search"), edge("answer", "search", guidance="twice")))
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits, cycle_policy="allow")
    assert candidate is None and codes(diagnostics) == ["duplicate_edge"]


def test_adding_an_existing_node_is_a_duplicate_node_but_delete_then_add_is_legal():
    candidate, diagnostics = prepare_candidate(five_node_graph(), EditSet(add_nodes=(Node("read", "ACTION"),)))
    assert candidate is None and codes(diagnostics) == ["duplicate_node"]
    edits = EditSet(
        delete_nodes=("read",),
        add_nodes=(Node("read", "REASONING", "think it over"),),
        add_edges=(edge("search", "read"), edge("read", "answer")),
    )
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits)
    assert diagnostics == []
    assert candidate.nodes["read"].type == "REASONING"
    assert [e.key for e in candidate.successors("read")] == [("read", "LEADS_TO", "answer")]


@pytest.mark.parametrize("sentinel", [START, END])
def test_deleting_a_sentinel_is_a_reserved_node_error(sentinel):
    candidate, diagnostics = prepare_candidate(five_node_graph(), EditSet(delete_nodes=(sentinel,)))
    assert candidate is None
    assert [(d.code, d.severity, d.subject) for d in diagnostics] == [("reserved_node", "error", sentinel)]


def test_deleting_a_node_removes_its_incident_edges():
    edits = EditSet(delete_nodes=("read",), add_edges=(edge("search", "answer"),))
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits)
    assert diagnostics == []
    assert "read" not in candidate.nodes
    assert all("read" not in (e.source, e.target) for e in candidate.edges)


def test_deleting_what_is_not_there_only_warns():
    edits = EditSet(delete_nodes=("verify",), delete_edges=(("answer", "search"),))
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits, cycle_policy="allow")
    assert candidate == five_node_graph()
    assert [(d.code, d.severity, d.subject) for d in diagnostics] == [
        ("no_such_edge", "warning", "answer→search"),
        ("no_such_node", "warning", "verify"),
    ]


@pytest.mark.parametrize("guidance", [None, "", "   "])
def test_an_added_edge_without_guidance_warns(guidance):
    edits = EditSet(add_edges=(edge("search", END, "CONVERGES_TO", guidance=guidance),))
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits, cycle_policy="allow")
    assert candidate is not None
    assert [(d.code, d.severity) for d in diagnostics] == [("missing_guidance", "warning")]


def test_added_edges_are_filled_to_the_full_attribute_schema():
    edits = EditSet(add_edges=(Edge("search", "CONVERGES_TO", END, {"guidance": "give up"}),))
    candidate, _ = prepare_candidate(five_node_graph(), edits, cycle_policy="allow")
    (added,) = [e for e in candidate.edges if e.relation == "CONVERGES_TO"]
    assert dict(added.attributes) == {"condition": None, "guidance": "give up", "pitfalls": None}


def test_a_missing_endpoint_after_the_edits_fails_the_candidate():
    edits = EditSet(add_edges=(edge("answer", "verify_answer"),))
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits, cycle_policy="allow")
    assert candidate is None
    assert codes(diagnostics) == ["missing_endpoint"]


def test_unknown_actions_are_warnings_only_when_a_tool_list_is_given():
    edits = EditSet(add_nodes=(Node("browse", "action"),), add_edges=(edge("search", "browse"), edge("browse", END)))
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits, cycle_policy="allow", available_tools=QA_TOOLS)
    assert candidate is not None
    assert [(d.code, d.severity, d.subject) for d in diagnostics] == [("unknown_action", "warning", "browse")]
    _, diagnostics = prepare_candidate(five_node_graph(), edits, cycle_policy="allow")
    assert diagnostics == []


def test_an_unknown_type_or_relation_fails_the_candidate():
    edits = EditSet(add_nodes=(Node("x", "TOOL"),), add_edges=(edge("search", "x", "JUMPS"), edge("x", END)))
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits, cycle_policy="allow")
    assert candidate is None
    assert codes(diagnostics) == ["unknown_node_type", "unknown_relation"]


def test_an_empty_node_id_in_a_hand_built_edit_set_is_malformed():
    candidate, diagnostics = prepare_candidate(five_node_graph(), EditSet(add_nodes=(Node(" ", "ACTION"),)))
    assert candidate is None and codes(diagnostics) == ["malformed_edit"]


def test_prepare_candidate_leaves_the_base_graph_untouched():
    graph = five_node_graph()
    before = graph.digest
    prepare_candidate(graph, EditSet(delete_nodes=("read",), add_edges=(edge("search", "answer"),)))
    assert graph.digest == before == five_node_graph().digest


# -- unified diff -----------------------------------------------------------------------------------------------------


def test_the_unified_diff_compares_graph_markdown():
    before, after = skeleton(), five_node_graph()
    diff = unified_diff(before, after)
    lines = diff.splitlines()
    assert lines[0] == f"--- graph {before.digest[:12]}"
    assert lines[1] == f"+++ graph {after.digest[:12]}"
    assert "-2 node(s), 1 edge(s). Relations: LEADS_TO, TRIGGERS, PROVIDES_INPUT_FOR, CONVERGES_TO. " in diff
    assert "+- `search` (ACTION): Search the corpus" in lines
    assert unified_diff(after, five_node_graph()) == ""
    named = unified_diff(before, after, fromfile="#0 abc", tofile="#1 def", context=0)
    assert named.startswith("--- #0 abc\n+++ #1 def\n")


def test_edges_are_added_after_node_deletes_and_additions():
    edits = EditSet(
        delete_nodes=("answer",),
        add_nodes=(Node("reply", "ACTION", "Reply"),),
        add_edges=(edge("read", "reply"), edge("reply", END), edge("answer", END, "TRIGGERS")),
    )
    candidate, diagnostics = prepare_candidate(five_node_graph(), edits, cycle_policy="allow")
    assert candidate is None
    assert [(d.code, d.subject) for d in diagnostics] == [("missing_endpoint", "answer -TRIGGERS-> End")]
    candidate, diagnostics = prepare_candidate(
        five_node_graph(),
        EditSet(delete_nodes=edits.delete_nodes, add_nodes=edits.add_nodes, add_edges=edits.add_edges[:2]),
        cycle_policy="allow",
    )
    assert diagnostics == []
    assert [e.target for e in candidate.successors("read")] == ["reply", "search"]
