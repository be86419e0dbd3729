"""pydantic-ai's native OpenTelemetry (no logfire): `InstrumentationSettings` with a plain TracerProvider, the
OpenAI chat model pointed at the stand-in provider."""

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
    return refund_agents.pydantic_ai(stand_in.url, tracer_provider)


def test_a_successful_run_arrives_whole(agent, stand_in, record, live_server, agent_token):
    script = stand_in.play(Script(calls=[LOOKUP, REFUND], answer="Refunded."))
    sent = record(lambda: agent(TASK), url=live_server.url, token=agent_token)

    run, steps = stored(sent.trace_id)
    # pydantic-ai leaves a successful run's status UNSET: success, and the run says the outcome was inferred.
    assert (run.task, run.outcome, run.source) == (TASK, "success", "refund-agent")
    assert run.metadata["otlp"]["inferred"]["outcome"].startswith("root span UNSET with a completed agent span")
    assert run.metadata["model"] == "claude-haiku-4-5"
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*REFUND, REFUNDED, True)])
    assert_usage(run, steps, script, [[0], [1, 2]])
    assert run_times(run) == root_times(sent.spans)


def test_a_run_whose_tool_raises_is_a_failure_that_keeps_the_error(agent, stand_in, record, live_server, agent_token):
    script = stand_in.play(Script(calls=[LOOKUP, TOO_MUCH]))
    sent = record(lambda: agent(TASK), url=live_server.url, token=agent_token, expect_error=RuntimeError)

    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "failure")
    assert "outcome" not in run.metadata["otlp"].get("inferred", {})
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*TOO_MUCH, f"RuntimeError: {REFUSED}", False)])
    assert_usage(run, steps, script, [[0], [1]])
    assert run_times(run) == root_times(sent.spans)
