import json
import sys
import types

import pytest

from graphs.core import END, START, Graph, skeleton
from graphs.core.bootstrap import (
    NETS_TO_SKELETON,
    NO_SOLUTIONS_SENTENCE,
    ONETIME_REJECTIONS_PLACEHOLDER,
    BootstrapResult,
    bootstrap_graph,
    refine_once,
    run_onetime_refiner,
    solution_traces,
)
from graphs.core.evaluation import TaskOutcome, Trace
from graphs.core.refiner import (
    MODE_HEADER,
    REJECTIONS_HEADER,
    RELATIONS_HEADER,
    SCRATCH_INCREMENTAL,
    SCRATCH_ONETIME,
    STATIC_INCREMENTAL,
    STATIC_ONETIME,
    TASK_HEADER,
    TOOLS_HEADER,
    TRAJECTORIES_END,
    TRAJECTORIES_HEADER,
    trajectories_section,
)
from graphs.core.traces import render_attempts_block
from llm.core import ScriptedChatModel, ScriptExhausted
from tests.graphs.core.builders import QA_TOOLS, five_node_graph
from tests.helpers.refiner_fakes import BROKEN, BUILD, EMPTY, BudgetExceeded, ExplodingModel, reply

SOLUTION_1 = "Action: search(Alice Martin)\nObservation: Alice Martin\nAction: answer(painter)"
SOLUTION_2 = "Action: search(Bram Okafor)\nAction: read(Bram Okafor)\nAction: answer(Okafor Motors)"
# Deletes Start→End and adds it back with guidance: the result is still the Start→End skeleton.
BACK_TO_SKELETON = {
    "delete_edges": [{"source": "Start", "target": "End"}],
    "add_edges": [{"source": "Start", "target": "End", "relation": "LEADS_TO", "guidance": "Just finish"}],
}


def user_message(model, index=0):
    return model.requests[index].parts[0]


def slot(user, header, next_header):
    return user[user.index(header) + len(header) : user.index(next_header)].strip()


def once(model, graph=None, **options):
    options.setdefault("attempts_block", "ATTEMPTS")
    return refine_once(config_task_description="two-hop QA", model=model, graph=graph or skeleton(), **options)


# -- refine_once ------------------------------------------------------------------------------------------------------


def test_refine_once_builds_from_scratch_on_the_skeleton():
    model = ScriptedChatModel([reply(BUILD)])
    candidate, edits, diagnostics = once(model, available_tools=QA_TOOLS)
    assert sorted(candidate.nodes) == [END, START, "answer", "search"]
    assert len(edits.add_edges) == 3 and diagnostics == []
    user = user_message(model)
    assert f"{MODE_HEADER} {SCRATCH_ONETIME} (" in user
    assert f"{TASK_HEADER} two-hop QA" in user
    assert f"{trajectories_section('ATTEMPTS')}\n" in user


def test_refine_once_revises_a_non_skeleton_graph_in_static_onetime():
    model = ScriptedChatModel([reply({"delete_edges": [{"source": "read", "target": "search"}]})])
    candidate, _, _ = once(model, graph=five_node_graph())
    assert len(candidate.edges) == 4
    assert f"{MODE_HEADER} {STATIC_ONETIME} (" in user_message(model)


def test_the_rejected_block_is_the_one_time_placeholder():
    model = ScriptedChatModel([reply(BUILD)])
    once(model)
    assert f"{REJECTIONS_HEADER}\n{ONETIME_REJECTIONS_PLACEHOLDER}\n" in user_message(model)
    assert ONETIME_REJECTIONS_PLACEHOLDER == "(none: one-time mode)"


def test_refine_once_accepts_either_one_time_mode_explicitly():
    model = ScriptedChatModel([reply(BUILD)])
    once(model, graph=skeleton(), mode=STATIC_ONETIME)
    assert f"{MODE_HEADER} {STATIC_ONETIME} (" in user_message(model)


@pytest.mark.parametrize("mode", [STATIC_INCREMENTAL, SCRATCH_INCREMENTAL, "auto", "static"])
def test_refine_once_refuses_the_incremental_and_unknown_modes_before_any_call(mode):
    model = ScriptedChatModel([])
    with pytest.raises(ValueError, match="mode"):
        once(model, mode=mode)
    assert model.requests == []


def test_refine_once_reports_empty_edits_without_a_candidate():
    candidate, edits, diagnostics = once(ScriptedChatModel([reply(EMPTY)]))
    assert candidate is None and edits.is_empty and diagnostics == []


def test_refine_once_reports_a_structural_failure_after_its_retry():
    model = ScriptedChatModel([reply(BROKEN), "not json"])
    candidate, edits, diagnostics = once(model)
    assert candidate is None and edits is None
    assert [d.code for d in diagnostics] == ["malformed_edit"]
    assert len(model.requests) == 2


def test_refine_once_passes_its_refiner_settings_on():
    model = ScriptedChatModel([reply(BROKEN)])
    once(model, role_retries=0, max_tokens=1000, cycle_policy="allow", available_tools=["search"])
    [request] = model.requests
    assert request.max_tokens == 1000
    assert f"{TOOLS_HEADER} search\n" in request.parts[0]
    assert "Loops are allowed" in request.parts[0]


def test_refine_once_renders_the_traces_when_no_block_is_given():
    traces = [
        Trace("t-low", TaskOutcome("q1", 0.0, False), text="Action: answer(unknown)"),
        Trace("t-high", TaskOutcome("q2", 1.0, True), text="Action: search(Alice)"),
    ]
    model = ScriptedChatModel([reply(BUILD)])
    refine_once(config_task_description="QA", model=model, graph=skeleton(), traces=traces)
    expected = render_attempts_block(traces)
    assert f"{trajectories_section(expected)}\n" in user_message(model)
    assert user_message(model).index("t-high") < user_message(model).index("t-low")


def test_refine_once_hands_threshold_and_cap_to_the_renderer(monkeypatch):
    calls = []

    def fake_render(traces, **options):
        calls.append((list(traces), options))
        return "RENDERED"

    monkeypatch.setitem(sys.modules, "graphs.core.traces", types.SimpleNamespace(render_attempts_block=fake_render))
    traces = [Trace("t1", TaskOutcome("q1", 0.7, True), text="x")]
    model = ScriptedChatModel([reply(BUILD)])
    refine_once(
        config_task_description="QA", model=model, graph=skeleton(), traces=traces, success_threshold=0.8, char_cap=99
    )
    assert calls == [(traces, {"success_threshold": 0.8, "char_cap": 99})]
    assert f"{trajectories_section('RENDERED')}\n" in user_message(model)


def test_run_onetime_refiner_exposes_calls_and_retries():
    result = run_onetime_refiner(
        task_description="QA", model=ScriptedChatModel(["nope", reply(BUILD)]), graph=skeleton(), attempts_block="A"
    )
    assert result.model_calls == 2 and result.retries == 1 and result.mode == SCRATCH_ONETIME
    assert result.warnings == ["refiner retried 1 time(s)"]


# -- bootstrap: refusals before any call ------------------------------------------------------------------------------


@pytest.mark.parametrize("statement", ["", "   \n", None])
def test_bootstrap_needs_a_problem_statement(statement):
    with pytest.raises(ValueError, match="problem statement"):
        bootstrap_graph(statement, ScriptedChatModel([]), tools=QA_TOOLS)


@pytest.mark.parametrize("solutions", [(), ["", "  \n"]])
def test_bootstrap_without_solutions_needs_the_tool_list(solutions):
    model = ScriptedChatModel([])
    with pytest.raises(ValueError, match="needs the tool list"):
        bootstrap_graph("Answer two-hop questions.", model, solutions=solutions)
    with pytest.raises(ValueError, match="needs the tool list"):
        bootstrap_graph("Answer two-hop questions.", model, solutions=solutions, tools=[])
    assert model.requests == []


def test_solutions_must_be_texts():
    with pytest.raises(ValueError):
        solution_traces("one long solution")
    with pytest.raises(ValueError):
        solution_traces([42])


# -- bootstrap: prompts -----------------------------------------------------------------------------------------------


def test_solution_traces_are_passing_attempts_numbered_from_one():
    traces = solution_traces([SOLUTION_1, "   ", SOLUTION_2])
    assert [t.id for t in traces] == ["solution-1", "solution-2"]
    assert [t.text for t in traces] == [SOLUTION_1, SOLUTION_2]
    assert all(t.score == 1.0 and t.outcome.passed and t.task_id == t.id for t in traces)


def test_bootstrap_shows_the_worked_solutions_as_trajectories():
    model = ScriptedChatModel([reply(BUILD)])
    result = bootstrap_graph("Answer two-hop questions.\n", model, solutions=[SOLUTION_1, "", SOLUTION_2])
    user = user_message(model)
    trajectories = slot(user, TRAJECTORIES_HEADER, "Current Procedural Graph representation:")
    assert f"{TRAJECTORIES_HEADER}\n{trajectories}" == trajectories_section(
        render_attempts_block(solution_traces([SOLUTION_1, SOLUTION_2]))
    )
    assert trajectories.endswith(TRAJECTORIES_END)
    assert "solution-1" in trajectories and SOLUTION_2 in trajectories
    assert f"{TASK_HEADER} Answer two-hop questions.\n\n" in user
    assert f"{MODE_HEADER} {SCRATCH_ONETIME} (" in user
    assert NO_SOLUTIONS_SENTENCE not in user
    assert result.ok and result.solutions == 2


def test_bootstrap_without_solutions_asks_for_a_design_from_the_task_and_tools():
    model = ScriptedChatModel([reply(BUILD)])
    result = bootstrap_graph("Answer two-hop questions.", model, tools=QA_TOOLS)
    user = user_message(model)
    assert f"{trajectories_section(NO_SOLUTIONS_SENTENCE)}\n" in user
    assert f"{TOOLS_HEADER} search, read, answer\n" in user
    assert f"{REJECTIONS_HEADER}\n{ONETIME_REJECTIONS_PLACEHOLDER}\n" in user
    assert result.ok and result.solutions == 0


def test_bootstrap_starts_from_the_skeleton_of_the_given_vocabulary():
    vocabulary = {"relations": ["NEXT"], "node_types": ["ACTION", "STATUS"]}
    step = {
        "add_nodes": [{"id": "search", "type": "ACTION", "description": "Search"}],
        "add_edges": [
            {"source": "Start", "target": "search", "relation": "NEXT", "guidance": "Search"},
            {"source": "search", "target": "End", "relation": "NEXT", "guidance": "Stop"},
        ],
        "delete_edges": [{"source": "Start", "target": "End"}],
    }
    model = ScriptedChatModel([reply(step)])
    result = bootstrap_graph("Find things.", model, tools=["search"], vocabulary=vocabulary)
    assert f"{RELATIONS_HEADER} NEXT\n" in user_message(model)
    assert json.dumps(Graph.skeleton(**vocabulary).to_refiner_json(), indent=1) in user_message(model)
    assert result.ok and result.graph.relations == ("NEXT",)


def test_bootstrap_passes_its_refiner_settings_on():
    model = ScriptedChatModel(["nope", "nope", reply(BUILD)])
    result = bootstrap_graph("QA.", model, tools=QA_TOOLS, role_retries=2, max_tokens=4096, cycle_policy="allow")
    assert [r.max_tokens for r in model.requests] == [4096, 4096, 4096]
    assert "Loops are allowed" in user_message(model)
    assert result.ok and result.refiner_calls == 3


# -- bootstrap: results -----------------------------------------------------------------------------------------------


def test_a_successful_bootstrap_and_its_seed_meta():
    result = bootstrap_graph("QA.", ScriptedChatModel([reply(BUILD)]), solutions=[SOLUTION_1], tools=QA_TOOLS)
    assert result.ok and isinstance(result, BootstrapResult)
    assert sorted(result.graph.nodes) == [END, START, "answer", "search"]
    assert result.edits is not None and result.mode == SCRATCH_ONETIME
    assert result.seed_meta() == {"origin": "bootstrapped", "solutions": 1, "mode": SCRATCH_ONETIME, "refiner_calls": 1}


def test_unknown_actions_stay_warnings_in_a_bootstrap():
    result = bootstrap_graph("QA.", ScriptedChatModel([reply(BUILD)]), tools=["search"])
    assert result.ok
    assert [d.code for d in result.diagnostics] == ["unknown_action"]


def test_empty_edits_refuse_the_bootstrap_with_no_action():
    model = ScriptedChatModel([reply(EMPTY)])
    result = bootstrap_graph("QA.", model, tools=QA_TOOLS)
    assert not result.ok and result.graph is None
    assert [d.code for d in result.diagnostics] == ["no_action"]
    assert result.refusal() == "bootstrap refused: error:no_action: the refiner proposed no edits"
    assert len(model.requests) == 1 and result.refiner_calls == 1


def test_edits_that_net_back_to_the_skeleton_refuse_the_bootstrap():
    result = bootstrap_graph("QA.", ScriptedChatModel([reply(BACK_TO_SKELETON)]), tools=QA_TOOLS)
    assert not result.ok
    assert result.edits is not None and not result.edits.is_empty
    assert [d.code for d in result.diagnostics] == ["no_action"]
    assert result.refusal() == f"bootstrap refused: error:no_action: {NETS_TO_SKELETON}"


def test_a_structural_failure_refuses_the_bootstrap_with_its_diagnostics():
    model = ScriptedChatModel([reply(BROKEN), reply(BROKEN)])
    result = bootstrap_graph("QA.", model, tools=QA_TOOLS)
    assert not result.ok and result.refiner_calls == 2
    refusal = result.refusal()
    assert refusal.startswith("bootstrap refused: error:missing_endpoint")
    assert "no_path_to_terminal" in refusal and "no_action" not in refusal


def test_an_unparseable_reply_refuses_the_bootstrap():
    result = bootstrap_graph("QA.", ScriptedChatModel(["no", "still no"]), tools=QA_TOOLS)
    assert not result.ok and result.edits is None
    assert result.refusal() == "bootstrap refused: error:malformed_edit [reply]: no JSON object found in the reply"


def test_a_refused_bootstrap_keeps_its_seed_meta_counts():
    result = bootstrap_graph("QA.", ScriptedChatModel(["no"]), solutions=[SOLUTION_1], role_retries=0)
    assert result.seed_meta()["refiner_calls"] == 1 and result.seed_meta()["solutions"] == 1


def test_model_exceptions_propagate_out_of_bootstrap_and_refine_once():
    with pytest.raises(BudgetExceeded):
        bootstrap_graph("QA.", ExplodingModel(), tools=QA_TOOLS)
    with pytest.raises(ScriptExhausted):
        once(ScriptedChatModel([]))
