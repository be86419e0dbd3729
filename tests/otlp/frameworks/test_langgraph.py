"""LangGraph's prebuilt ReAct agent with `openinference-instrumentation-langchain`, ChatOpenAI pointed at the
stand-in provider. The trace's root is the graph (`LangGraph`, a CHAIN span); each model turn is an "agent" node
(an AGENT span) beside the "tools" nodes, so no single agent span is the run: the root is."""

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
def agent(stand_in, tracer_provider):
    run, instrumentor = refund_agents.langgraph(stand_in.url, tracer_provider)
    yield run
    instrumentor.uninstrument()


def _run(agent):
    return lambda: agent(TASK)


def test_a_successful_run_arrives_whole(agent, stand_in, record, live_server, agent_token):
    script = stand_in.play(Script(calls=[LOOKUP, REFUND], answer="Refunded."))
    sent = record(_run(agent), url=live_server.url, token=agent_token)

    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "success")
    assert run.metadata["otlp"]["run_span"]["name"] == "LangGraph"
    assert run.metadata["model"] == "claude-haiku-4-5"
    # lookup_policy takes one argument: the TOOL span gives its bare value, the model's call names it. The
    # observations are the ToolMessages' content, not their serialized JSON.
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*REFUND, REFUNDED, True)])
    assert_usage(run, steps, script, [[0], [1, 2]])
    assert run_times(run) == root_times(sent.spans)


def test_a_run_whose_root_ends_in_error_is_a_failure_with_its_own_task_and_end(
    agent, stand_in, record, live_server, agent_token
):
    script = stand_in.play(Script(calls=[LOOKUP, TOO_MUCH]))
    sent = record(_run(agent), url=live_server.url, token=agent_token, expect_error=RuntimeError)

    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "failure")
    assert run_times(run) == root_times(sent.spans)  # the graph's span, not the first "agent" node's
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*TOO_MUCH, f"RuntimeError: {REFUSED}", False)])
    assert_usage(run, steps, script, [[0], [1]])
