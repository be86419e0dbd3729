"""The OpenAI Agents SDK with `openinference-instrumentation-openai-agents` (its processor replaces the SDK's own
exporter to OpenAI, so nothing leaves the machine), the chat-completions model on the stand-in provider."""

from __future__ import annotations

import pytest

from . import refund_agents
from .expect import (
    LOOKUP,
    POLICY,
    REFUND,
    REFUNDED,
    REFUSED,
    TASK,
    TOO_MUCH,
    assert_steps,
    assert_usage,
    root_times,
    run_times,
    stored,
)
from .provider import Script

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def agents_sdk(stand_in, tracer_provider):
    lenient, instrumentor = refund_agents.openai_agents(stand_in.url, tracer_provider)
    strict, _ = refund_agents.openai_agents(stand_in.url, tracer_provider, strict=True)
    yield {"lenient": lenient, "strict": strict}
    instrumentor.uninstrument()


def _run(agent):
    return lambda: agent(TASK)


def test_a_successful_run_arrives_whole(agents_sdk, stand_in, record, live_server, agent_token):
    script = stand_in.play(Script(calls=[LOOKUP, REFUND], answer="Refunded."))
    sent = record(_run(agents_sdk["lenient"]), url=live_server.url, token=agent_token)

    run, steps = stored(sent.trace_id)
    # The arguments are the call's (input.value), not the tool's schema (tool.parameters); the task is the first
    # user message, which only the model calls carry.
    assert (run.task, run.outcome) == (TASK, "success")
    assert run.metadata["otlp"]["inferred"]["task"].startswith("the first user message of the first model call")
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*REFUND, REFUNDED, True)])
    assert_usage(run, steps, script, [[0], [1, 2]])
    assert run_times(run) == root_times(sent.spans)


def test_a_tool_error_the_agent_recovers_from_is_a_failed_step_in_a_successful_run(
    agents_sdk, stand_in, record, live_server, agent_token
):
    stand_in.play(Script(calls=[LOOKUP, TOO_MUCH], answer="I could not refund it."))
    sent = record(_run(agents_sdk["lenient"]), url=live_server.url, token=agent_token)

    run, steps = stored(sent.trace_id)
    assert run.outcome == "success"
    assert [(s.tool, s.ok) for s in steps] == [("lookup_policy", True), ("issue_refund", False)]
    assert steps[1].arguments == TOO_MUCH[1]
    # What the model was told, and the error the span recorded (the SDK redacts its details by default).
    assert steps[1].observation.startswith("An error occurred while running the tool")
    assert "Error running tool (non-fatal)" in steps[1].observation


def test_a_run_whose_agent_raises_is_a_failure_though_its_trace_span_says_ok(
    agents_sdk, stand_in, record, live_server, agent_token
):
    from agents.exceptions import AgentsException

    script = stand_in.play(Script(calls=[LOOKUP, TOO_MUCH]))
    sent = record(_run(agents_sdk["strict"]), url=live_server.url, token=agent_token, expect_error=AgentsException)

    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "failure")
    assert "ended in ERROR" in run.metadata["otlp"]["inferred"]["outcome"]
    assert [(s.tool, s.arguments, s.ok) for s in steps] == [(*LOOKUP, True), (*TOO_MUCH, False)]
    assert REFUSED in steps[1].observation
    assert_usage(run, steps, script, [[0], [1]])
