"""otlp.core.mapping: one trace's spans onto one run in the ingest format (pure, no database)."""

import json

import pytest

from otlp.core.mapping import (
    MAX_TASK_CHARS,
    METADATA_MAX_CHARS,
    METADATA_MAX_KEYS,
    map_trace,
    moment,
    role,
    usage,
)
from otlp.core.spans import STATUS_ERROR, STATUS_OK, STATUS_UNSET
from otlp.core.values import count
from tests.helpers.otlp_spans import OI, SECOND, T0, TRACE, span


def agent(status=STATUS_OK, start=0, end=100, **attrs):
    return span(
        1,
        start=start,
        end=end,
        status=status,
        name="invoke_agent support",
        **{"gen_ai.operation.name": "invoke_agent", **attrs},
    )


def tool(span_id, name, start, *, parent=1, status=STATUS_UNSET, message="", **attrs):
    return span(
        span_id,
        parent,
        start=start,
        end=start + 2,
        status=status,
        message=message,
        name=f"execute_tool {name}",
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, **attrs},
    )


def chat(span_id, start, *, parent=1, input_tokens=800, cached=0, output=40, cost=None):
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output,
    }
    if cached:
        attrs["gen_ai.usage.cache_read.input_tokens"] = cached
    if cost is not None:
        attrs["waymark.cost"] = cost
    return span(span_id, parent, start=start, end=start + 1, name="chat", **attrs)


def test_roles_of_both_conventions():
    assert role(agent()) == "agent"
    assert role(tool(2, "x", 1)) == "tool"
    assert role(chat(3, 1)) == "model"
    assert role(span(4, 1, **{"openinference.span.kind": "AGENT"})) == "agent"
    assert role(span(4, 1, **{"openinference.span.kind": "tool"})) == "tool"
    assert role(span(4, 1, **{"openinference.span.kind": "LLM"})) == "model"
    assert role(span(4, 1, **{"openinference.span.kind": "CHAIN"})) is None
    assert role(span(4, 1, **{"http.request.method": "GET"})) is None


def test_a_genai_trace_becomes_a_run_with_ordered_steps_whatever_the_span_order():
    spans = [
        tool(
            5,
            "issue_refund",
            30,
            **{
                "gen_ai.tool.call.arguments": '{"order_id": "ORD-1", "amount": 39.9}',
                "gen_ai.tool.call.result": "Refund issued.",
            },
        ),
        agent(
            **{
                "gen_ai.input.messages": json.dumps(
                    [
                        {"role": "system", "parts": [{"type": "text", "content": "be nice"}]},
                        {"role": "user", "parts": [{"type": "text", "content": "Refund order ORD-1"}]},
                    ]
                ),
                "waymark.intent": "refund_request",
            }
        ),
        tool(
            3,
            "lookup_policy",
            10,
            **{"gen_ai.tool.call.arguments": '{"topic": "refunds"}', "gen_ai.tool.call.result": "30 days"},
        ),
    ]

    mapping = map_trace(spans)

    run = mapping.run
    assert mapping.problems == ()
    assert run["source"] == "support-agent" and run["external_id"] == TRACE
    assert run["task"] == "Refund order ORD-1" and run["intent"] == "refund_request"
    assert run["outcome"] == "success"
    assert run["started_at"] == moment(T0) and run["ended_at"] == moment(T0 + 100 * SECOND)
    assert [s["tool"] for s in run["steps"]] == ["lookup_policy", "issue_refund"]
    first, second = run["steps"]
    assert first["arguments"] == {"topic": "refunds"} and first["observation"] == "30 days" and first["ok"] is True
    assert second["arguments"] == {"order_id": "ORD-1", "amount": 39.9}
    assert first["started_at"] == moment(T0 + 10 * SECOND) and first["ended_at"] == moment(T0 + 12 * SECOND)
    assert mapping.span_ids == tuple(sorted(s.span_id for s in spans))


def test_model_calls_count_on_the_step_that_follows_encloses_or_closes_them():
    spans = [
        agent(),
        chat(2, 1, input_tokens=1000, cached=300, output=50, cost=0.004),  # before the first tool: it
        tool(3, "lookup_policy", 3),
        tool(4, "run_subagent", 10),
        chat(5, 11, parent=4, input_tokens=10, output=1),  # inside the second tool: that one
        chat(6, 20, input_tokens=100, output=7),  # after every tool: the last step
    ]

    steps = map_trace(spans).run["steps"]

    assert (steps[0]["input_tokens"], steps[0]["cached_input_tokens"], steps[0]["output_tokens"]) == (700, 300, 50)
    assert steps[0]["cost"] == pytest.approx(0.004)
    assert (steps[1]["input_tokens"], steps[1]["output_tokens"]) == (110, 8)


def test_model_calls_in_a_run_without_steps_are_kept_in_the_metadata():
    run = map_trace([agent(), chat(2, 1, input_tokens=100, output=5, cost=0.5)]).run
    assert run["steps"] == []
    assert run["metadata"]["otlp"]["usage_outside_steps"] == {
        "input_tokens": 100,
        "cached_input_tokens": 0,
        "output_tokens": 5,
        "cost": 0.5,
    }


@pytest.mark.parametrize(
    ("status", "declared", "expected"),
    [
        (STATUS_OK, "failure", "success"),
        (STATUS_ERROR, "success", "failure"),
        (STATUS_UNSET, "Failure", "failure"),
        (STATUS_UNSET, "success", "success"),
        # UNSET with a completed agent span: success (issue 25), named in metadata.otlp.inferred.
        (STATUS_UNSET, "maybe", "success"),
        (STATUS_UNSET, None, "success"),
    ],
)
def test_the_outcome_comes_from_the_root_status_then_the_declared_attribute(status, declared, expected):
    attrs = {"waymark.outcome": declared} if declared is not None else {}
    assert map_trace([agent(status=status, **attrs)]).run["outcome"] == expected


def test_a_tool_span_with_an_error_is_a_failed_step_observing_the_error():
    steps = map_trace(
        [
            agent(),
            tool(2, "issue_refund", 1, status=STATUS_ERROR, message="timeout"),
            tool(3, "notify", 5, **{"error.type": "ConnectionError", "gen_ai.tool.call.result": "partial"}),
            tool(4, "lookup", 8, status=STATUS_OK),
        ]
    ).run["steps"]
    # A failed step keeps its error beside what it returned.
    assert [(s["ok"], s["observation"]) for s in steps] == [
        (False, "timeout"),
        (False, "partial\nConnectionError"),
        (True, ""),
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2]", {"value": [1, 2]}),
        ("{not json", {"value": "{not json"}),
        ("plain text", {"value": "plain text"}),
        ('{"n": NaN}', {"value": '{"n": NaN}'}),
        (42, {"value": 42}),
        ("", {}),
    ],
)
def test_tool_arguments_are_an_object(raw, expected):
    step = map_trace([agent(), tool(2, "t", 1, **{"gen_ai.tool.call.arguments": raw})]).run["steps"][0]
    assert step["arguments"] == expected


def test_deeply_nested_arguments_are_cut_so_the_ingest_can_store_them():
    nested = current = {}
    for _ in range(60):
        current["x"] = {}
        current = current["x"]
    step = map_trace([agent(), tool(2, "t", 1, **{"gen_ai.tool.call.arguments": json.dumps(nested)})]).run["steps"][0]
    depth, node = 0, step["arguments"]
    while isinstance(node, dict) and "x" in node:
        node, depth = node["x"], depth + 1
    assert depth < 32 and node == "[nested too deep]"


def test_structured_results_become_json_text():
    step = map_trace([agent(), tool(2, "t", 1, **{"gen_ai.tool.call.result": ["a", 1]})]).run["steps"][0]
    assert step["observation"] == '["a", 1]'


def test_an_openinference_trace_maps_agent_tool_and_llm_spans():
    resource = {"service.name": "phoenix-agent"}
    spans = [
        span(
            1,
            start=0,
            end=50,
            status=STATUS_OK,
            resource=resource,
            **{"openinference.span.kind": "AGENT", "input.value": "Where is ORD-7?"},
        ),
        span(
            2,
            1,
            start=1,
            end=2,
            resource=resource,
            **{
                "openinference.span.kind": "LLM",
                "llm.token_count.prompt": 500,
                "llm.token_count.completion": 30,
                "llm.token_count.prompt_details.cache_read": 100,
            },
        ),
        span(
            3,
            1,
            start=3,
            end=4,
            resource=resource,
            **{
                "openinference.span.kind": "TOOL",
                "tool.name": "lookup_order",
                # OpenInference: tool.parameters is the tool's JSON schema; the call's arguments are input.value.
                "tool.parameters": '{"type": "object", "properties": {"order_id": {"type": "string"}}}',
                "input.value": '{"order_id": "ORD-7"}',
                "output.value": "shipped",
            },
        ),
        span(
            4,
            1,
            start=5,
            end=6,
            resource=resource,
            **{"openinference.span.kind": "TOOL", "tool.name": "notify", "input.value": '{"channel": "email"}'},
        ),
    ]
    run = map_trace(spans).run
    assert (run["source"], run["task"], run["outcome"]) == ("phoenix-agent", "Where is ORD-7?", "success")
    assert [(s["tool"], s["arguments"], s["observation"]) for s in run["steps"]] == [
        ("lookup_order", {"order_id": "ORD-7"}, "shipped"),
        ("notify", {"channel": "email"}, ""),
    ]
    assert (run["steps"][0]["input_tokens"], run["steps"][0]["cached_input_tokens"]) == (400, 100)
    assert run["steps"][0]["output_tokens"] == 30


def test_without_an_agent_span_the_root_stands_for_the_run_and_says_so():
    mapping = map_trace([span(1, start=0, end=9, name="POST /chat"), tool(2, "lookup", 1)])
    assert mapping.run["steps"][0]["tool"] == "lookup"
    assert mapping.run["outcome"] == "unknown"
    assert "no invoke_agent/AGENT span" in mapping.problems[0]
    assert mapping.run["metadata"]["otlp"]["problems"] == list(mapping.problems)


def test_the_outermost_agent_span_is_the_run_below_a_web_root():
    spans = [
        span(1, start=0, end=100, name="POST /agent"),
        span(
            2,
            1,
            start=1,
            end=99,
            status=STATUS_ERROR,
            name="outer",
            **{"gen_ai.operation.name": "invoke_agent", "waymark.task": "outer task"},
        ),
        span(
            3,
            2,
            start=2,
            end=50,
            status=STATUS_OK,
            name="inner",
            **{"gen_ai.operation.name": "invoke_agent", "waymark.task": "inner task"},
        ),
        tool(4, "lookup", 3, parent=3),
    ]
    run = map_trace(spans).run
    assert (run["task"], run["outcome"]) == ("outer task", "failure")
    assert run["metadata"]["otlp"]["run_span"]["name"] == "outer"
    assert [s["tool"] for s in run["steps"]] == ["lookup"]


def test_a_trace_with_nothing_to_map_is_not_a_run():
    mapping = map_trace([span(1, **{"http.request.method": "GET"})])
    assert mapping.run is None
    assert "it is not a run" in mapping.problems[0]
    assert map_trace([]).run is None


def test_a_trace_whose_root_never_came_takes_its_times_from_its_spans():
    mapping = map_trace([tool(2, "a", 5), tool(3, "b", 9)])
    assert mapping.run["started_at"] == moment(T0 + 5 * SECOND)
    assert mapping.run["ended_at"] == moment(T0 + 11 * SECOND)
    assert any("root span never arrived" in problem for problem in mapping.problems)


def test_steps_beyond_the_limit_are_dropped_and_reported():
    spans = [agent(), *(tool(10 + i, f"t{i}", i + 1) for i in range(5))]
    mapping = map_trace(spans, max_steps=3)
    assert [s["tool"] for s in mapping.run["steps"]] == ["t0", "t1", "t2"]
    assert "2 tool span(s) beyond 3 steps dropped" in mapping.problems[0]


def test_unknown_attributes_are_kept_in_the_metadata_within_bounds():
    extra = {f"app.k{i:03}": "v" for i in range(100)}
    extra["app.long"] = "x" * 5000
    resource = {"service.name": "svc", "host.name": "h1"}
    root = span(1, resource=resource, **{"gen_ai.operation.name": "invoke_agent", "waymark.intent": "i", **extra})
    otlp = map_trace([root]).run["metadata"]["otlp"]
    assert len(otlp["attributes"]) == METADATA_MAX_KEYS
    assert "waymark.intent" not in otlp["attributes"] and "gen_ai.operation.name" not in otlp["attributes"]
    assert otlp["attributes_left_out"] == 101 - METADATA_MAX_KEYS
    assert otlp["resource"] == {"host.name": "h1"}
    assert otlp["service"] == "svc"
    short = map_trace([span(1, **{"gen_ai.operation.name": "invoke_agent", "app.long": "x" * 5000})])
    assert len(short.run["metadata"]["otlp"]["attributes"]["app.long"]) == METADATA_MAX_CHARS


@pytest.mark.parametrize(
    ("resource", "attrs", "expected"),
    [
        ({"service.name": "svc"}, {}, "svc"),
        ({"service.name": "svc", "waymark.source": "declared"}, {}, "declared"),
        ({"service.name": "svc"}, {"waymark.source": "on-span"}, "on-span"),
        ({}, {}, "otlp"),
        ({"service.name": "   "}, {}, "otlp"),
    ],
)
def test_the_source(resource, attrs, expected):
    root = span(1, resource=resource, **{"gen_ai.operation.name": "invoke_agent", **attrs})
    assert map_trace([root]).run["source"] == expected


def test_the_task_from_waymark_task_first_and_capped():
    run = map_trace([agent(**{"waymark.task": "y" * (MAX_TASK_CHARS + 10), "input.value": "no"})]).run
    assert run["task"] == "y" * MAX_TASK_CHARS
    assert map_trace([agent(**{"gen_ai.input.messages": "not json"})]).run["task"] == "not json"


def test_text_that_no_database_can_hold_is_cleaned():
    run = map_trace([agent(**{"waymark.task": "a\x00b", "app.bad": "c\ud800d"})]).run
    assert run["task"] == "a\ufffdb"
    assert run["metadata"]["otlp"]["attributes"]["app.bad"] == "c\ufffdd"


def test_usage_counts_are_sane_whatever_was_sent():
    weird = span(
        2,
        1,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": "12",
            "gen_ai.usage.output_tokens": -5,
            "gen_ai.usage.cache_read.input_tokens": 50,
            "waymark.cost": "nan",
        },
    )
    spent = usage(weird)
    assert (spent.input_tokens, spent.cached_input_tokens, spent.output_tokens, spent.cost) == (0, 12, 0, 0.0)
    assert usage(span(3, 1, **{"gen_ai.usage.input_tokens": True})).input_tokens == 0
    assert usage(span(3, 1, **{"gen_ai.usage.input_tokens": 2**40})).input_tokens == 2**31 - 1


def test_repeated_spans_count_once():
    spans = [agent(), tool(2, "a", 1), tool(2, "a", 1)]
    assert len(map_trace(spans).run["steps"]) == 1


def test_declared_score_graph_and_procedure():
    declared = {
        "waymark.score": 0.75,
        "waymark.graph.workspace": "support",
        "waymark.graph.revision": "sha256:abc",
        "waymark.procedure.revision": "f" * 64,
    }
    run = map_trace([agent(**declared)]).run
    assert (run["score"], run["graph_workspace"], run["graph_revision"]) == (0.75, "support", "sha256:abc")
    assert run["procedure_revision"] == "f" * 64
    assert map_trace([agent()]).run["procedure_revision"] == ""
    assert map_trace([agent(**{"waymark.procedure.revision": "r" * 300})]).run["procedure_revision"] == "r" * 100
    assert map_trace([agent(**{"waymark.score": "high"})]).run["score"] is None


def test_calls_sharing_a_step_add_up_and_a_step_without_a_call_spends_nothing():
    spans = [
        agent(),
        chat(2, 1, input_tokens=100, cached=30, output=5, cost=0.25),
        chat(3, 2, input_tokens=2**31 - 1, output=7, cost=0.5),
        tool(4, "lookup", 4),
        tool(5, "refund", 7),
        chat(6, 10, input_tokens=10, output=1),
    ]
    steps = map_trace(spans).run["steps"]
    spent = [(s["input_tokens"], s["cached_input_tokens"], s["output_tokens"], s["cost"]) for s in steps]
    assert spent == [(2**31 - 1, 30, 12, 0.75), (10, 0, 1, 0.0)]
    assert len(steps) == 2


def test_the_model_is_read_from_whichever_span_names_one():
    named = span(3, 1, start=1, end=2, name="chat", **{"gen_ai.operation.name": "chat", "gen_ai.request.model": " m1 "})
    blank = span(2, 1, start=0, end=1, name="chat", **{"gen_ai.operation.name": "chat", "llm.model_name": ""})
    assert map_trace([agent(), blank, named]).run["metadata"]["model"] == "m1"
    assert "model" not in map_trace([agent(), blank]).run["metadata"]
    assert map_trace([agent(model_name="run-model"), named]).run["metadata"]["model"] == "run-model"


def test_role_reads_the_operation_alone_as_both_conventions_together():
    def general(operation, kind):  # the rule with both conventions, as documented
        kind = kind.upper() if isinstance(kind, str) else None
        if operation == "invoke_agent" or kind == "AGENT":
            return "agent"
        if operation == "execute_tool" or kind == "TOOL":
            return "tool"
        if operation in ["chat", "text_completion", "generate_content"] or kind == "LLM":
            return "model"
        return None

    operations = [None, "invoke_agent", "execute_tool", "chat", "text_completion", "generate_content", "Chat", "", 7]
    operations += [["chat"], {"name": "chat"}]  # array and map values (an unhashable operation) name no operation
    for operation in operations:
        for kind in [None, "AGENT", "tool", "LLM", "CHAIN", 3]:
            attrs = {
                key: value for key, value in (("gen_ai.operation.name", operation), (OI, kind)) if value is not None
            }
            assert role(span(2, 1, **attrs)) == general(operation, kind), (operation, kind)


@pytest.mark.parametrize(
    "value", [5, 0, -3, 2**40, True, False, "12", " 7 ", "x", 3.0, 2.5, float("nan"), "", None, [1]]
)
def test_a_token_count_on_the_first_key_reads_as_the_general_rule(value):
    """The first key's plain int is read at once; anything else by `count`, an empty value falling back to the next
    key."""
    spent = usage(span(2, 1, **{"gen_ai.usage.input_tokens": value, "gen_ai.usage.prompt_tokens": 9}))
    assert spent.input_tokens == (9 if value is None or value == "" else count(value))
