import pickle

import pytest

from graphs.core import (
    END,
    START,
    ExactActionLocalizer,
    Graph,
    GuidanceConfig,
    Guide,
    Node,
    Step,
    render_trajectory,
    serialize_context,
    serialize_full,
    skeleton,
)
from graphs.core.guide import FULL_CONTEXT_DESC, FULL_SOURCE, LOCAL_CONTEXT_DESC, LOCAL_SOURCE
from llm.core import ScriptedChatModel, ScriptExhausted
from tests.graphs.core.builders import five_node_graph


def raw(mode="raw_subgraph", **options):
    return Guide(five_node_graph(), config=GuidanceConfig(mode=mode, **options))


def silent_model():
    """A real scripted model with no replies: any call raises ScriptExhausted."""
    return ScriptedChatModel([])


# -- configuration ----------------------------------------------------------------------------------------------------


def test_the_config_defaults_follow_the_paper():
    config = GuidanceConfig()
    assert (config.hops, config.window, config.mode) == (2, 3, "generative_subgraph")
    assert config.include_relations is True
    assert config.max_tokens == 1024
    assert config.task_description == "tasks in this workspace"
    assert config.max_guidance_calls is None


@pytest.mark.parametrize(
    "options",
    [
        {"hops": 0},
        {"hops": True},
        {"hops": 1.5},
        {"window": -1},
        {"mode": "generative"},
        {"max_tokens": 0},
        {"max_guidance_calls": -1},
        {"include_relations": "yes"},
    ],
)
def test_a_bad_config_is_refused(options):
    with pytest.raises(ValueError):
        GuidanceConfig(**options)


def test_a_generative_mode_without_a_model_is_refused():
    with pytest.raises(ValueError, match="needs a model"):
        Guide(five_node_graph())
    with pytest.raises(ValueError):
        Guide(five_node_graph(), config=GuidanceConfig(mode="generative_full"))


# -- localization -----------------------------------------------------------------------------------------------------


def test_before_the_first_action_the_agent_is_at_start():
    guide = raw()
    result = guide.guidance("Who is Alice Martin?", [])
    assert result.node_id == START
    assert result.text == serialize_context(five_node_graph(), START, 2)
    assert guide.visited == [START]


def test_the_last_action_is_matched_exactly_against_node_ids():
    guide = raw()
    result = guide.guidance("q", [Step("search", {"q": "Alice"}, "Alice Martin"), Step("read", "Alice Martin")])
    assert result.node_id == "read"
    assert result.used_full_graph is False
    assert result.subgraph_digest == five_node_graph().neighborhood("read", 2).digest
    assert result.mode == "raw_subgraph"
    assert result.context == result.text


def test_no_match_falls_back_to_the_full_graph():
    guide = raw()
    result = guide.guidance("q", [Step("Search")])
    assert result.node_id is None
    assert result.used_full_graph is True
    assert result.subgraph_digest is None
    assert result.text == serialize_full(five_node_graph())
    assert guide.visited == []


def test_a_normalize_function_maps_actions_onto_node_ids():
    localizer = ExactActionLocalizer(normalize=lambda action: action.rsplit(".", 1)[-1].lower())
    guide = Guide(five_node_graph(), config=GuidanceConfig(mode="raw_subgraph"), localizer=localizer)
    assert guide.guidance("q", [Step("tools.Search")]).node_id == "search"
    assert guide.guidance("q", [Step("tools.browse")]).node_id is None
    assert guide.visited == ["search"]


def test_a_graph_without_start_has_no_place_for_an_empty_trajectory():
    graph = Graph(nodes=[Node(END, "STATUS")])
    assert ExactActionLocalizer().locate(graph, []) is None


def test_visited_and_the_log_record_every_call():
    guide = raw()
    trajectory = []
    for action in ["search", "read", "search", "lookup", "answer"]:
        guide.guidance("q", trajectory)
        trajectory.append(Step(action))
    assert guide.visited == [START, "search", "read", "search"]
    assert [g.node_id for g in guide.guidance_log] == [START, "search", "read", "search", None]


def test_a_custom_localizer_plugs_in():
    class AlwaysRead:
        def locate(self, graph, trajectory):
            return "read"

    guide = Guide(five_node_graph(), config=GuidanceConfig(mode="raw_subgraph", hops=1), localizer=AlwaysRead())
    result = guide.guidance("q", [Step("anything")])
    assert result.node_id == "read"
    assert "Subsequent Horizon" not in result.text


def test_steps_may_arrive_as_mappings():
    result = raw().guidance("q", [{"action": "answer", "args": {"text": "France"}, "observation": "ok"}])
    assert result.node_id == "answer"


def test_context_for_localizes_without_recording_or_calling():
    guide = Guide(five_node_graph(), silent_model())
    node, context, used_full = guide.context_for([Step("read")])
    assert (node, used_full) == ("read", False)
    assert context == serialize_context(five_node_graph(), "read", 2)
    assert guide.visited == [] and guide.guidance_log == [] and guide.model_calls == 0
    assert guide.context_for([Step("nowhere")])[2] is True


# -- modes ------------------------------------------------------------------------------------------------------------


def test_none_mode_returns_empty_guidance_but_still_localizes():
    guide = Guide(five_node_graph(), silent_model(), GuidanceConfig(mode="none"))
    result = guide.guidance("q", [Step("search")])
    assert (result.text, result.context, result.node_id, result.mode) == ("", "", "search", "none")
    assert result.used_full_graph is False and result.subgraph_digest is None
    assert guide.visited == ["search"] and guide.model_calls == 0


@pytest.mark.parametrize("mode", ["raw_subgraph", "raw_full"])
def test_raw_modes_never_call_the_model(mode):
    guide = Guide(five_node_graph(), silent_model(), GuidanceConfig(mode=mode))
    for trajectory in ([], [Step("search")], [Step("unknown")]):
        result = guide.guidance("q", trajectory)
        assert result.mode == mode
    assert guide.model_calls == 0


def test_raw_full_serializes_the_whole_graph_even_when_localized():
    result = raw("raw_full", include_relations=False).guidance("q", [Step("search")])
    assert result.node_id == "search"
    assert result.used_full_graph is True
    assert result.text == serialize_full(five_node_graph(), include_relations=False)


def test_the_paper_layout_is_available_through_the_config():
    result = raw(include_relations=False, hops=1).guidance("q", [Step("search")])
    assert result.text == serialize_context(five_node_graph(), "search", 1, include_relations=False)
    assert "LEADS_TO" not in result.text


def test_generative_guidance_makes_one_guidance_call_with_an_empty_system_prompt():
    model = ScriptedChatModel(["  Read the top hit next.  \n"])
    config = GuidanceConfig(task_description="two-hop question answering", max_tokens=300)
    guide = Guide(five_node_graph(), model, config)
    result = guide.guidance("Which country is Dara Quinn from?", [Step("search", {"q": "Dara Quinn"}, "Dara Quinn")])
    assert result.text == "Read the top hit next."
    assert result.mode == "generative_subgraph"
    assert result.node_id == "search" and result.used_full_graph is False
    assert set(result.usage) >= {"input_tokens", "output_tokens"}
    assert guide.model_calls == 1
    (request,) = model.requests
    assert request.role == "guidance"
    assert request.system == ""
    assert len(request.parts) == 1
    assert request.max_tokens == 300


def test_the_guidance_prompt_fills_its_six_slots_in_order():
    model = ScriptedChatModel(["ok"])
    steps = [Step("search", "Dara Quinn", "Dara Quinn"), Step("read", "Dara Quinn", "born in Galway")]
    Guide(five_node_graph(), model, GuidanceConfig(task_description="two-hop QA", window=1)).guidance(
        "Which country is Dara Quinn from?", steps
    )
    prompt = model.requests[0].parts[0]
    context = serialize_context(five_node_graph(), "read", 2)
    recent = render_trajectory(steps, 1)
    slots = ["two-hop QA", LOCAL_CONTEXT_DESC, "\n" + context, "Which country is Dara Quinn from?", "\n" + recent]
    positions = [prompt.index(slot) for slot in slots]
    assert positions == sorted(positions)
    assert prompt.index(LOCAL_SOURCE, positions[-1]) > positions[-1]
    assert "Step 1:" not in prompt and "Step 2:" in prompt
    assert all(word in prompt for word in ("condition", "guidance", "pitfalls"))


def test_the_full_variant_binds_the_complete_graph_strings():
    model = ScriptedChatModel(["ok", "ok"])
    guide = Guide(five_node_graph(), model, GuidanceConfig(mode="generative_full"))
    result = guide.guidance("q", [Step("search")])
    assert result.used_full_graph is True and result.subgraph_digest is None
    prompt = model.requests[0].parts[0]
    assert FULL_CONTEXT_DESC in prompt and FULL_SOURCE in prompt
    assert LOCAL_CONTEXT_DESC not in prompt
    Guide(five_node_graph(), model).guidance("q", [Step("lost")])
    assert FULL_CONTEXT_DESC in model.requests[1].parts[0]


def test_generative_guidance_degrades_to_raw_after_the_call_cap():
    model = ScriptedChatModel(["first"])
    guide = Guide(five_node_graph(), model, GuidanceConfig(max_guidance_calls=1))
    assert guide.guidance("q", []).mode == "generative_subgraph"
    second = guide.guidance("q", [Step("search")])
    assert second.mode == "raw_subgraph"
    assert second.text == serialize_context(five_node_graph(), "search", 2)
    assert guide.guidance("q", [Step("elsewhere")]).mode == "raw_full"
    assert guide.model_calls == 1
    assert len(model.requests) == 1


def test_a_zero_call_cap_never_calls_the_model():
    guide = Guide(five_node_graph(), silent_model(), GuidanceConfig(mode="generative_full", max_guidance_calls=0))
    assert guide.guidance("q", []).mode == "raw_full"
    assert guide.model_calls == 0


def test_a_failing_model_call_is_not_counted_or_logged():
    guide = Guide(five_node_graph(), silent_model())
    with pytest.raises(ScriptExhausted):
        guide.guidance("q", [])
    assert guide.model_calls == 0 and guide.guidance_log == []


def test_guidance_serializes_to_a_plain_dict():
    result = raw().guidance("q", [Step("answer")])
    assert result.to_dict() == {
        "text": result.text,
        "node_id": "answer",
        "subgraph_digest": result.subgraph_digest,
        "used_full_graph": False,
        "usage": {},
        "mode": "raw_subgraph",
    }


def test_guidance_survives_pickling():
    model = ScriptedChatModel(["ok"])
    result = Guide(five_node_graph(), model).guidance("q", [])
    assert pickle.loads(pickle.dumps(result)) == result


def test_a_host_can_serve_contexts_through_the_context_hook():
    served = []

    class CachingGuide(Guide):
        def _context(self, node_id):
            served.append(node_id)
            return f"cached:{node_id}", None if node_id is None else f"digest:{node_id}", node_id is None

    guide = CachingGuide(five_node_graph(), config=GuidanceConfig(mode="raw_subgraph"))
    result = guide.guidance("q", [Step("read")])
    assert (result.text, result.subgraph_digest, result.used_full_graph) == ("cached:read", "digest:read", False)
    assert guide.context_for([Step("nowhere")]) == (None, "cached:None", True)
    assert served == ["read", None]


def test_the_toy_scenario_sees_read_only_once_the_graph_has_it():
    """Spec §10: on the skeleton the solver finds no `→ [read]`; on the five-node graph it finds both hops."""
    lost = Guide(skeleton(), config=GuidanceConfig(mode="raw_subgraph")).guidance("q", [Step("search")])
    assert lost.used_full_graph is True
    assert "→ [read]" not in lost.text
    guide = Guide(five_node_graph(), config=GuidanceConfig(mode="raw_subgraph"))
    assert "[search] → [read]" in guide.guidance("q", [Step("search")]).text
    at_read = guide.guidance("q", [Step("search"), Step("read")]).text
    assert "[read] → [search]" in at_read
