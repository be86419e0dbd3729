"""OTLP/HTTP trace bodies → span records.

The body is decoded with the official OpenTelemetry protocol package (`opentelemetry-proto`): binary protobuf with
`ExportTraceServiceRequest.ParseFromString`, the OTLP JSON encoding with `google.protobuf.json_format` into the same
message. OTLP JSON deviates from the standard protobuf JSON mapping in one way that matters for decoding: trace and
span ids are hex strings, not base64 (OTLP specification, "JSON Protobuf Encoding"); `hex_ids_to_base64` rewrites
them before json_format reads the document. Unknown JSON fields are ignored, as the specification requires.

A span whose ids are malformed (a trace id that is not 16 bytes or is all zeros, a span id that is not 8 bytes…) is
rejected on its own; everything else about a span is kept as it came.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
MAX_VALUE_DEPTH = 16  # nested attribute values (arrays, key-value lists) deeper than this become a marker string
_ID_KEYS = {"traceId": 32, "trace_id": 32, "spanId": 16, "span_id": 16, "parentSpanId": 16, "parent_span_id": 16}
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_SURROGATE = re.compile("[\ud800-\udfff]")


class MalformedOtlp(ValueError):
    """The body is not an OTLP ExportTraceServiceRequest in the declared encoding (answer 400, write nothing)."""


@dataclass(slots=True)
class SpanRecord:
    """One span, as plain data: ids in lowercase hex, times in Unix nanoseconds (0 when absent), attribute values as
    JSON-compatible Python values, the resource's attributes beside the span's own. Treated as immutable; not frozen
    because a frozen dataclass costs three times as much to build, and a request builds one per span."""

    trace_id: str
    span_id: str
    parent_span_id: str = ""
    name: str = ""
    kind: int = 0
    start_ns: int = 0
    end_ns: int = 0
    status_code: int = STATUS_UNSET
    status_message: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""
    # Span events as {"name", "time_ns", "attributes"}: record_exception's `exception` events, and the frameworks that
    # put messages, tool arguments and results in events (strands-agents, GenAI `…operation.details`). Most spans have
    # none and share the empty tuple: a list each would be one more object alive through the request for every span,
    # which the garbage collector's full collections walk (and a request's thousands of them set one off).
    events: Sequence[dict[str, Any]] = ()

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id

    def to_dict(self) -> dict[str, Any]:
        """The span as JSON (to keep it while its trace is pending)."""
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "kind": self.kind,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "status_code": self.status_code,
            "status_message": self.status_message,
            "attributes": self.attributes,
            "resource": self.resource,
            "scope": self.scope,
            "events": self.events,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpanRecord:
        return cls(**data)  # spans kept before events were decoded have none: the default

    def event_attribute(self, key: str) -> Any:
        """The value of `key` in the first event that carries it, else None."""
        for event in self.events:
            value = event["attributes"].get(key)
            if value is not None:
                return value
        return None


@dataclass(frozen=True)
class DecodedSpans:
    spans: list[SpanRecord]
    rejected: int = 0
    problems: tuple[str, ...] = ()


# --- text and values ----------------------------------------------------------------------------------------------


def clean_text(text: str) -> str:
    """Text every database can hold: NUL and lone surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if text.isascii():  # constant time: no surrogate to look for
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


def _nul_free(text: str) -> str:
    # Strings read back from a protobuf message are valid UTF-8 (upb checks it), so NUL is all that is left to clean.
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def any_value(value: Any, depth: int = 0) -> Any:
    """An OTLP AnyValue as a JSON-compatible value: bytes as base64 text, non-finite doubles as None."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return _nul_free(value.string_value)
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else None
    if kind is None:
        return None
    if depth >= MAX_VALUE_DEPTH:
        return "[nested too deep]"
    if kind == "array_value":
        return [any_value(item, depth + 1) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {_nul_free(kv.key): any_value(kv.value, depth + 1) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None


def attributes(key_values: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for kv in key_values:  # the common kinds inline: this loop runs for every attribute of every span
        key, value = kv.key, kv.value
        if "\x00" in key:
            key = _nul_free(key)
        kind = value.WhichOneof("value")
        if kind == "string_value":
            text = value.string_value
            result[key] = text if "\x00" not in text else _nul_free(text)
        elif kind == "int_value":
            result[key] = value.int_value
        elif kind == "double_value":
            number = value.double_value
            result[key] = number if math.isfinite(number) else None
        elif kind == "bool_value":
            result[key] = value.bool_value
        else:
            result[key] = any_value(value)
    return result


# --- decoding -------------------------------------------------------------------------------------------------------


def _hex_to_base64(value: Any, length: int) -> Any:
    if isinstance(value, str) and len(value) == length:
        try:
            return base64.b64encode(bytes.fromhex(value)).decode("ascii")
        except ValueError:
            return value  # not hex: json_format reads it as base64 (and refuses it if it is not)
    return value


def hex_ids_to_base64(node: Any, depth: int = 0) -> Any:
    """OTLP JSON's hex trace and span ids as the base64 the protobuf JSON mapping expects, everywhere in the document
    (spans and their links). Anything else is left for json_format to accept or refuse."""
    if depth > 64:
        return node
    if isinstance(node, dict):
        return {
            key: _hex_to_base64(value, _ID_KEYS[key]) if key in _ID_KEYS else hex_ids_to_base64(value, depth + 1)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [hex_ids_to_base64(item, depth + 1) for item in node]
    return node


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_request(body: bytes, encoding: str) -> ExportTraceServiceRequest:
    """The body as an ExportTraceServiceRequest; `encoding` is "protobuf" or "json". MalformedOtlp otherwise."""
    message = ExportTraceServiceRequest()
    if encoding == "protobuf":
        try:
            message.ParseFromString(body)
        except (DecodeError, RecursionError, ValueError) as exc:
            raise MalformedOtlp(f"the body is not a protobuf ExportTraceServiceRequest: {exc}") from None
        return message
    try:
        document = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise MalformedOtlp(f"the body is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise MalformedOtlp("the body must be a JSON object (an OTLP ExportTraceServiceRequest)")
    try:
        json_format.ParseDict(hex_ids_to_base64(document), message, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, ValueError, TypeError, AttributeError) as exc:
        raise MalformedOtlp(f"the body is not an OTLP JSON ExportTraceServiceRequest: {exc}") from None
    return message


def _spans(message: ExportTraceServiceRequest) -> Iterator[tuple[Any, dict[str, Any], str]]:
    for resource_spans in message.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = _nul_free(scope_spans.scope.name)
            for span in scope_spans.spans:
                yield span, resource, scope


def span_records(message: ExportTraceServiceRequest) -> DecodedSpans:
    """Every span of the request with valid ids as a SpanRecord; the others counted as rejected."""
    records: list[SpanRecord] = []
    append = records.append
    rejected = 0
    for span, resource, scope in _spans(message):
        trace_id, span_id, parent = span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex()
        if (
            len(trace_id) != 32
            or trace_id == _ZERO_TRACE
            or len(span_id) != 16
            or span_id == _ZERO_SPAN
            or len(parent) not in (0, 16)
        ):
            rejected += 1
            continue
        name, status = span.name, span.status
        message_text = status.message
        events = (
            [
                {
                    "name": _nul_free(event.name),
                    "time_ns": event.time_unix_nano,
                    "attributes": attributes(event.attributes),
                }
                for event in span.events
            ]
            if span.events
            else ()
        )
        append(
            SpanRecord(
                trace_id,
                span_id,
                "" if parent == _ZERO_SPAN else parent,
                name if "\x00" not in name else _nul_free(name),
                span.kind,
                span.start_time_unix_nano,
                span.end_time_unix_nano,
                status.code,
                message_text if "\x00" not in message_text else _nul_free(message_text),
                attributes(span.attributes),
                resource,
                scope,
                events,
            )
        )
    problems = (f"{rejected} span(s) with a malformed trace id or span id",) if rejected else ()
    return DecodedSpans(spans=records, rejected=rejected, problems=problems)


def decode(body: bytes, encoding: str) -> DecodedSpans:
    return span_records(parse_request(body, encoding))


# --- the answer -----------------------------------------------------------------------------------------------------

MAX_MESSAGE_CHARS = 2000


def export_response(*, rejected: int, message: str, encoding: str) -> bytes:
    """An ExportTraceServiceResponse in the request's encoding: partial_success set when spans were rejected or there
    is something to say, left unset on a full success (OTLP/HTTP "Full Success")."""
    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message[:MAX_MESSAGE_CHARS]
    if encoding == "protobuf":
        return response.SerializeToString()
    return json_format.MessageToJson(response, indent=None).encode("utf-8")
