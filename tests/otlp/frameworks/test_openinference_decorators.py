"""OpenInference's own decorators (`openinference-instrumentation`'s OITracer): an agent written by hand with
`@tracer.agent` and `@tracer.tool`. Each TOOL span carries the tool's JSON schema in `tool.parameters` and the call's
arguments in `input.value`: the stored step's arguments are the call's, never the schema (issue 25)."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import StatusCode

from .expect import (
    LOOKUP,
    POLICY,
    REFUND,
    REFUNDED,
    REFUSED,
    TASK,
    TOO_MUCH,
    assert_steps,
    issue_refund_text,
    lookup_policy_text,
    root_times,
    run_times,
    stored,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def support(tracer_provider):
    """support(order_id, amount): the refund agent, its tools called positionally and by keyword."""
    from openinference.instrumentation import OITracer, TraceConfig

    tracer = OITracer(tracer_provider.get_tracer("refund-app"), config=TraceConfig())

    @tracer.tool
    def lookup_policy(topic: str) -> str:
        """The refund policy on a topic."""
        return lookup_policy_text(topic)

    @tracer.tool(name="issue_refund", description="Refund an order.")
    def issue_refund(order_id: str, amount: float) -> str:
        return issue_refund_text(order_id, amount)

    def agent(order_id: str, amount: float):
        @tracer.agent(name="support")
        def run(task: str) -> str:
            lookup_policy("refunds")  # positional: recorded under the parameter's name
            return issue_refund(order_id=order_id, amount=amount)

        return lambda: run(TASK)

    return agent


def tool_spans(sent) -> dict[str, dict]:
    return {s.name: dict(s.attributes) for s in sent.spans if s.attributes.get("openinference.span.kind") == "TOOL"}


def test_a_tool_steps_arguments_are_the_calls_not_the_schema(support, record, live_server, agent_token):
    sent = record(support("ORD-4101", 39.9), url=live_server.url, token=agent_token)

    spans = tool_spans(sent)
    for name, arguments in (LOOKUP, REFUND):  # what the decorator recorded: the schema beside the arguments
        schema = json.loads(spans[name]["tool.parameters"])
        assert schema["type"] == "object" and set(schema["properties"]) == set(arguments) != set(schema)
        assert json.loads(spans[name]["input.value"]) == arguments

    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "success")
    assert run.metadata["otlp"]["run_span"]["name"] == "support"
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*REFUND, REFUNDED, True)])
    assert all("properties" not in step.arguments and "type" not in step.arguments for step in steps)
    assert run_times(run) == root_times(sent.spans)


def test_a_tool_that_raises_is_a_failed_step_with_its_arguments_and_the_run_a_failure(
    support, record, live_server, agent_token
):
    sent = record(support("ORD-4101", 399.0), url=live_server.url, token=agent_token, expect_error=RuntimeError)
    assert tool_spans(sent)["issue_refund"]["input.value"] == json.dumps(TOO_MUCH[1])
    assert [s.status.status_code for s in sent.spans if s.name == "issue_refund"] == [StatusCode.ERROR]

    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "failure")
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*TOO_MUCH, f"RuntimeError: {REFUSED}", False)])
    assert run.metadata["otlp"]["error"] == f"RuntimeError: {REFUSED}"
