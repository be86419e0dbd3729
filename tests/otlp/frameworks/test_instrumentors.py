"""Instrumentors alone — no agent framework, no agent or tool span: the application's own loop calls the model SDK
(openai with `opentelemetry-instrumentation-openai-v2` or OpenInference's openai instrumentor; anthropic with
OpenInference's, under which the Anthropic SDK's own span nests) inside one span of its own. The trace is the run;
its steps are the tool calls in the models' output messages, their results those the next call was sent."""

from __future__ import annotations

import json

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import Status, StatusCode

from otlp.models import Trace, TraceStatus
from tests.otlp.agents import OTLP_PATH
from trajectories.models import Run

from .expect import LOOKUP, POLICY, REFUND, REFUNDED, TASK, assert_steps, assert_usage, stored
from .provider import Script

pytestmark = pytest.mark.postgres

TOOLS = {"lookup_policy": lambda topic: POLICY, "issue_refund": lambda order_id, amount: REFUNDED}


def openai_loop(client) -> None:
    schema = {"type": "object", "properties": {}}
    tools = [{"type": "function", "function": {"name": name, "parameters": schema}} for name in TOOLS]
    messages = [{"role": "system", "content": "You are a support agent."}, {"role": "user", "content": TASK}]
    while True:
        reply = client.chat.completions.create(model="claude-haiku-4-5", messages=messages, tools=tools)
        message = reply.choices[0].message
        if not message.tool_calls:
            return
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = TOOLS[call.function.name](**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def anthropic_loop(client) -> None:
    tools = [{"name": name, "input_schema": {"type": "object", "properties": {}}} for name in TOOLS]
    messages = [{"role": "user", "content": TASK}]
    while True:
        reply = client.messages.create(
            model="claude-haiku-4-5", max_tokens=512, system="You are a support agent.", messages=messages, tools=tools
        )
        uses = [block for block in reply.content if block.type == "tool_use"]
        if not uses:
            return
        messages.append(
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in reply.content]}
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": TOOLS[use.name](**use.input)}
                    for use in uses
                ],
            }
        )


@pytest.fixture(scope="module")
def clients(stand_in, tracer_provider):
    import anthropic
    import openai

    return {
        "openai": openai.OpenAI(base_url=stand_in.url + "/v1", api_key="k"),
        "anthropic": anthropic.Anthropic(
            base_url=stand_in.url, api_key="k", open_telemetry={"tracer_provider": tracer_provider}
        ),
    }


@pytest.fixture(scope="module")
def openai_v2(tracer_provider):
    import os

    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    saved = {
        key: os.environ.get(key)
        for key in ("OTEL_SEMCONV_STABILITY_OPT_IN", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    }
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    yield
    instrumentor.uninstrument()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def openinference_openai(tracer_provider):
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    yield
    instrumentor.uninstrument()


@pytest.fixture(scope="module")
def openinference_anthropic(tracer_provider):
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    yield
    instrumentor.uninstrument()


def in_a_span(tracer_provider, loop, client):
    def run():
        with tracer_provider.get_tracer("refund-app").start_as_current_span("refund request") as span:
            loop(client)
            span.set_status(Status(StatusCode.OK))

    return run


def check_the_run(sent, script, outcome="success"):
    run, steps = stored(sent.trace_id)
    assert Run.objects.count() == 1  # one run per trace, not one per model call
    assert (run.task, run.outcome) == (TASK, outcome)
    assert run.metadata["model"] == "claude-haiku-4-5"
    inferred = run.metadata["otlp"]["inferred"]
    assert inferred["steps"].startswith("the tool calls in the model calls' output messages")
    assert inferred["task"].startswith("the first user message of the first model call")
    return run, steps


def test_openai_v2_gives_one_run_per_trace_with_the_tool_calls_it_recorded(
    openai_v2, clients, stand_in, tracer_provider, record, live_server, agent_token
):
    script = stand_in.play(Script(calls=[LOOKUP, REFUND], answer="Refunded."))
    sent = record(in_a_span(tracer_provider, openai_loop, clients["openai"]), url=live_server.url, token=agent_token)
    run, steps = check_the_run(sent, script)
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*REFUND, REFUNDED, True)])
    assert_usage(run, steps, script, [[0], [1, 2]])


def test_openinference_openai_gives_one_run_per_trace(
    openinference_openai, clients, stand_in, tracer_provider, record, live_server, agent_token
):
    script = stand_in.play(Script(calls=[LOOKUP, REFUND], answer="Refunded."))
    sent = record(in_a_span(tracer_provider, openai_loop, clients["openai"]), url=live_server.url, token=agent_token)
    run, steps = check_the_run(sent, script)
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*REFUND, REFUNDED, True)])
    assert_usage(run, steps, script, [[0], [1, 2]])


def test_a_model_call_seen_by_two_instrumentations_counts_once(
    openinference_anthropic, clients, stand_in, tracer_provider, record, live_server, agent_token
):
    script = stand_in.play(Script(calls=[LOOKUP, REFUND], answer="Refunded."))
    loop = in_a_span(tracer_provider, anthropic_loop, clients["anthropic"])
    sent = record(loop, url=live_server.url, token=agent_token)
    assert sum(1 for s in sent.spans if s.instrumentation_scope.name == "com.anthropic.sdk.python") == 3
    run, steps = check_the_run(sent, script)
    assert run.metadata["otlp"]["nested_model_spans"] == 3
    assert_steps(steps, [(*LOOKUP, POLICY, True), (*REFUND, REFUNDED, True)])
    assert_usage(run, steps, script, [[0], [1, 2]])  # 390 + 63 tokens, not twice that


def check_the_failed_run(sent, script, error: str):
    """A loop whose second model call the provider refused: one run, a failure that keeps the error, the task, the
    one step the first call asked for (its result was sent with the refused call), that call's tokens and cost."""
    run, steps = check_the_run(sent, script, outcome="failure")
    assert run.metadata["otlp"]["run_span"]["name"] == "refund request"
    assert run.metadata["otlp"]["error"] == error
    assert_steps(steps, [(*LOOKUP, POLICY, True)])
    assert_usage(run, steps, script, [[0]])  # the refused call spent nothing
    return run


def test_a_failing_openai_v2_loop_is_a_failure_that_keeps_the_error(
    openai_v2, clients, stand_in, tracer_provider, record, live_server, agent_token
):
    import openai

    script = stand_in.play(Script(calls=[LOOKUP, REFUND], fail_at=1))
    loop = in_a_span(tracer_provider, openai_loop, clients["openai"])
    sent = record(loop, url=live_server.url, token=agent_token, expect_error=openai.BadRequestError)
    refused = [s for s in sent.spans if s.status.status_code == StatusCode.ERROR and s.name.startswith("chat ")]
    assert len(refused) == 1 and refused[0].attributes["error.type"]  # the GenAI span of the refused call
    check_the_failed_run(sent, script, "openai.BadRequestError: Error code: 400 - stand-in: the request was refused")


def test_a_failing_anthropic_loop_under_two_instrumentations_counts_its_tokens_once(
    openinference_anthropic, clients, stand_in, tracer_provider, record, live_server, agent_token
):
    import anthropic

    script = stand_in.play(Script(calls=[LOOKUP, REFUND], fail_at=1))
    loop = in_a_span(tracer_provider, anthropic_loop, clients["anthropic"])
    sent = record(loop, url=live_server.url, token=agent_token, expect_error=anthropic.BadRequestError)
    sdk_spans = [s for s in sent.spans if s.instrumentation_scope.name == "com.anthropic.sdk.python"]
    assert [s.status.status_code for s in sdk_spans] == [StatusCode.OK, StatusCode.ERROR]  # each call seen twice
    run = check_the_failed_run(
        sent,
        script,
        "anthropic.BadRequestError: Error code: 400 - {'type': 'error', 'error': "
        "{'type': 'invalid_request_error', 'message': 'stand-in: the request was refused'}}",
    )
    assert run.metadata["otlp"]["nested_model_spans"] == 2
    assert run.total_tokens == sum(script.usage(0))  # 120 + 20, not twice that


def test_a_failing_loop_is_a_failure(
    openinference_openai, clients, stand_in, tracer_provider, record, live_server, agent_token
):
    import openai

    stand_in.play(Script(calls=[LOOKUP, REFUND], fail_at=1))
    loop = in_a_span(tracer_provider, openai_loop, clients["openai"])
    sent = record(loop, url=live_server.url, token=agent_token, expect_error=openai.BadRequestError)
    run, steps = stored(sent.trace_id)
    assert (run.task, run.outcome) == (TASK, "failure")
    # The refused second call was still sent the first call's result: that is the step's observation.
    assert_steps(steps, [(*LOOKUP, POLICY, True)])
    assert run.metadata["otlp"]["run_span"]["name"] == "refund request"


class AnswerKeeper(requests.Session):
    """The exporter's HTTP session, keeping each answer the collector sent back (the exporter itself only says
    SUCCESS or FAILURE)."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[requests.Response] = []

    def request(self, *args, **kwargs):
        response = super().request(*args, **kwargs)
        self.answers.append(response)
        return response


def test_a_lone_model_call_is_refused_with_the_reason(
    openinference_openai, clients, stand_in, tracer_provider, live_server, agent_token
):
    from .conftest import RECORDER

    stand_in.play(Script(calls=[LOOKUP]))
    RECORDER.take()
    RECORDER.recording = True
    try:
        openai_loop_once = clients["openai"].chat.completions.create
        openai_loop_once(model="claude-haiku-4-5", messages=[{"role": "user", "content": TASK}])
        tracer_provider.force_flush()
    finally:
        RECORDER.recording = False
    spans = RECORDER.take()
    # One model call and nothing around it (seen by each instrumentation this module turned on: nested spans).
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1 and {s.context.trace_id for s in spans} == {roots[0].context.trace_id}
    trace_id = format(roots[0].context.trace_id, "032x")

    session = AnswerKeeper()
    exporter = OTLPSpanExporter(
        endpoint=live_server.url + OTLP_PATH,
        headers={"Authorization": f"Bearer {agent_token}"},
        timeout=10,
        session=session,
    )
    assert exporter.export(spans) == SpanExportResult.SUCCESS  # a partial success is a 200
    exporter.shutdown()

    (answer,) = session.answers
    assert (answer.status_code, answer.headers["Content-Type"]) == (200, "application/x-protobuf")
    partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
    assert partial.rejected_spans == len(spans)
    assert partial.error_message.startswith(f"trace {trace_id}: a lone model call ({roots[0].name!r})")
    assert "Waymark does not store a run per model call" in partial.error_message
    assert "start one span around each agent run" in partial.error_message

    assert not Run.objects.exists()
    trace = Trace.objects.get(trace_id=trace_id)
    assert trace.status == TraceStatus.DISCARDED
    assert trace.problems == [partial.error_message]
