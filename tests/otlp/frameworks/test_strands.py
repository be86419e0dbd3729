"""strands-agents' native OpenTelemetry (the global TracerProvider), its OpenAI model provider on the stand-in.
By default strands puts messages, tool arguments and tool results in span events, not attributes."""

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
    return refund_agents.strands(stand_in.url)


def test_a_successful_run_arrives_whole(agent, stand_in, record, live_server, agent_token):
    script = stand_in.play(Script(calls=[LOOKUP, REFUND], answer="Refunded."))
    sent = record(lambda: agent(TASK), url=live_server.url, token=agent_token)

    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "success")
    assert run.metadata["model"] == "claude-haiku-4-5"
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*REFUND, REFUNDED, True)])
    assert_usage(run, steps, script, [[0], [1, 2]])
    assert run_times(run) == root_times(sent.spans)


def test_a_failing_run_keeps_the_failed_tool_and_ends_in_failure(agent, stand_in, record, live_server, agent_token):
    # issue_refund raises (strands hands the error to the model as the result), then the provider refuses the
    # next request: the agent raises and its span ends in ERROR.
    script = stand_in.play(Script(calls=[LOOKUP, TOO_MUCH], fail_at=2))
    sent = record(lambda: agent(TASK), url=live_server.url, token=agent_token, expect_error=Exception)

    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "failure")
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*TOO_MUCH, f"Error: RuntimeError - {REFUSED}", False)])
    assert_usage(run, steps, script, [[0], [1]])
    assert run_times(run) == root_times(sent.spans)
