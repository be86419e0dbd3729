"""The mapping rules issue 25 asked for, on hand-made spans in each convention's shape (pure, no database): the run
boundary, the task wherever the convention puts it, call arguments (never the schema), observations from
ToolMessages and span events, nested duplicate model calls, steps from output messages, the outcome rule, prices,
and what was inferred."""

import json

import pytest

from otlp.core.conventions.messages import parsed
from otlp.core.mapping import map_trace, moment
from otlp.core.spans import STATUS_ERROR, STATUS_OK, STATUS_UNSET
from tests.helpers.otlp_spans import OI, SECOND, T0, event, llm_out, span, with_events

OP = "gen_ai.operation.name"


def test_several_agent_spans_side_by_side_leave_the_run_to_the_root():
    """LangGraph: per-iteration AGENT nodes beside the tools node; the CHAIN root is the run (status, end, task)."""
    spans = [
        span(
            1,
            start=0,
            end=20,
            status=STATUS_ERROR,
            name="LangGraph",
            **{OI: "CHAIN", "input.value": '{"messages": [["user", "Refund ORD-1"]]}'},
        ),
        span(2, 1, start=1, end=4, status=STATUS_OK, name="agent", **{OI: "AGENT"}),
        span(3, 1, start=5, end=6, status=STATUS_ERROR, name="tools", **{OI: "CHAIN"}),
        span(
            4, 3, start=5, end=6, status=STATUS_ERROR, name="issue_refund", **{OI: "TOOL", "tool.name": "issue_refund"}
        ),
        span(5, 1, start=7, end=9, status=STATUS_OK, name="agent", **{OI: "AGENT"}),
    ]
    run = map_trace(spans).run
    assert (run["outcome"], run["task"]) == ("failure", "Refund ORD-1")
    assert run["metadata"]["otlp"]["run_span"]["name"] == "LangGraph"
    assert run["ended_at"] == moment(T0 + 20 * SECOND)  # the graph's end, not the first agent node's
    assert "side by side" in run["metadata"]["otlp"]["inferred"]["run"]


def test_tool_parameters_is_the_schema_and_input_value_the_arguments():
    schema = json.dumps({"type": "object", "properties": {"order_id": {"type": "string"}}})
    spans = [
        span(1, start=0, end=9, status=STATUS_OK, **{OI: "AGENT"}),
        span(
            2,
            1,
            start=1,
            end=2,
            **{OI: "TOOL", "tool.name": "lookup", "tool.parameters": schema, "input.value": '{"order_id": "A"}'},
        ),
    ]
    assert map_trace(spans).run["steps"][0]["arguments"] == {"order_id": "A"}


def test_a_bare_single_argument_takes_its_name_from_the_models_call():
    tool_message = {
        "type": "tool",
        "data": {"content": "Refunds within 30 days.", "tool_call_id": "c1", "status": "success"},
    }
    spans = [
        span(1, start=0, end=9, status=STATUS_OK, **{OI: "AGENT"}),
        llm_out(2, 1, 1, [("c1", "lookup_policy", {"topic": "refunds"})]),
        span(
            3,
            1,
            start=3,
            end=4,
            **{
                OI: "TOOL",
                "tool.name": "lookup_policy",
                "input.value": "refunds",
                "output.value": json.dumps(tool_message),
            },
        ),
        span(4, 1, start=5, end=6, **{OI: "TOOL", "tool.name": "note", "input.value": "plain"}),
    ]
    run = map_trace(spans).run
    first, second = run["steps"]
    assert (first["arguments"], first["observation"], first["ok"]) == (
        {"topic": "refunds"},
        "Refunds within 30 days.",
        True,
    )
    assert second["arguments"] == {"value": "plain"}  # no call names it: kept, and said
    assert "steps.1.arguments" in run["metadata"]["otlp"]["inferred"]


def test_an_error_tool_message_is_a_failed_step():
    tool_message = {"type": "tool", "data": {"content": "Error: boom", "tool_call_id": "c1", "status": "error"}}
    spans = [
        span(1, start=0, end=9, status=STATUS_OK, **{OI: "AGENT"}),
        span(
            2,
            1,
            start=1,
            end=2,
            **{OI: "TOOL", "tool.name": "t", "input.value": "{}", "output.value": json.dumps(tool_message)},
        ),
    ]
    step = map_trace(spans).run["steps"][0]
    assert (step["ok"], step["observation"]) == (False, "Error: boom")


def test_strands_events_carry_task_arguments_results_and_exceptions():
    root = with_events(
        span(1, start=0, end=9, status=STATUS_OK, name="invoke_agent", **{OP: "invoke_agent"}),
        event("gen_ai.user.message", content='[{"text": "Refund ORD-1"}]'),
    )
    ok = with_events(
        span(2, 1, start=1, end=2, **{OP: "execute_tool", "gen_ai.tool.name": "lookup"}),
        event("gen_ai.tool.message", role="tool", content='{"topic": "refunds"}', id="c1"),
        event("gen_ai.choice", message='[{"text": "30 days"}]', id="c1"),
    )
    failed = with_events(
        span(
            3,
            1,
            start=3,
            end=4,
            status=STATUS_ERROR,
            message="over limit",
            **{OP: "execute_tool", "gen_ai.tool.name": "refund", "gen_ai.tool.status": "error"},
        ),
        event("gen_ai.tool.message", role="tool", content='{"amount": 399}', id="c2"),
        event("exception", **{"exception.type": "RuntimeError", "exception.message": "over limit"}),
    )
    run = map_trace([root, ok, failed]).run
    assert run["task"] == "Refund ORD-1"
    assert [(s["arguments"], s["observation"], s["ok"]) for s in run["steps"]] == [
        ({"topic": "refunds"}, "30 days", True),
        ({"amount": 399}, "RuntimeError: over limit", False),
    ]


def test_a_model_call_nested_in_another_counts_once():
    spans = [
        span(1, start=0, end=9, name="handle"),
        llm_out(2, 1, 1, [("c1", "lookup", {"q": 1})]),
        span(3, 2, start=1, end=2, **{OP: "chat", "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10}),
        span(
            4,
            1,
            start=3,
            end=4,
            **{
                OI: "LLM",
                "llm.token_count.prompt": 50,
                "llm.token_count.completion": 5,
                "llm.input_messages.0.message.role": "tool",
                "llm.input_messages.0.message.content": "found",
                "llm.input_messages.0.message.tool_call_id": "c1",
            },
        ),
    ]
    run = map_trace(spans).run
    assert sum(s["input_tokens"] + s["output_tokens"] for s in run["steps"]) == 165  # not 275
    assert run["metadata"]["otlp"]["nested_model_spans"] == 1
    assert [(s["tool"], s["arguments"], s["observation"], s["ok"]) for s in run["steps"]] == [
        ("lookup", {"q": 1}, "found", True)
    ]


def test_a_tool_call_without_a_later_result_has_ok_unknown():
    spans = [
        span(1, start=0, end=9, name="handle"),
        llm_out(2, 1, 1, [("c1", "lookup", {})]),
        llm_out(3, 1, 4, [("c2", "more", {})]),
    ]
    run = map_trace(spans).run
    assert [s["ok"] for s in run["steps"]] == [None, None]
    assert "steps.ok" in run["metadata"]["otlp"]["inferred"]


def test_a_lone_model_call_is_not_a_run():
    mapping = map_trace([llm_out(1, 0, 0, [("c1", "lookup", {})])])
    assert mapping.run is None and "a lone model call" in mapping.problems[0]


def test_the_outcome_rule():
    def outcome(root_status, agent_status, **root_attrs):
        spans = [
            span(1, start=0, end=9, status=root_status, name="root", **root_attrs),
            span(2, 1, start=1, end=8, status=agent_status, name="support", **{OI: "AGENT"}),
            span(3, 2, start=2, end=3, **{OI: "TOOL", "tool.name": "t"}),
        ]
        run = map_trace(spans).run
        return run["outcome"], run["metadata"]["otlp"].get("inferred", {}).get("outcome", "")

    assert outcome(STATUS_OK, STATUS_ERROR)[0] == "failure"  # an agent that raised under an OK root
    assert outcome(STATUS_ERROR, STATUS_OK) == ("failure", "")
    assert outcome(STATUS_OK, STATUS_UNSET) == ("success", "")
    assert outcome(STATUS_UNSET, STATUS_UNSET)[0] == "success"
    assert outcome(STATUS_UNSET, STATUS_UNSET, **{"waymark.outcome": "failure"}) == ("failure", "")
    assert outcome(STATUS_UNSET, STATUS_UNSET, **{"error.type": "Timeout"})[0] == "failure"
    no_agent = map_trace(
        [span(1, start=0, end=9, name="handle"), span(2, 1, start=1, end=2, **{OI: "TOOL", "tool.name": "t"})]
    )
    assert (
        no_agent.run["outcome"] == "unknown"
        and "no agent span" in no_agent.run["metadata"]["otlp"]["inferred"]["outcome"]
    )


def test_model_calls_are_priced_when_no_cost_is_declared():
    spans = [
        span(1, start=0, end=9, status=STATUS_OK, **{OI: "AGENT"}),
        span(
            2,
            1,
            start=1,
            end=2,
            **{
                OI: "LLM",
                "llm.model_name": "claude-haiku-4-5",
                "llm.token_count.prompt": 1000,
                "llm.token_count.completion": 100,
            },
        ),
        span(
            3,
            1,
            start=3,
            end=4,
            **{OI: "LLM", "llm.model_name": "gpt-x", "llm.token_count.prompt": 1000, "llm.cost.total": 0.5},
        ),
        span(4, 1, start=5, end=6, **{OI: "LLM", "llm.model_name": "gpt-x", "llm.token_count.prompt": 1000}),
        span(5, 1, start=6, end=7, **{OI: "TOOL", "tool.name": "t"}),
    ]
    prices = {"claude-haiku-4-5": 0.25}
    run = map_trace(spans, price=lambda model, spent: prices.get(model)).run
    assert run["steps"][0]["cost"] == 0.75  # priced 0.25 + declared 0.5 + unpriced 0
    assert run["metadata"]["model"] == "claude-haiku-4-5"
    assert "gpt-x" in run["metadata"]["otlp"]["inferred"]["cost"]


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        ' \n{"a": [1, {"b": "c\\u0000"}]}\t ',
        "[1, 2]",
        "[]",
        '{"a": 1} trailing',
        '{"a": 1}{"b": 2}',
        "[1] [2]",
        '{"a": NaN}',
        "[Infinity]",
        '{"a": 1',
        "{not json}",
        "[" * 100_000 + "]" * 100_000,
        "\u00a0{}\u00a0",
        "plain text",
        "",
    ],
)
def test_json_text_is_read_as_the_json_module_reads_it(text):
    def reference(value):  # the json module's own decode() of the stripped text, constants refused
        try:
            return json.JSONDecoder(parse_constant=lambda name: int("x")).decode(value.strip())
        except (ValueError, RecursionError):
            return value

    expected = reference(text) if text.strip()[:1] in ("{", "[") else text
    assert parsed(text) == expected
    assert parsed({"a": 1}) == {"a": 1} and parsed(None) is None
