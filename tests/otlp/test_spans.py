"""otlp.core.spans: OTLP bodies (protobuf and JSON, built by the real SDK's encoder) decoded into span records."""

import json

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otlp.core.spans import STATUS_OK, MalformedOtlp, SpanRecord, decode, export_response, hex_ids_to_base64

from .agents import genai_agent, json_body, protobuf_body, trace_hex


@pytest.fixture(scope="module")
def spans():
    return genai_agent()


def test_protobuf_and_json_decode_to_the_same_records(spans):
    from_protobuf = decode(protobuf_body(spans), "protobuf")
    from_json = decode(json_body(spans), "json")
    assert from_protobuf.rejected == from_json.rejected == 0
    assert from_protobuf.spans == from_json.spans
    assert len(from_protobuf.spans) == len(spans)


def test_records_carry_ids_times_status_attributes_and_resource(spans):
    records = {r.span_id: r for r in decode(protobuf_body(spans), "protobuf").spans}
    root = next(s for s in spans if s.parent is None)
    record = records[format(root.context.span_id, "016x")]
    assert record.trace_id == trace_hex(spans) and record.is_root
    assert (record.start_ns, record.end_ns) == (root.start_time, root.end_time)
    assert record.status_code == STATUS_OK
    assert record.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert record.resource["service.name"] == "support-agent"
    assert record.scope == "waymark-tests"
    child = next(r for r in records.values() if not r.is_root)
    assert child.parent_span_id == record.span_id
    assert type(child).from_dict(child.to_dict()) == child


def test_spans_without_events_share_the_empty_tuple_and_keep_none_once_stored(spans):
    records = decode(protobuf_body(spans), "protobuf").spans
    plain = [r for r in records if not r.events]
    assert len(plain) > 1 and all(r.events == () and r.events is plain[0].events for r in plain)
    stored = SpanRecord.from_dict(json.loads(json.dumps(plain[0].to_dict())))  # as a pending span keeps it
    assert stored.events == [] and stored.to_dict() == {**plain[0].to_dict(), "events": []}


def test_json_ignores_unknown_fields_and_accepts_base64_ids_too(spans):
    document = json.loads(json_body(spans[:1]))
    document["somethingNew"] = {"x": 1}
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["futureField"] = 3
    assert len(decode(json.dumps(document).encode(), "json").spans) == 1
    base64_ids = json_format.MessageToJson(ExportTraceServiceRequest.FromString(protobuf_body(spans[:1])))
    assert decode(base64_ids.encode(), "json").spans == decode(protobuf_body(spans[:1]), "protobuf").spans


def test_attribute_values_of_every_kind():
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "EEE19B7EC3C1B174",
                                "name": "s",
                                "kind": 1,
                                "attributes": [
                                    {"key": "s", "value": {"stringValue": "a\u0000b"}},
                                    {"key": "i", "value": {"intValue": "7"}},
                                    {"key": "d", "value": {"doubleValue": 1.5}},
                                    {"key": "b", "value": {"boolValue": True}},
                                    {
                                        "key": "a",
                                        "value": {"arrayValue": {"values": [{"intValue": 1}, {"stringValue": "x"}]}},
                                    },
                                    {
                                        "key": "m",
                                        "value": {
                                            "kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}
                                        },
                                    },
                                    {"key": "y", "value": {"bytesValue": "AAE="}},
                                    {"key": "n", "value": {}},
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    record = decode(json.dumps(document).encode(), "json").spans[0]
    assert record.trace_id == "5b8efff798038103d269b633813fc60c" and record.span_id == "eee19b7ec3c1b174"
    assert record.attributes == {
        "s": "a\ufffdb",
        "i": 7,
        "d": 1.5,
        "b": True,
        "a": [1, "x"],
        "m": {"k": False},
        "y": "AAE=",
        "n": None,
    }


def test_spans_with_malformed_ids_are_rejected_one_by_one():
    good = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174"}
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            good,
                            {"traceId": "00000000000000000000000000000000", "spanId": "eee19b7ec3c1b174"},
                            {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": ""},
                            {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "0000000000000000"},
                            {"spanId": "eee19b7ec3c1b174"},
                        ]
                    }
                ]
            }
        ]
    }
    decoded = decode(json.dumps(document).encode(), "json")
    assert len(decoded.spans) == 1 and decoded.rejected == 4
    assert "4 span(s) with a malformed trace id or span id" in decoded.problems


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        (b"\xff\xff\xff\xff", "protobuf"),
        (b"\x0a\x05\x01", "protobuf"),  # a length past the end
        (b"not json", "json"),
        (b"[1, 2]", "json"),
        (b'{"resourceSpans": "nope"}', "json"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz!"}]}]}]}', "json"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}', "json"),
        (b'{"resourceSpans": [], "x": NaN}', "json"),
    ],
)
def test_a_malformed_body_is_refused(body, encoding):
    with pytest.raises(MalformedOtlp):
        decode(body, encoding)


def test_an_empty_request_has_no_span():
    assert decode(b"", "protobuf").spans == []
    assert decode(b"{}", "json").spans == []


def test_hex_ids_become_base64_only_where_they_are_ids():
    converted = hex_ids_to_base64({"traceId": "00" * 16, "name": "00" * 16, "links": [{"spanId": "01" * 8}]})
    assert converted == {"traceId": "A" * 22 + "==", "name": "00" * 16, "links": [{"spanId": "AQEBAQEBAQE="}]}


def test_the_answer_in_either_encoding():
    full = ExportTraceServiceResponse.FromString(export_response(rejected=0, message="", encoding="protobuf"))
    assert not full.HasField("partial_success")
    partial = ExportTraceServiceResponse.FromString(
        export_response(rejected=3, message="trace x: late", encoding="protobuf")
    )
    assert (partial.partial_success.rejected_spans, partial.partial_success.error_message) == (3, "trace x: late")
    assert json.loads(export_response(rejected=0, message="", encoding="json")) == {}
    assert json.loads(export_response(rejected=2, message="m", encoding="json")) == {
        "partialSuccess": {"rejectedSpans": "2", "errorMessage": "m"}
    }
