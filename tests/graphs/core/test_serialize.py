import json

import pytest

from graphs.core import (
    END,
    START,
    Edge,
    Graph,
    Node,
    Step,
    mermaid_aliases,
    render_step,
    render_trajectory,
    serialize_context,
    serialize_full,
    skeleton,
    to_graph_json,
    to_markdown,
    to_mermaid,
)
from tests.graphs.core.builders import edge, five_node_graph, sentinels


def paper_graph():
    """A graph whose 2-hop context around `search` has one hop-1 and two hop-2 transitions."""
    nodes = [
        *sentinels(),
        Node("search", "ACTION", "Look up documents that mention the question's subject"),
        Node("read", "ACTION", "Open one document and read it in full"),
        Node("answer", "ACTION", "Give the final answer"),
    ]
    edges = (
        edge(START, "search", guidance="Search for the main entity"),
        edge(
            "search",
            "read",
            condition="the search returned at least one title",
            guidance="Read the most relevant title first",
            pitfalls="Answering from the titles alone",
        ),
        edge("read", "answer", guidance="Answer with the fact you read", pitfalls="Adding facts the document lacks"),
        edge("read", "search", "PROVIDES_INPUT_FOR", condition="the document names a second entity", guidance=None),
        edge("answer", END, guidance="Stop"),
    )
    return Graph(nodes=nodes, edges=edges)


PAPER_LAYOUT = "\n".join(
    [
        "Active Cognitive Node: [search] (Type: ACTION)",
        "Description: Look up documents that mention the question's subject",
        "",
        "Immediate Transition Options (Hop 1):",
        "- Transition: [search] → [read] (Condition: the search returned at least one title)",
        "  * Guidance: Read the most relevant title first",
        "  * Pitfalls to Avoid: Answering from the titles alone",
        "",
        "Subsequent Horizon (Hop 2):",
        "- Transition: [read] → [answer] (Condition: unconditional)",
        "  * Guidance: Answer with the fact you read",
        "  * Pitfalls to Avoid: Adding facts the document lacks",
        "- Transition: [read] → [search] (Condition: the document names a second entity)",
        "  * Guidance: (none)",
    ]
)


def test_the_paper_layout_is_reproduced_byte_for_byte():
    text = serialize_context(paper_graph(), "search", hops=2, include_relations=False)
    assert text.encode("utf-8") == PAPER_LAYOUT.encode("utf-8")
    assert not text.endswith("\n")
    assert "\u2192" in text


def test_relation_labels_are_on_by_default():
    text = serialize_context(paper_graph(), "search")
    assert text == (
        PAPER_LAYOUT.replace("(Condition: the search", "(LEADS_TO; Condition: the search")
        .replace("(Condition: unconditional)", "(LEADS_TO; Condition: unconditional)")
        .replace("(Condition: the document", "(PROVIDES_INPUT_FOR; Condition: the document")
    )


def test_a_terminal_node_gets_one_hop_1_line_and_no_further_hops():
    text = serialize_context(paper_graph(), END, hops=3)
    assert text == (
        "Active Cognitive Node: [End] (Type: STATUS)\n"
        "Description: Task end\n"
        "\n"
        "Immediate Transition Options (Hop 1):\n"
        "- (none: this node has no outgoing transitions; it is a terminal node)"
    )


def test_further_hops_get_their_own_header_and_output_stops_at_the_first_empty_hop():
    text = serialize_context(paper_graph(), START, hops=6, include_relations=False)
    headers = [line for line in text.splitlines() if line.endswith("):") and "Hop" in line]
    assert headers == [
        "Immediate Transition Options (Hop 1):",
        "Subsequent Horizon (Hop 2):",
        "Further Horizon (Hop 3):",
        "Further Horizon (Hop 4):",
    ]
    assert text.endswith("- Transition: [answer] → [End] (Condition: unconditional)\n  * Guidance: Stop")


def test_extra_schema_fields_and_stray_attributes_get_capitalized_labels():
    graph = Graph(
        nodes=sentinels(),
        edges=(Edge(START, "LEADS_TO", END, {"guidance": "go", "expected_cost": "one call", "tone": "calm"}),),
        attribute_fields=("condition", "guidance", "pitfalls", "expected_cost"),
    )
    assert serialize_context(graph, START, hops=1).splitlines()[-4:] == [
        "- Transition: [Start] → [End] (LEADS_TO; Condition: unconditional)",
        "  * Guidance: go",
        "  * Expected cost: one call",
        "  * Tone: calm",
    ]


def test_the_full_form_lists_nodes_and_transitions():
    text = serialize_full(five_node_graph(), include_relations=False)
    lines = text.split("\n")
    assert lines[:8] == [
        "Complete Procedural Graph: 5 nodes, 5 transitions",
        "",
        "Nodes:",
        "- [End] (Type: STATUS): Task end",
        "- [Start] (Type: STATUS): Task start",
        "- [answer] (Type: ACTION): Answer the question",
        "- [read] (Type: ACTION): Read a document",
        "- [search] (Type: ACTION): Search the corpus",
    ]
    assert lines[8:11] == ["", "Transitions:", "- Transition: [Start] → [search] (Condition: unconditional)"]
    assert serialize_context(five_node_graph(), None, include_relations=False) == text


def test_the_full_form_of_a_graph_without_edges_says_none():
    text = serialize_full(Graph(nodes=[*sentinels(), Node("bare", "REASONING")]))
    assert text.endswith("Transitions:\n- (none)")
    assert "- [bare] (Type: REASONING)\n" in text


def test_serializing_an_unknown_node_or_zero_hops_is_refused():
    with pytest.raises(KeyError):
        serialize_context(paper_graph(), "nowhere")
    with pytest.raises(ValueError):
        serialize_context(paper_graph(), "search", hops=0)


# -- trajectories -----------------------------------------------------------------------------------------------------


def test_a_step_renders_its_action_args_and_observation():
    assert render_step(Step("search", {"q": "Dara Quinn"}, "Dara Quinn, Galway")) == (
        'Action: search({"q": "Dara Quinn"})\nObservation: Dara Quinn, Galway'
    )
    assert render_step(Step("read", "Galway")) == "Action: read(Galway)"
    assert render_step(Step("Month_Start")) == "Action: Month_Start"
    assert render_step({"action": "answer", "args": ["Ireland"], "observation": ""}) == 'Action: answer(["Ireland"])'


def test_step_args_are_cut_to_200_characters():
    rendered = render_step(Step("write", "x" * 500))
    args = rendered[len("Action: write(") : -1]
    assert len(args) == 200 and args.endswith("...")
    assert render_step(Step("write", "y" * 200)) == f"Action: write({'y' * 200})"


def test_no_steps_means_the_agent_is_at_start():
    assert render_trajectory([], 3) == "(no steps yet; the agent is at Start)"


def test_window_zero_only_counts_the_steps():
    assert render_trajectory([Step("a"), Step("b")], 0) == (
        "(2 step(s) taken; the trajectory window is 0, so none are shown)"
    )


def test_the_window_keeps_the_last_steps_numbered_by_position():
    steps = [Step(f"s{i}", None, f"o{i}") for i in range(1, 6)]
    assert render_trajectory(steps, 2) == (
        "[... 3 earlier step(s) omitted ...]\n"
        "Step 4:\nAction: s4\nObservation: o4\nStep 5:\nAction: s5\nObservation: o5"
    )
    assert (
        render_trajectory(steps[:2], 3) == "Step 1:\nAction: s1\nObservation: o1\nStep 2:\nAction: s2\nObservation: o2"
    )
    assert render_trajectory(steps, None).startswith("Step 1:")


# -- exports ----------------------------------------------------------------------------------------------------------


def test_mermaid_uses_sorted_aliases_stadium_status_nodes_and_relation_labels():
    graph = five_node_graph()
    assert mermaid_aliases(graph) == {"End": "n0", "Start": "n1", "answer": "n2", "read": "n3", "search": "n4"}
    assert to_mermaid(graph) == (
        "flowchart LR\n"
        '    n0(["End"])\n'
        '    n1(["Start"])\n'
        '    n2["answer"]\n'
        '    n3["read"]\n'
        '    n4["search"]\n'
        "    n1 -->|LEADS_TO| n4\n"
        "    n2 -->|LEADS_TO| n0\n"
        "    n3 -->|LEADS_TO| n2\n"
        "    n3 -->|PROVIDES_INPUT_FOR| n4\n"
        "    n4 -->|LEADS_TO| n3\n"
    )


def test_mermaid_escapes_quotes_and_names_missing_endpoints():
    graph = Graph(nodes=[*sentinels(), Node('say "hi"', "ACTION")], edges=(edge(START, 'say "hi"'), edge("x y", END)))
    text = to_mermaid(graph)
    assert 'n2["say #quot;hi#quot;"]' in text
    assert "missing_x_y -->|LEADS_TO| n0" in text


def test_graph_json_is_the_refiner_shape_indented_by_one():
    text = to_graph_json(five_node_graph())
    assert json.loads(text) == five_node_graph().to_refiner_json()
    assert text.startswith('{\n "nodes": [\n  {\n   "id": "End",')
    assert text.endswith("}\n")
    assert Graph.from_human(json.loads(text))[0] == five_node_graph()


def test_graph_markdown_has_counts_nodes_and_one_hop_transitions_per_node():
    graph = five_node_graph().with_nodes(
        [
            Node(n.id, n.type, n.description, ref="skill://search" if n.id == "search" else None)
            for n in five_node_graph().nodes.values()
        ]
    )
    text = to_markdown(graph)
    lines = text.split("\n")
    assert lines[:6] == [
        "# Procedural Graph",
        "",
        "5 node(s), 5 edge(s). Relations: LEADS_TO, TRIGGERS, PROVIDES_INPUT_FOR, CONVERGES_TO. "
        "Attributes: condition, guidance, pitfalls.",
        "",
        "## Nodes",
        "",
    ]
    assert "- `search` (ACTION) (ref: skill://search): Search the corpus" in lines
    assert "## Transitions by node" in lines
    assert text.count("```") == 10
    assert "```\n" + serialize_context(graph, "read", 1) + "\n```" in text
    assert "Subsequent Horizon" not in text
    assert text.endswith("```\n")
    assert to_markdown(skeleton()).count("Active Cognitive Node") == 2
