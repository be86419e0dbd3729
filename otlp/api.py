"""/api/v1/otlp/v1/traces: OTLP/HTTP trace export (protobuf or JSON, optionally gzip), mapped onto runs.

The operation declares no body parameter, so ninja never runs the API's JSON body parser on it: the body is read and
decoded here. Token auth, the rate limits and the Error body of every refusal are the API's own.
"""

from __future__ import annotations

import zlib

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import Router

from accounts.api_auth import scoped
from accounts.services import Actor
from common.bodies import read_limited_body, too_large
from common.errors import ApiError, Error
from common.ingest_gate import ingest_admitted
from common.jsonbody import DuplicateKey, loads_unique
from common.text import printable_key

from . import services
from .core.spans import DecodedSpans, MalformedOtlp, decode, export_response

router = Router(tags=["otlp"])

ENCODINGS = {
    "application/x-protobuf": "protobuf",
    "application/protobuf": "protobuf",
    "application/json": "json",
}
RESPONSE_TYPES = {"protobuf": "application/x-protobuf", "json": "application/json"}

DESCRIPTION = """OTLP/HTTP trace export, as OpenTelemetry exporters send it (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` =
`…/api/v1/otlp/v1/traces`, header `Authorization: Bearer wm_…`, scope `trajectories:write`). The body is an
`ExportTraceServiceRequest` in binary protobuf (`application/x-protobuf`) or the OTLP JSON encoding
(`application/json`), optionally `Content-Encoding: gzip` (or `deflate`); at most WAYMARK_INGEST_MAX_BYTES bytes before
and after decompression. Spans are kept per trace until the trace completes (its root span arrived, or
WAYMARK_OTLP_QUIET_SECONDS passed without a span), then its run is written once, idempotent on the trace id.
200 answers an `ExportTraceServiceResponse` in the request's encoding, with `partial_success` when spans were refused
or something could not be mapped; 400 a body that does not decode (nothing is written); 415 another content type or
encoding; 422 an OTLP JSON body with a key twice in one object; 429 `too_many_in_flight` (with `Retry-After`) while the
token or its agent already has its share of ingest requests in flight. See docs/integrations/opentelemetry.md."""

_REQUEST_SCHEMA = {
    "type": "object",
    "description": "ExportTraceServiceRequest (OTLP JSON encoding: hex trace and span ids, integer enums)",
    "properties": {"resourceSpans": {"type": "array", "items": {"type": "object"}}},
}
_RESPONSE_SCHEMA = {
    "type": "object",
    "description": "ExportTraceServiceResponse",
    "properties": {
        "partialSuccess": {
            "type": "object",
            "properties": {"rejectedSpans": {"type": "string"}, "errorMessage": {"type": "string"}},
        }
    },
}
OPENAPI_EXTRA = {
    "requestBody": {
        "required": True,
        "content": {
            "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": _REQUEST_SCHEMA},
        },
    },
    "responses": {
        "200": {
            "description": "ExportTraceServiceResponse in the request's encoding",
            "content": {
                "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                "application/json": {"schema": _RESPONSE_SCHEMA},
            },
        }
    },
}


def _encoding(request: HttpRequest) -> str:
    content_type = (request.content_type or "").strip().lower()
    if content_type not in ENCODINGS:
        raise ApiError(
            415,
            "unsupported_media_type",
            "send OTLP as application/x-protobuf or application/json",
            {"content_type": content_type},
        )
    return ENCODINGS[content_type]


def _decompress(body: bytes, content_encoding: str, limit: int) -> bytes:
    """The body without its Content-Encoding (gzip, deflate or identity), at most `limit` bytes once inflated."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise ApiError(
            415, "unsupported_media_type", "Content-Encoding must be gzip, deflate or identity", {"encoding": encoding}
        )
    # gzip: the gzip header; deflate: the zlib format, or a raw deflate stream as some clients send it.
    attempts = [16 + zlib.MAX_WBITS] if encoding != "deflate" else [zlib.MAX_WBITS, -zlib.MAX_WBITS]
    error: zlib.error | None = None
    for wbits in attempts:
        inflater = zlib.decompressobj(wbits)
        try:
            data = inflater.decompress(body, limit + 1)
        except zlib.error as exc:
            error = exc
            continue
        if len(data) > limit or inflater.unconsumed_tail:
            raise too_large(limit)
        if not inflater.eof:
            raise ApiError(400, "malformed_otlp", f"the {encoding} body is truncated")
        return data
    raise ApiError(400, "malformed_otlp", f"the body is not valid {encoding}: {error}")


def _refuse_duplicate_keys(body: bytes) -> None:
    """422 for an OTLP JSON body with a key twice in one object (json.loads would keep the last silently); any other
    fault is left to the decoder, which answers it as malformed."""
    try:
        loads_unique(body)
    except DuplicateKey as exc:
        loc = [printable_key(part) if isinstance(part, str) else part for part in exc.loc]
        error = {
            "loc": loc,
            "msg": f"the key {printable_key(exc.key)!r} appears twice in one object",
            "type": "duplicate_key",
        }
        raise ApiError(
            422, "invalid", "the body has a key twice in one object; nothing was written", {"errors": [error]}
        )
    except (ValueError, RecursionError):
        return


def _decoded(request: HttpRequest, encoding: str) -> DecodedSpans:
    """The spans of the body (read, inflated, decoded); the raw and inflated bytes are dropped on return."""
    limit = settings.WAYMARK_INGEST_MAX_BYTES
    body = _decompress(read_limited_body(request, limit), request.headers.get("Content-Encoding", ""), limit)
    if encoding == "json":
        _refuse_duplicate_keys(body)
    try:
        return decode(body, encoding)
    except MalformedOtlp as exc:
        raise ApiError(400, "malformed_otlp", str(exc))


@router.post(
    "/v1/traces",
    auth=scoped("trajectories:write"),
    response={400: Error, 401: Error, 403: Error, 413: Error, 415: Error, 422: Error},
    summary="Export traces over OTLP/HTTP (protobuf or JSON)",
    description=DESCRIPTION,
    openapi_extra=OPENAPI_EXTRA,
)
def export_traces(request: HttpRequest):
    encoding = _encoding(request)
    # 413 / 429 past the token's or the agent's share / 503 without room for the body (common/ingest_gate.py)
    with ingest_admitted(request, settings.WAYMARK_INGEST_MAX_BYTES):
        outcome = services.otlp_export(actor=Actor.of_request(request), decoded=_decoded(request, encoding))
    payload = export_response(
        rejected=min(outcome.rejected, outcome.received), message=outcome.message, encoding=encoding
    )
    return HttpResponse(payload, status=200, content_type=RESPONSE_TYPES[encoding])
