"""trajectories.core: every rule of trajectory-mining §2.0, the redactor and the transcript reader."""

import math
from types import MappingProxyType

import pytest

from trajectories.core import DEFAULT_FAMILY_MAP, TrajectoryRun, TrajectoryStep, normalize_steps
from trajectories.core.openai_chat import TranscriptError, parse_arguments, transcript_to_run_item
from trajectories.core.redaction import Redactor


def one(event):
    (step,) = normalize_steps([event])
    return step


def test_step_fields_are_positional_in_the_reference_order():
    step = TrajectoryStep(3, "search", "discover", {"q": "x"}, "found", True, "e1", "p1", 1.0, 2.5, 1, 2, 3, 0.5)
    assert (step.ordinal, step.tool, step.action_family, step.summary, step.ok) == (
        3,
        "search",
        "discover",
        "found",
        True,
    )
    assert (step.event_id, step.parent_id, step.started_at, step.ended_at) == ("e1", "p1", 1.0, 2.5)
    assert (step.input_tokens, step.cached_input_tokens, step.output_tokens, step.cost) == (1, 2, 3, 0.5)


def test_step_defaults_and_no_validation():
    step = TrajectoryStep(0, "x", "other")
    assert dict(step.arguments) == {} and step.summary == "" and step.ok is None and step.cost == 0.0
    assert TrajectoryStep(-1, "", "", ok="yes").ok == "yes"  # the constructor validates nothing


def test_step_is_frozen():
    with pytest.raises(AttributeError):
        TrajectoryStep(0, "x", "other").tool = "y"


def test_duration_and_tokens():
    assert TrajectoryStep(0, "x", "o", started_at=1.0, ended_at=3.5).duration == 2.5
    assert TrajectoryStep(0, "x", "o", started_at=5.0, ended_at=3.0).duration == 0
    assert TrajectoryStep(0, "x", "o", started_at=None, ended_at=3.0).duration == 0
    assert TrajectoryStep(0, "x", "o", input_tokens=1, cached_input_tokens=2, output_tokens=4).tokens == 7


def test_run_requires_an_id_and_a_known_outcome():
    with pytest.raises(ValueError):
        TrajectoryRun(trajectory_id="  ", steps=())
    with pytest.raises(ValueError):
        TrajectoryRun(trajectory_id="", steps=())
    with pytest.raises(ValueError):
        TrajectoryRun(trajectory_id="r1", steps=(), outcome="won")
    with pytest.raises(TypeError):
        TrajectoryRun("r1", ())  # keyword-only


def test_run_stores_steps_as_a_tuple_and_defaults_to_unknown():
    run = TrajectoryRun(trajectory_id="r1", steps=[TrajectoryStep(0, "x", "o")])
    assert isinstance(run.steps, tuple) and run.outcome == "unknown"


def test_ordinal_is_the_position_in_the_event_list():
    assert [s.ordinal for s in normalize_steps([{"name": "a"}, {"name": "b"}, {}])] == [0, 1, 2]


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("Search", "search"),
        ("Read Document!", "readdocument"),
        ("tag_document", "tag_document"),
        ("my-tool_2", "my-tool_2"),
        ("!!!", "unknown"),
        (None, "unknown"),
        ("ÉCOLE", "cole"),
        ("x" * 70, "x" * 60),
    ],
)
def test_tool_names_are_casefolded_cleaned_and_capped(name, tool):
    event = {} if name is None else {"name": name}
    assert one(event).tool == tool


@pytest.mark.parametrize(
    ("tool", "family"),
    [
        ("search", "discover"),
        ("read_document", "inspect"),
        ("list_orders", "inspect"),
        ("inspect_account", "inspect"),
        ("tag_document", "change"),
        ("untag_document", "change"),
        ("create_task", "change"),
        ("approve_answer", "approve"),
        ("sync_source", "execute"),
        ("run_workflow", "execute"),
        ("navigate", "navigate"),
        ("issue_refund", "other"),
    ],
)
def test_default_family_map(tool, family):
    assert one({"name": tool}).action_family == family
    assert DEFAULT_FAMILY_MAP.get(tool, "other") == family


def test_default_family_map_is_read_only_and_a_custom_map_is_used():
    with pytest.raises(TypeError):
        DEFAULT_FAMILY_MAP["search"] = "x"  # type: ignore[index]
    (step,) = normalize_steps([{"name": "issue_refund"}], family_map={"issue_refund": "change"})
    assert step.action_family == "change"


def test_arguments_drop_secret_like_keys_by_substring():
    args = {
        "api_key": "k",
        "monkey": "m",
        "keyword": "w",
        "Body": "b",
        "page_content": "c",
        "access_token": "t",
        "client_secret": "s",
        "PASSWORD": "p",
        "order_id": "A-1",
    }
    assert dict(one({"name": "x", "args": args}).arguments) == {"order_id": "A-1"}


def test_argument_keys_are_cleaned_truncated_and_dropped_when_empty():
    args = {"order id!": 1, "k" * 0 + "x" * 50: 2, "$$$": 3, "ok-key_2": 4}
    arguments = dict(one({"name": "x", "args": args}).arguments)
    assert arguments == {"orderid": 1, "x" * 40: 2}  # "ok-key_2" holds "key": dropped


def test_argument_values_are_scalars_only_and_strings_capped():
    args = {"s": "y" * 200, "i": 3, "f": 1.5, "b": False, "n": None, "l": [1], "d": {"a": 1}, "t": (1,)}
    arguments = one({"name": "x", "args": args}).arguments
    assert dict(arguments) == {"s": "y" * 160, "i": 3, "f": 1.5, "b": False, "n": None}


def test_arguments_are_read_only_and_empty_unless_a_dict():
    arguments = one({"name": "x", "args": {"a": 1}}).arguments
    assert isinstance(arguments, MappingProxyType)
    with pytest.raises(TypeError):
        arguments["a"] = 2  # type: ignore[index]
    assert dict(one({"name": "x", "args": [("a", 1)]}).arguments) == {}
    assert dict(one({"name": "x", "args": "a=1"}).arguments) == {}


def test_summary_is_stringified_and_capped():
    assert one({"summary": "z" * 400}).summary == "z" * 300
    assert one({"summary": 42}).summary == "42"
    assert one({}).summary == ""


@pytest.mark.parametrize(
    ("value", "ok"), [(True, True), (False, False), (1, None), (0, None), ("true", None), (None, None)]
)
def test_ok_is_kept_only_when_a_real_bool(value, ok):
    assert one({"ok": value}).ok is ok


def test_event_and_parent_ids():
    assert one({"event_id": "e" * 200, "parent_id": "p"}).event_id == "e" * 160
    assert one({"id": "fallback"}).event_id == "fallback"
    assert one({"event_id": "primary", "id": "fallback"}).event_id == "primary"
    assert one({"parent_id": "q" * 170}).parent_id == "q" * 160
    assert one({}).event_id == "" and one({}).parent_id == ""


@pytest.mark.parametrize(
    ("value", "parsed"),
    [(1.5, 1.5), ("2.5", 2.5), (3, 3.0), ("soon", None), (None, None), (math.nan, None), (math.inf, None), ([1], None)],
)
def test_times_are_finite_floats_or_none(value, parsed):
    step = one({"started_at": value, "ended_at": value})
    assert step.started_at == parsed and step.ended_at == parsed


@pytest.mark.parametrize(
    ("value", "count"), [(12, 12), (-5, 0), ("7", 7), ("many", 0), (None, 0), (math.nan, 0), (3.9, 3)]
)
def test_tokens_are_non_negative_ints(value, count):
    step = one({"input_tokens": value, "cached_input_tokens": value, "output_tokens": value})
    assert (step.input_tokens, step.cached_input_tokens, step.output_tokens) == (count, count, count)
    assert all(isinstance(n, int) for n in (step.input_tokens, step.cached_input_tokens, step.output_tokens))


@pytest.mark.parametrize(("value", "cost"), [(0.25, 0.25), (-1.0, 0.0), ("0.5", 0.5), (math.inf, 0.0), ("x", 0.0)])
def test_cost_is_a_non_negative_finite_float(value, cost):
    assert one({"cost": value}).cost == cost


def test_redactor_replaces_every_pattern_in_texts_and_nested_values():
    redactor = Redactor([r"sk-[A-Za-z0-9]+", r"\b\d{16}\b"])
    assert redactor.text("key sk-abc123 card 4111111111111111") == "key [redacted] card [redacted]"
    assert redactor.value({"a": ["sk-x1", 3], "b": {"c": "sk-zz"}}) == {
        "a": ["[redacted]", 3],
        "b": {"c": "[redacted]"},
    }


def test_a_redactor_without_patterns_changes_nothing_and_a_bad_pattern_is_a_value_error():
    assert not Redactor([]).active and Redactor([]).text("sk-abc") == "sk-abc"
    with pytest.raises(ValueError):
        Redactor(["("])


def test_transcript_tool_calls_become_steps_matched_by_call_id():
    record = {
        "task_id": 7,
        "trial": 2,
        "reward": 1.0,
        "info": {"task": {"instruction": "Cancel my trip"}},
        "traj": [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "get_user", "arguments": '{"user_id": "u1"}'}},
                    {"id": "c2", "function": {"name": "cancel", "arguments": "not json"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "Error: not allowed"},
            {"role": "tool", "tool_call_id": "c1", "content": '{"name": "Mia"}'},
            {"role": "assistant", "tool_calls": [{"id": "c3", "function": {"name": "think", "arguments": "[1]"}}]},
        ],
    }
    item = transcript_to_run_item(record, source="tau")
    assert (item["external_id"], item["intent"], item["outcome"], item["score"]) == ("7:2", "task-7", "success", 1.0)
    assert item["task"] == "Cancel my trip"
    assert [(s["tool"], s["arguments"], s["observation"], s["ok"]) for s in item["steps"]] == [
        ("get_user", {"user_id": "u1"}, '{"name": "Mia"}', True),
        ("cancel", {"raw": "not json"}, "Error: not allowed", False),
        ("think", {"raw": "[1]"}, "", None),
    ]


def test_transcript_falls_back_to_the_first_user_message_and_maps_reward_zero_to_failure():
    record = {"task_id": 1, "trial": 0, "reward": 0.0, "info": {}, "traj": [{"role": "user", "content": "Help me"}]}
    item = transcript_to_run_item(record, source="tau")
    assert (item["task"], item["outcome"], item["score"], item["steps"]) == ("Help me", "failure", 0.0, [])


@pytest.mark.parametrize(
    "record", [[], {"trial": 0, "traj": []}, {"task_id": 1, "traj": []}, {"task_id": 1, "trial": 0, "traj": "x"}]
)
def test_unreadable_transcripts_raise(record):
    with pytest.raises(TranscriptError):
        transcript_to_run_item(record, source="tau")


def test_parse_arguments_keeps_objects_and_wraps_the_rest():
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("{oops") == {"raw": "{oops"}
    assert parse_arguments("") == {}
    assert parse_arguments(None) == {}
