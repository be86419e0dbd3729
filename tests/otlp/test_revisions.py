"""Runs say what they ran under, over OTLP (issue 27, item 2): `waymark.graph.workspace`, `waymark.graph.revision` and
`waymark.procedure.revision` on the agent span, the root span or the resource become the run's fields, as in the
JSON ingest. Spans come from the real OpenTelemetry SDK, posted to the OTLP endpoint in process."""

import hashlib

import pytest
from django.test import Client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from otlp.core.mapping import KNOWN_ATTRIBUTES
from otlp.models import PendingSpan
from trajectories.models import Run

from .agents import OTLP_PATH, _tracer, genai_agent, protobuf_body, trace_hex

pytestmark = pytest.mark.django_db
PROTOBUF = "application/x-protobuf"
PROCEDURE = hashlib.sha256(b"refund_request v3").hexdigest()
GRAPH = hashlib.sha256(b"support #4").hexdigest()
DECLARED = {
    "waymark.graph.workspace": "support",
    "waymark.graph.revision": GRAPH,
    "waymark.procedure.revision": PROCEDURE,
}


@pytest.fixture
def post(make_agent_token):
    token = make_agent_token("trajectories:write")
    client = Client()

    def send(spans):
        response = client.generic(
            "POST", OTLP_PATH, protobuf_body(spans), content_type=PROTOBUF, headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200, response.content
        return ExportTraceServiceResponse.FromString(response.content)

    return send


def revisions(run):
    return run.graph_workspace, run.graph_revision, run.procedure_revision


def test_the_agent_spans_attributes_become_the_runs_revisions(post):
    spans = genai_agent(attributes=DECLARED)
    assert not post(spans).HasField("partial_success")
    run = Run.objects.get(external_id=trace_hex(spans))
    assert revisions(run) == ("support", GRAPH, PROCEDURE)
    kept = run.metadata["otlp"]["attributes"]  # attributes the mapping did not consume
    assert "app.build" in kept and not {key for key in kept if key.startswith("waymark.")}


def test_the_resource_declares_them_for_every_run_and_the_agent_span_wins(post):
    from_resource = genai_agent(resource=DECLARED)
    overridden = genai_agent(resource=DECLARED, attributes={"waymark.procedure.revision": "v-agent"})
    post(from_resource)
    post(overridden)
    assert revisions(Run.objects.get(external_id=trace_hex(from_resource))) == ("support", GRAPH, PROCEDURE)
    assert revisions(Run.objects.get(external_id=trace_hex(overridden))) == ("support", GRAPH, "v-agent")


def test_the_root_span_declares_them_when_the_agent_runs_below_a_web_root(post):
    tracer, exporter, provider = _tracer("web-agent")
    web_root = tracer.start_as_current_span("POST /chat", attributes={"http.request.method": "POST", **DECLARED})
    agent_span = tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"})
    tool_attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_policy"}
    with web_root, agent_span, tracer.start_as_current_span("execute_tool lookup_policy", attributes=tool_attributes):
        pass
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    post(spans)
    run = Run.objects.get(external_id=trace_hex(spans))
    assert revisions(run) == ("support", GRAPH, PROCEDURE)
    assert [step.tool for step in run.steps.all()] == ["lookup_policy"]


def test_a_run_that_declares_none_records_none(post):
    spans = genai_agent()
    post(spans)
    assert revisions(Run.objects.get(external_id=trace_hex(spans))) == ("", "", "")


@pytest.mark.parametrize("bad", ["abc\u200bdef", "\u202e" + PROCEDURE[:20]])
def test_a_revision_the_ingest_refuses_is_reported_and_nothing_is_written(post, bad):
    spans = genai_agent(attributes={**DECLARED, "waymark.procedure.revision": bad})
    response = post(spans)
    assert response.HasField("partial_success")
    message = response.partial_success.error_message
    assert f"trace {trace_hex(spans)}" in message and "procedure_revision" in message
    assert not Run.objects.exists() and not PendingSpan.objects.exists()


def test_the_attribute_names_are_known_to_the_mapping():
    assert set(DECLARED) <= KNOWN_ATTRIBUTES
