"""The built-in two-hop environment of spec §10: corpus, search rule, scripted solver, collector, evaluator, replies."""

import json

import pytest

from graphs.core import END, START, Graph, Step, parse_edit_set, prepare_candidate, skeleton, to_mermaid
from graphs.core.evaluation import Evaluation, Trace
from graphs.core.twohop import (
    CORPUS,
    ROUND_1_BUILD,
    ROUND_2_BROKEN,
    ROUND_3_DROP_SECOND_HOP,
    ROUND_4_DUPLICATE,
    SCRIPTED_REPLIES,
    TASK_DESCRIPTION,
    TOOLS,
    TRAIN_SET,
    UNKNOWN_ANSWER,
    VALIDATION_SET,
    TwoHopEnvironment,
    document,
    search,
    solve,
)


def apply(graph: Graph, reply: str):
    edits, parse_diagnostics = parse_edit_set(reply)
    assert edits is not None, parse_diagnostics
    return prepare_candidate(graph, edits, cycle_policy="allow", available_tools=TOOLS)


def built() -> Graph:
    graph, diagnostics = apply(skeleton(), ROUND_1_BUILD)
    assert graph is not None, diagnostics
    return graph


def dropped() -> Graph:
    graph, diagnostics = apply(built(), ROUND_3_DROP_SECOND_HOP)
    assert graph is not None, diagnostics
    return graph


def evaluate(graph: Graph) -> Evaluation:
    return TwoHopEnvironment().evaluate("ref", graph, iteration=0, purpose="baseline")


def passed(graph: Graph, items) -> list[str]:
    return [item.question for item in items if solve(graph, item.question).answer == item.answer]


# -- corpus and search -------------------------------------------------------------------------------------------------


def test_constants():
    assert TASK_DESCRIPTION == "two-hop question answering over a small corpus"
    assert TOOLS == ("search", "read", "answer")


def test_corpus_has_the_eight_documents_with_their_facts_and_bridges():
    table = [(doc.title, doc.fact, doc.bridge) for doc in CORPUS]
    assert table == [
        ("Alice Martin", "Alice Martin is a painter", "Lyon"),
        ("Lyon", "France", None),
        ("Bram Okafor", "Bram Okafor founded Okafor Motors", "Kumasi"),
        ("Kumasi", "Ghana", None),
        ("Chen Wei", "Chen Wei composed Silver River", None),
        ("Dara Quinn", "Dara Quinn is a marathon runner", "Galway"),
        ("Galway", "Ireland", None),
        ("Eli Sato", "Eli Sato wrote Paper Lanterns", None),
    ]
    assert all(doc.text for doc in CORPUS)
    assert document("Galway").fact == "Ireland"
    with pytest.raises(KeyError):
        document("Paris")


@pytest.mark.parametrize(
    ("query", "titles"),
    [
        ("Who is Alice Martin?", ["Alice Martin"]),
        ("Which country is Bram Okafor's company based in?", ["Bram Okafor"]),
        ("Where is Dara Quinn's home city?", ["Dara Quinn"]),
        ("okafor's", ["Bram Okafor"]),
        ("'Galway.'", ["Galway"]),
        ("LYON, KUMASI?", ["Lyon", "Kumasi"]),
        ("Martin and Sato", ["Alice Martin", "Eli Sato"]),  # corpus order, not query order
        ("Sato Martin", ["Alice Martin", "Eli Sato"]),
        ("What did Eli Sato write?", ["Eli Sato"]),
        ("Who painted the harbour?", []),  # only title words count
        ("'s ?.,", []),  # words that strip to nothing match nothing
        ("", []),
    ],
)
def test_search_rule(query, titles):
    assert search(query) == titles


def test_question_sets_match_the_tables():
    assert [(q.question, q.answer, q.hops) for q in TRAIN_SET] == [
        ("Who is Alice Martin?", "Alice Martin is a painter", 1),
        ("In which country was Alice Martin born?", "France", 2),
        ("What did Bram Okafor do?", "Bram Okafor founded Okafor Motors", 1),
        ("Which country is Bram Okafor's company based in?", "Ghana", 2),
    ]
    assert [(q.question, q.answer, q.hops) for q in VALIDATION_SET] == [
        ("What did Chen Wei compose?", "Chen Wei composed Silver River", 1),
        ("Which country is Dara Quinn from?", "Ireland", 2),
        ("What did Eli Sato write?", "Eli Sato wrote Paper Lanterns", 1),
        ("Where is Dara Quinn's home city?", "Ireland", 2),
    ]


# -- the scripted solver -----------------------------------------------------------------------------------------------


def test_skeleton_answers_at_once_from_the_full_graph():
    episode = solve(skeleton(), "Which country is Dara Quinn from?")
    assert episode.answer == "Dara Quinn is a marathon runner"
    assert [step.action for step in episode.steps] == ["search", "answer"]
    assert episode.steps[0] == Step("search", "Which country is Dara Quinn from?", "Dara Quinn")
    # Start is localized first; after the search, "search" is not a node, so the context is the full graph
    assert episode.nodes_visited == (START,)
    assert len(episode.guidance) == 2
    assert episode.guidance[1].startswith("Complete Procedural Graph: 2 nodes, 1 transitions")
    assert "→ [read]" not in episode.guidance[1]


def test_skeleton_scores_half_on_validation_and_two_of_four_on_training():
    evaluation = evaluate(skeleton())
    assert evaluation.score == 0.5
    assert passed(skeleton(), VALIDATION_SET) == ["What did Chen Wei compose?", "What did Eli Sato write?"]
    assert passed(skeleton(), TRAIN_SET) == ["Who is Alice Martin?", "What did Bram Okafor do?"]


def test_an_unmatched_question_is_answered_unknown():
    episode = solve(built(), "Who painted the harbour?")
    assert episode.answer == UNKNOWN_ANSWER
    assert [step.action for step in episode.steps] == ["search", "answer"]
    assert episode.steps[0].observation == "no documents found"


def test_built_graph_follows_the_second_hop():
    episode = solve(built(), "Where is Dara Quinn's home city?")
    assert episode.answer == "Ireland"
    assert [(step.action, step.args) for step in episode.steps] == [
        ("search", "Where is Dara Quinn's home city?"),
        ("read", "Dara Quinn"),
        ("search", "Galway"),
        ("read", "Galway"),
        ("answer", "Ireland"),
    ]
    assert episode.steps[3].observation == document("Galway").text
    assert episode.nodes_visited == (START, "search", "read", "search", "read")
    assert len(episode.guidance) == 5
    assert "[search] → [read]" in episode.guidance[1]
    assert "[read] → [search]" in episode.guidance[2]
    assert episode.text.splitlines()[0] == "Action: search(Where is Dara Quinn's home city?)"
    assert episode.text.splitlines()[-1] == "Action: answer(Ireland)"


def test_built_graph_answers_a_bridgeless_question_after_one_read():
    episode = solve(built(), "What did Chen Wei compose?")
    assert [step.action for step in episode.steps] == ["search", "read", "answer"]
    assert episode.answer == "Chen Wei composed Silver River"


# -- the scripted refiner replies --------------------------------------------------------------------------------------


def test_replies_are_json_in_the_edit_format():
    assert SCRIPTED_REPLIES == (ROUND_1_BUILD, ROUND_2_BROKEN, ROUND_3_DROP_SECOND_HOP, ROUND_4_DUPLICATE)
    for reply in SCRIPTED_REPLIES:
        assert set(json.loads(reply)) == {"add_nodes", "delete_nodes", "add_edges", "delete_edges"}
    build = json.loads(ROUND_1_BUILD)
    assert [(n["id"], n["type"]) for n in build["add_nodes"]] == [
        ("search", "ACTION"),
        ("read", "ACTION"),
        ("answer", "ACTION"),
    ]
    assert build["delete_edges"] == [{"source": START, "target": END}]
    assert all(edge["guidance"] for edge in build["add_edges"])
    assert any(edge["pitfalls"] for edge in build["add_edges"])
    search_read = next(e for e in build["add_edges"] if (e["source"], e["target"]) == ("search", "read"))
    assert search_read["condition"] == "search returned at least one document"
    assert json.loads(ROUND_3_DROP_SECOND_HOP)["delete_edges"] == [{"source": "read", "target": "search"}]
    assert ROUND_4_DUPLICATE == ROUND_3_DROP_SECOND_HOP


def test_round_1_builds_the_valid_five_node_graph_that_scores_one():
    graph, diagnostics = apply(skeleton(), ROUND_1_BUILD)
    assert diagnostics == []
    assert graph is not None and graph.validate("allow") == []
    assert list(graph.nodes) == [END, START, "answer", "read", "search"]
    assert [edge.key for edge in graph.edges] == [
        (START, "LEADS_TO", "search"),
        ("answer", "LEADS_TO", END),
        ("read", "LEADS_TO", "answer"),
        ("read", "PROVIDES_INPUT_FOR", "search"),
        ("search", "LEADS_TO", "read"),
    ]
    assert all(edge.guidance for edge in graph.edges)
    assert evaluate(graph).score == 1.0


def test_five_node_graph_mermaid_labels_read_to_search():
    mermaid = to_mermaid(built())
    # aliases follow sorted ids: End=n0, Start=n1, answer=n2, read=n3, search=n4
    assert "    n3 -->|PROVIDES_INPUT_FOR| n4" in mermaid.splitlines()
    assert "    n4 -->|LEADS_TO| n3" in mermaid.splitlines()


def test_round_2_is_a_missing_endpoint():
    graph, diagnostics = apply(built(), ROUND_2_BROKEN)
    assert graph is None
    assert [d.code for d in diagnostics if d.is_error] == ["missing_endpoint"]
    assert "verify_answer" in diagnostics[0].message


def test_round_3_drops_the_second_hop_and_both_dara_quinn_questions_fail():
    graph = dropped()
    assert len(graph.edges) == 4
    assert evaluate(graph).score == 0.5
    assert passed(graph, VALIDATION_SET) == ["What did Chen Wei compose?", "What did Eli Sato write?"]
    episode = solve(graph, "Which country is Dara Quinn from?")
    assert "→ [search]" not in episode.guidance[-1]
    assert episode.answer == "Dara Quinn is a marathon runner"


def test_rounds_3_and_4_give_the_identical_candidate():
    three, _ = apply(built(), ROUND_3_DROP_SECOND_HOP)
    four, _ = apply(built(), ROUND_4_DUPLICATE)
    assert three is not None and four is not None
    assert three.digest == four.digest


# -- collector and evaluator -------------------------------------------------------------------------------------------


def test_collect_gives_one_trace_per_training_question():
    env = TwoHopEnvironment()
    traces = env.collect(built(), graph_ref="ref-1", iteration=3)
    assert [trace.id for trace in traces] == ["it3-train0", "it3-train1", "it3-train2", "it3-train3"]
    assert [trace.task_id for trace in traces] == ["train0", "train1", "train2", "train3"]
    assert all(isinstance(trace, Trace) and trace.graph_ref == "ref-1" for trace in traces)
    second = traces[1]
    assert second.outcome.passed is True and second.outcome.score == 1.0
    assert second.outcome.prediction == "France" and second.outcome.truth == "France"
    assert second.nodes_visited == (START, "search", "read", "search", "read")
    assert len(second.guidance) == 5 and "[read] → [search]" in second.guidance[2]
    assert second.text == "\n".join(
        [
            "Action: search(In which country was Alice Martin born?)",
            "Observation: Alice Martin",
            "Action: read(Alice Martin)",
            f"Observation: {document('Alice Martin').text}",
            "Action: search(Lyon)",
            "Observation: Lyon",
            "Action: read(Lyon)",
            f"Observation: {document('Lyon').text}",
            "Action: answer(France)",
        ]
    )
    assert [step.action for step in second.steps] == ["search", "read", "search", "read", "answer"]
    # the scripted solver follows a bridge whenever the graph offers read→search, one-hop questions included
    first = traces[0]
    assert first.outcome.passed is False and first.outcome.score == 0.0
    assert (first.outcome.prediction, first.outcome.truth) == ("France", "Alice Martin is a painter")


def test_collect_on_the_skeleton_passes_the_one_hop_questions():
    traces = TwoHopEnvironment().collect(skeleton(), graph_ref=None, iteration=0)
    assert [trace.outcome.passed for trace in traces] == [True, False, True, False]
    assert traces[0].id == "it0-train0"
    assert all(trace.graph_ref is None and trace.nodes_visited == (START,) for trace in traces)


def test_evaluate_reports_the_mean_with_purpose_iteration_and_per_task_outcomes():
    env = TwoHopEnvironment()
    evaluation = env.evaluate("digest-1", dropped(), iteration=3, purpose="candidate")
    assert evaluation.ref == "digest-1"
    assert evaluation.score == 0.5
    assert evaluation.aggregate == {"purpose": "candidate", "iteration": 3}
    assert [o.task_id for o in evaluation.per_task] == ["val0", "val1", "val2", "val3"]
    assert [o.passed for o in evaluation.per_task] == [True, False, True, False]
    assert [o.truth for o in evaluation.per_task] == [q.answer for q in VALIDATION_SET]
    assert evaluation.per_task[1].prediction == "Dara Quinn is a marathon runner"


def test_validation_traces_are_val_ids_under_the_ref():
    traces = TwoHopEnvironment().validation_traces(built(), graph_ref="digest-1")
    assert [trace.id for trace in traces] == ["val0", "val1", "val2", "val3"]
    assert [trace.task_id for trace in traces] == ["val0", "val1", "val2", "val3"]
    assert all(trace.graph_ref == "digest-1" and trace.outcome.passed for trace in traces)


def test_counters_count_collections_and_evaluations():
    env = TwoHopEnvironment()
    assert (env.collections, env.evaluations) == (0, 0)
    env.collect(skeleton(), graph_ref=None, iteration=0)
    env.evaluate(None, skeleton(), iteration=0, purpose="baseline")
    env.evaluate(None, built(), iteration=1, purpose="candidate")
    env.validation_traces(built())
    assert (env.collections, env.evaluations) == (1, 2)


def test_rollouts_are_deterministic():
    env = TwoHopEnvironment()
    first = [t.to_document() for t in env.collect(built(), graph_ref="r", iteration=1)]
    second = [t.to_document() for t in env.collect(built(), graph_ref="r", iteration=1)]
    assert first == second
