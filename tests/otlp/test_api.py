"""POST /api/v1/otlp/v1/traces in process: spans from the real SDK, sent in batches and out of order, become one run;
resends change nothing; refusals answer the API's Error body and write nothing."""

import gzip
import json
import zlib
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.trace import StatusCode

from accounts.models import AuditEvent
from otlp import services
from otlp.models import PendingSpan, Trace, TraceStatus
from tests.helpers.otlp_spans import micros
from trajectories.models import Run, Step

from .agents import (
    OTLP_PATH,
    PLAN,
    TASK,
    genai_agent,
    json_body,
    openinference_agent,
    plain_http_trace,
    protobuf_body,
    root_last_batches,
    trace_hex,
)

PROTOBUF = "application/x-protobuf"


@pytest.fixture
def token(make_agent_token):
    return make_agent_token("trajectories:write")


@pytest.fixture
def post(token):
    client = Client()

    def send(body, *, content_type=PROTOBUF, auth=None, **headers):
        headers.setdefault("Authorization", f"Bearer {auth or token}")
        return client.generic("POST", OTLP_PATH, body, content_type=content_type, headers=headers)

    return send


def answer(response):
    assert response.status_code == 200, response.content
    if response["Content-Type"] == PROTOBUF:
        return ExportTraceServiceResponse.FromString(response.content)
    assert response["Content-Type"] == "application/json"
    return json.loads(response.content)


def nothing_written():
    return not Run.objects.exists() and not Trace.objects.exists() and not PendingSpan.objects.exists()


def test_a_trace_sent_in_batches_out_of_order_becomes_one_run_once_its_root_arrives(db, post):
    spans = genai_agent()
    *early, last = root_last_batches(spans)
    for batch in early:
        response = answer(post(protobuf_body(batch)))
        assert not response.HasField("partial_success")
        assert not Run.objects.exists()
    assert PendingSpan.objects.count() == len(spans) - 1

    assert not answer(post(protobuf_body(last))).HasField("partial_success")

    run = Run.objects.get()
    assert (run.source, run.external_id) == ("support-agent", trace_hex(spans))
    assert (run.task, run.intent, run.outcome) == (TASK, "refund_request", "success")
    root = spans[-1]
    assert micros(run.started_at) == root.start_time // 1000  # stored to the microsecond, truncated
    assert micros(run.ended_at) == root.end_time // 1000  # stored to the microsecond, truncated
    steps = list(run.steps.order_by("ordinal"))
    assert [s.tool for s in steps] == [tool for tool, _, _ in PLAN]
    tool_spans = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    for step, span in zip(steps, tool_spans, strict=True):
        assert micros(step.started_at) == span.start_time // 1000  # stored to the microsecond, truncated
        assert micros(step.ended_at) == span.end_time // 1000  # stored to the microsecond, truncated
        assert step.ok is True
    assert steps[0].arguments == {"topic": "refunds"} and steps[0].observation == "Refunds within 30 days."
    assert steps[1].observation == '{"status": "active"}'
    # each chat before a tool: 600 uncached + 200 cached in, 40 out; the closing chat goes to the last step
    assert [(s.input_tokens, s.cached_input_tokens, s.output_tokens) for s in steps] == [
        (600, 200, 40),
        (600, 200, 40),
        (700, 200, 60),
    ]
    assert run.total_tokens == 3 * 840 + 120 and run.cost == pytest.approx(0.009)
    assert run.metadata["otlp"]["attributes"] == {"app.build": "2026.12.1"}
    assert run.metadata["otlp"]["agent"] == "support"
    assert run.metadata["otlp"]["resource"]["deployment.environment"] == "test"
    trace = Trace.objects.get()
    assert (trace.status, trace.run_id, len(trace.span_ids)) == (TraceStatus.WRITTEN, run.pk, len(spans))
    assert not PendingSpan.objects.exists()
    assert AuditEvent.objects.filter(verb="trajectories.ingest").count() == 1


def test_resending_every_batch_changes_nothing(db, post):
    spans = genai_agent()
    for batch in root_last_batches(spans):
        post(protobuf_body(batch))
    run = Run.objects.get()
    before = (run.pk, list(Step.objects.values_list("id", "tool", "input_tokens")), Trace.objects.get().late_spans)

    for batch in [*root_last_batches(spans), spans]:
        assert not answer(post(protobuf_body(batch))).HasField("partial_success")

    run = Run.objects.get()
    after = (run.pk, list(Step.objects.values_list("id", "tool", "input_tokens")), Trace.objects.get().late_spans)
    assert after == before
    assert not PendingSpan.objects.exists()


def test_a_span_after_the_run_is_refused_and_reported(db, post):
    spans = genai_agent()
    *children, root = spans
    post(protobuf_body([root, *children[:2]]))  # the root in the first batch: the run is written at once
    run = Run.objects.get()
    assert run.steps.count() == 1

    response = answer(post(protobuf_body(children[2:])))

    assert response.partial_success.rejected_spans == len(children) - 2
    assert f"trace {trace_hex(spans)}" in response.partial_success.error_message
    assert "already written" in response.partial_success.error_message
    assert Run.objects.get().steps.count() == 1
    assert Trace.objects.get().late_spans == len(children) - 2
    assert not PendingSpan.objects.exists()


def test_the_json_encoding_is_answered_in_json(db, post):
    spans = genai_agent()
    for batch in root_last_batches(spans):
        assert answer(post(json_body(batch), content_type="application/json")) == {}
    run = Run.objects.get()
    assert run.external_id == trace_hex(spans) and run.steps.count() == len(PLAN)


def test_protobuf_and_json_of_the_same_trace_are_one_run(db, post):
    spans = genai_agent()
    post(protobuf_body(spans))
    assert answer(post(json_body(spans), content_type="application/json")) == {}
    assert Run.objects.count() == 1


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_bodies(db, post, encoding):
    spans = genai_agent()
    body = gzip.compress(protobuf_body(spans)) if encoding == "gzip" else zlib.compress(protobuf_body(spans))
    assert not answer(post(body, **{"Content-Encoding": encoding})).HasField("partial_success")
    assert Run.objects.get().steps.count() == len(PLAN)


@pytest.mark.parametrize(
    ("body", "content_type", "headers"),
    [
        (b"\xff\xff\xff\xff", PROTOBUF, {}),
        (b"{not json", "application/json", {}),
        (b'{"resourceSpans": "nope"}', "application/json", {}),
        (b"not gzip at all", PROTOBUF, {"Content-Encoding": "gzip"}),
        (gzip.compress(b"\xff\xff\xff\xff", mtime=0), PROTOBUF, {"Content-Encoding": "gzip"}),
        (gzip.compress(b"x" * 100, mtime=0)[:-12], PROTOBUF, {"Content-Encoding": "gzip"}),
    ],
)
def test_a_malformed_body_answers_400_and_writes_nothing(db, post, body, content_type, headers):
    response = post(body, content_type=content_type, **headers)
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_otlp"
    assert nothing_written()


def test_a_body_mixing_good_and_malformed_json_writes_nothing(db, post):
    document = json.loads(json_body(genai_agent()))
    document["resourceSpans"].append({"scopeSpans": [{"spans": [{"endTimeUnixNano": "later"}]}]})
    assert post(json.dumps(document).encode(), content_type="application/json").status_code == 400
    assert nothing_written()


@pytest.mark.parametrize(
    ("content_type", "headers"),
    [("text/plain", {}), ("application/x-www-form-urlencoded", {}), (PROTOBUF, {"Content-Encoding": "br"})],
)
def test_other_media_types_answer_415(db, post, content_type, headers):
    response = post(protobuf_body(genai_agent()), content_type=content_type, **headers)
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"
    assert nothing_written()


def test_bodies_over_the_limit_answer_413_before_and_after_decompression(db, post, settings):
    settings.WAYMARK_INGEST_MAX_BYTES = 2000
    assert post(b"\x00" * 3000).status_code == 413
    bomb = gzip.compress(b"\x0a\x00" * 50_000)
    assert len(bomb) < 2000
    response = post(bomb, **{"Content-Encoding": "gzip"})
    assert response.status_code == 413 and response.json()["code"] == "payload_too_large"
    assert nothing_written()


def test_tokens_wrong_missing_or_without_the_scope(db, post, make_agent_token):
    body = protobuf_body(genai_agent())
    wrong = post(body, auth="wm_nope_nothing")
    assert wrong.status_code == 401 and wrong.json()["code"] == "unauthorized"
    assert wrong["WWW-Authenticate"] == "Bearer"
    assert Client().generic("POST", OTLP_PATH, body, content_type=PROTOBUF).status_code == 401
    scoped = post(body, auth=make_agent_token("evaluations:run", name="evaluator"))
    assert scoped.status_code == 403 and scoped.json()["code"] == "missing_scope"
    assert nothing_written()


def test_the_rate_limit_applies(db, post, settings):
    cache.clear()
    settings.WAYMARK_API_RATE_PER_TOKEN = 1
    try:
        body = protobuf_body(genai_agent())
        assert post(body).status_code == 200
        refused = post(body)
        assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
        assert refused["Retry-After"]
    finally:
        cache.clear()


def test_failures_and_errors(db, post):
    spans = genai_agent(failing_tool="check_account", root_status=StatusCode.ERROR)
    post(protobuf_body(spans))
    run = Run.objects.get()
    assert run.outcome == "failure"
    steps = list(run.steps.order_by("ordinal"))
    assert [s.ok for s in steps] == [True, False, True]
    assert steps[1].observation == '{"status": "active"}\ncheck_account failed: upstream timeout'


def test_an_unset_root_status_reads_the_declared_outcome(db, post):
    post(protobuf_body(genai_agent(root_status=StatusCode.UNSET, outcome="failure")))
    post(protobuf_body(genai_agent(root_status=StatusCode.UNSET)))
    # Without a declared outcome, UNSET with a completed agent span is success, and the run says it was inferred.
    runs = {run.outcome: run for run in Run.objects.all()}
    assert sorted(runs) == ["failure", "success"]
    assert "outcome" not in runs["failure"].metadata["otlp"].get("inferred", {})
    assert runs["success"].metadata["otlp"]["inferred"]["outcome"].startswith("root span UNSET with a completed agent")


def test_an_openinference_trace_in_batches(db, post):
    spans = openinference_agent()
    for batch in root_last_batches(spans):
        answer(post(json_body(batch), content_type="application/json"))
    run = Run.objects.get()
    assert (run.source, run.task, run.outcome) == ("phoenix-agent", "What is the status of ORD-7?", "success")
    steps = list(run.steps.order_by("ordinal"))
    assert [(s.tool, s.arguments, s.observation) for s in steps] == [
        ("lookup_order", {"order_id": "ORD-7"}, "shipped"),
        ("notify", {"channel": "email"}, "sent"),
    ]
    assert [(s.input_tokens, s.output_tokens) for s in steps] == [(500, 30), (500, 30)]


def test_a_trace_that_is_not_a_run_is_reported_and_discarded(db, post):
    spans = plain_http_trace()
    response = answer(post(protobuf_body(spans)))
    assert response.partial_success.rejected_spans == 1
    assert "it is not a run" in response.partial_success.error_message
    assert not Run.objects.exists()
    assert Trace.objects.get().status == TraceStatus.DISCARDED
    again = answer(post(protobuf_body(spans)))  # a resend: the same spans, nothing new
    assert not again.HasField("partial_success")


def test_several_traces_in_one_request(db, post):
    first, second, third = genai_agent(), openinference_agent(), plain_http_trace()
    response = answer(post(protobuf_body([*first, *second, *third])))
    assert response.partial_success.rejected_spans == 1
    assert Run.objects.count() == 2


def test_redaction_applies_as_for_the_json_ingest(db, post, settings):
    from trajectories.services import _redactor

    settings.WAYMARK_REDACT_PATTERNS = [r"ORD-\d+"]
    _redactor.cache_clear()
    try:
        post(protobuf_body(genai_agent()))
    finally:
        _redactor.cache_clear()
    run = Run.objects.get()
    assert "ORD-4101" not in run.task and "[redacted]" in run.task
    assert run.steps.get(tool="issue_refund").arguments["order_id"] == "[redacted]"


def test_pending_spans_per_trace_are_bounded(db, post, settings):
    settings.WAYMARK_OTLP_MAX_SPANS_PER_TRACE = 3
    spans = genai_agent()
    *children, root = spans
    response = answer(post(protobuf_body(children)))
    assert response.partial_success.rejected_spans == len(children) - 3
    assert "more than 3 spans" in response.partial_success.error_message
    assert PendingSpan.objects.count() == 3
    answer(post(protobuf_body([root])))  # the root still gets in: it completes the trace
    assert Run.objects.get().external_id == trace_hex(spans)


# --- the quiet period ------------------------------------------------------------------------------------------------


def test_a_trace_whose_root_never_comes_is_written_after_the_quiet_period(db, post, settings, agent):
    settings.WAYMARK_OTLP_QUIET_SECONDS = 60
    spans = genai_agent()
    post(protobuf_body(spans[:-1]))
    assert services.otlp_traces_sweep() == 0  # not quiet yet

    later = timezone.now() + timedelta(seconds=61)
    assert services.otlp_traces_sweep(now=later) == 1

    run = Run.objects.get()
    assert run.steps.count() == len(PLAN)
    assert any("root span never arrived" in p for p in run.metadata["otlp"]["problems"])
    trace = Trace.objects.get()
    assert trace.status == TraceStatus.WRITTEN and trace.run_id == run.pk
    assert not PendingSpan.objects.exists()
    event = AuditEvent.objects.get(verb="trajectories.ingest")
    assert event.actor_user_id == trace.sender_id is not None  # written in the name of the agent that sent the spans
    assert services.otlp_traces_sweep(now=later) == 0
    # the root, late: refused, the run unchanged
    response = answer(post(protobuf_body(spans[-1:])))
    assert response.partial_success.rejected_spans == 1
    assert Run.objects.get().started_at == run.started_at


def test_the_beat_task_runs_the_sweep(db, post, settings):
    from config.celery import app
    from otlp.tasks import sweep_quiet_traces

    assert settings.CELERY_BEAT_SCHEDULE["sweep-quiet-otlp-traces"]["task"] == sweep_quiet_traces.name
    assert sweep_quiet_traces.name in app.tasks
    settings.WAYMARK_OTLP_QUIET_SECONDS = 0
    post(protobuf_body(genai_agent()[:-1]))
    assert sweep_quiet_traces.apply().get() == 1
    assert Run.objects.count() == 1


def test_the_openapi_document_lists_the_operation(client, db):
    operation = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/otlp/v1/traces"]["post"]
    assert set(operation["requestBody"]["content"]) == {PROTOBUF, "application/json"}
    assert set(operation["responses"]["200"]["content"]) == {PROTOBUF, "application/json"}
    assert {"400", "401", "403", "413", "415", "429"} <= set(operation["responses"])


def test_random_bodies_never_answer_a_server_error(db, post):
    import random

    rng = random.Random(12)
    valid = protobuf_body(genai_agent())
    bodies = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))) for _ in range(15)]
    bodies += [bytearray(valid) for _ in range(15)]
    for body in bodies[15:]:  # the real body with a few bytes flipped
        for _ in range(3):
            body[rng.randrange(len(body))] = rng.getrandbits(8)
    for body in bodies:
        for content_type in (PROTOBUF, "application/json"):
            response = post(bytes(body), content_type=content_type)
            assert response.status_code in (200, 400), (response.status_code, response.content[:200])


def test_the_run_page_says_what_the_mapping_inferred(db, post, viewer):
    from django.urls import reverse

    from tests.conftest import logged_in

    post(protobuf_body(genai_agent(root_status=StatusCode.UNSET)))
    run = Run.objects.get()
    page = logged_in(viewer).get(reverse("trajectories:detail", args=[run.pk]))
    assert page.status_code == 200
    assert b"outcome inferred from root span UNSET with a completed agent span" in page.content


def test_an_operation_name_that_is_an_array_or_a_map_names_no_role(db, post):
    # A span naming its operation by an array or a map (unhashable values) is a span Waymark does not map, never a 500
    def span(span_id, operation, parent=""):
        return {
            "traceId": "5b8aa5a2d2c872e8321cf37308d69df2",
            "spanId": span_id,
            "parentSpanId": parent,
            "name": "odd",
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": "gen_ai.operation.name", "value": operation}],
        }

    agent = span("0000000000000001", {"stringValue": "invoke_agent"})
    tool = span("0000000000000002", {"stringValue": "execute_tool"}, agent["spanId"])
    tool["attributes"].append({"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}})
    listed = span("0000000000000003", {"arrayValue": {"values": [{"stringValue": "chat"}]}}, agent["spanId"])
    mapped = span(
        "0000000000000004",
        {"kvlistValue": {"values": [{"key": "name", "value": {"stringValue": "execute_tool"}}]}},
        agent["spanId"],
    )
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [tool, listed, mapped, agent]}]}]}
    assert answer(post(json.dumps(body), content_type="application/json")) == {}
    run = Run.objects.get()
    assert [step.tool for step in run.steps.order_by("ordinal")] == ["lookup"]
