"""Over real HTTP: the OpenTelemetry SDK's own OTLP/HTTP exporter (protobuf, plain and gzip) and an OTLP JSON body
built from the same spans, in several batches and out of order, against a live server."""

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from otlp.models import PendingSpan, Trace, TraceStatus
from tests.helpers.otlp_spans import micros
from trajectories.models import Run

from .agents import (
    OTLP_PATH,
    PLAN,
    genai_agent,
    json_body,
    openinference_agent,
    protobuf_body,
    root_last_batches,
    trace_hex,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
def token(transactional_db, make_agent_token):
    return make_agent_token("trajectories:write")


def exporter(live_server, token, **kwargs):
    return OTLPSpanExporter(
        endpoint=live_server.url + OTLP_PATH, headers={"Authorization": f"Bearer {token}"}, timeout=10, **kwargs
    )


def the_run(spans):
    run = Run.objects.get(external_id=trace_hex(spans))
    return run, list(run.steps.order_by("ordinal"))


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_the_sdk_exporter_sends_a_trace_in_batches_out_of_order(live_server, token, compression):
    spans = genai_agent()
    sender = exporter(live_server, token, compression=compression)
    for batch in root_last_batches(spans):
        assert sender.export(batch) is SpanExportResult.SUCCESS

    run, steps = the_run(spans)
    assert Run.objects.count() == 1
    assert (run.source, run.outcome, run.intent) == ("support-agent", "success", "refund_request")
    assert [s.tool for s in steps] == [tool for tool, _, _ in PLAN]
    tool_spans = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert [micros(s.started_at) for s in steps] == [s.start_time // 1000 for s in tool_spans]
    assert [micros(s.ended_at) for s in steps] == [s.end_time // 1000 for s in tool_spans]
    assert Trace.objects.get().status == TraceStatus.WRITTEN and not PendingSpan.objects.exists()

    for batch in [*root_last_batches(spans), spans]:  # resending changes nothing
        assert sender.export(batch) is SpanExportResult.SUCCESS
    assert Run.objects.count() == 1
    assert the_run(spans)[1] == steps
    sender.shutdown()


def test_a_json_body_of_the_same_spans(live_server, token):
    spans = genai_agent(failing_tool="issue_refund")
    url = live_server.url + OTLP_PATH
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with requests.Session() as client:
        for batch in root_last_batches(spans):
            response = client.post(url, data=json_body(batch), headers=headers, timeout=10)
            assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
            assert response.json() == {}
        resent = client.post(url, data=json_body(spans), headers=headers, timeout=10)
        assert resent.json() == {}
    run, steps = the_run(spans)
    assert run.outcome == "success" and [s.ok for s in steps] == [True, True, False]
    assert Run.objects.count() == 1


def test_malformed_unauthenticated_and_unscoped_requests_write_nothing(live_server, token, make_agent_token):
    spans = genai_agent()
    url = live_server.url + OTLP_PATH
    bearer = {"Authorization": f"Bearer {token}"}
    with requests.Session() as client:
        malformed = client.post(
            url, data=b"\x0a\xff\xff", headers={**bearer, "Content-Type": "application/x-protobuf"}, timeout=10
        )
        assert malformed.status_code == 400 and malformed.json()["code"] == "malformed_otlp"
        bad_json = client.post(url, data=b"{", headers={**bearer, "Content-Type": "application/json"}, timeout=10)
        assert bad_json.status_code == 400
    assert exporter(live_server, "wm_wrong_token").export(spans) is SpanExportResult.FAILURE
    unscoped = make_agent_token("evaluations:run", name="evaluator")
    assert exporter(live_server, unscoped).export(spans) is SpanExportResult.FAILURE
    with requests.Session() as client:
        headers = {"Authorization": f"Bearer {unscoped}", "Content-Type": "application/x-protobuf"}
        assert client.post(url, data=protobuf_body(spans), headers=headers, timeout=10).status_code == 403
        headers["Authorization"] = "Bearer wm_wrong_token"
        assert client.post(url, data=protobuf_body(spans), headers=headers, timeout=10).status_code == 401
    assert not Run.objects.exists() and not Trace.objects.exists() and not PendingSpan.objects.exists()


def test_an_openinference_trace_through_the_exporter(live_server, token):
    spans = openinference_agent()
    sender = exporter(live_server, token, compression=Compression.Gzip)
    for batch in root_last_batches(spans):
        assert sender.export(batch) is SpanExportResult.SUCCESS
    assert sender.export(spans) is SpanExportResult.SUCCESS
    run, steps = the_run(spans)
    assert (run.source, run.outcome) == ("phoenix-agent", "success")
    assert [(s.tool, s.arguments, s.observation) for s in steps] == [
        ("lookup_order", {"order_id": "ORD-7"}, "shipped"),
        ("notify", {"channel": "email"}, "sent"),
    ]
    assert Run.objects.count() == 1
    sender.shutdown()
