"""Request bodies: one size limit in front of every view, and the limited reader ingest and OTLP use.

Django refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE by raising RequestDataTooBig wherever the body is first read:
inside a ninja operation (which would answer it as an unexpected error, 500) or in the CSRF check of a page form
(Django's 400, the debug page under DEBUG). `BodyLimitMiddleware` answers before any of that, from the declared
Content-Length, without reading the body: 413 with the API's Error body under /api/, the styled 413 page elsewhere
(config/error_views.py). config/api.py still maps a RequestDataTooBig raised inside the API to the same 413.

A body sent chunked (no Content-Length) reaches a WSGI application as an empty body unless it is read from the
server's input stream to its end, which the server allows when it sets `wsgi.input_terminated` (gunicorn does). The
middleware then reads at most the limit plus one byte: past the limit it answers 413 without reading further;
within it the body is handed on as if it had come with its Content-Length. A server that does not terminate its input
stream gets 411 Length Required.

`read_limited_body` is for the operations that read their body themselves (ingest, OTLP) under their own, smaller
limit (WAYMARK_INGEST_MAX_BYTES). It reads the stream rather than `request.body`, so the request does not keep the raw
bytes alive once the caller has parsed them, and it refuses a body shorter than its Content-Length (the client
stopped sending: what arrived may be a truncated batch that still parses).
"""

from __future__ import annotations

from io import BytesIO

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse
from django.http.request import UnreadablePostError

from . import error_views
from .errors import ApiError

READ_CHUNK = 64 * 1024


def upload_limit() -> int | None:
    """The largest body Django reads into memory: DATA_UPLOAD_MAX_MEMORY_SIZE (None: no limit)."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"the body is larger than {limit} bytes", {"max_bytes": limit})


def declared_length(request: HttpRequest) -> int | None:
    """The Content-Length as a number; None when absent; ApiError 400 when it is not a number."""
    value = request.META.get("CONTENT_LENGTH")
    if value in (None, ""):
        return None
    try:
        length = int(value)
    except ValueError:
        length = -1
    if length < 0:
        raise ApiError(400, "bad_request", "the Content-Length header is not a number", {"content_length": value})
    return length


def is_chunked(request: HttpRequest) -> bool:
    return "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()


def refuse_declared_over(request: HttpRequest, limit: int) -> int:
    """The declared Content-Length (0 when absent), or ApiError 413 when it is over `limit` (400 when malformed)."""
    declared = declared_length(request) or 0
    if declared > limit:
        raise too_large(limit)
    return declared


def discard_body(request: HttpRequest, limit: int) -> None:
    """Read and drop the body (at most `limit` bytes), so that a refusal sent before the body was read reaches a
    client still sending it: the server would otherwise close the connection under it (a reset, not the answer)."""
    left = limit
    try:
        while left > 0 and (chunk := request.read(min(READ_CHUNK, left))):
            left -= len(chunk)
    except UnreadablePostError:
        return


def read_limited_body(request: HttpRequest, limit: int) -> bytes:
    """The raw body, or ApiError: 413 `payload_too_large` when it (or its declared Content-Length) is over `limit`
    bytes; 400 for a Content-Length that is not a number or a body shorter than it (`incomplete_body`)."""
    declared = refuse_declared_over(request, limit)
    try:
        # The stream, not request.body: the request keeps no copy. (Had something read request.body before, the
        # stream is Django's copy of it.)
        body = request.read(limit + 1)
    except UnreadablePostError as exc:
        raise ApiError(400, "incomplete_body", f"the body could not be read whole: {exc}") from None
    if len(body) > limit:
        raise too_large(limit)
    if len(body) < declared:
        raise ApiError(
            400,
            "incomplete_body",
            f"the body ended after {len(body)} of the {declared} bytes its Content-Length declares",
            {"received": len(body), "content_length": declared},
        )
    return body


def _read_chunked(request: HttpRequest, limit: int) -> bytes | None:
    """The whole chunked body from the server's (terminated) input stream, or None past `limit` bytes."""
    stream = request.META["wsgi.input"]
    chunks, size = [], 0
    while chunk := stream.read(min(READ_CHUNK, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
    return b"".join(chunks)


def _refusal(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    """400 / 411: the API's Error body under /api/, a plain text elsewhere (no browser sends such a request)."""
    if error_views.is_api(request):
        return error_views.api_error(status, code, message)
    return error_views.plain_error(request, status, message)


def oversized_response(request: HttpRequest, limit: int) -> HttpResponse:
    """413: the API's Error body under /api/, the styled page elsewhere."""
    return error_views.payload_too_large(request, limit=limit)


class BodyLimitMiddleware:
    """413 for a body over DATA_UPLOAD_MAX_MEMORY_SIZE before any view or the CSRF check reads it (see the module)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = upload_limit()
        try:
            declared = declared_length(request)
        except ApiError as exc:
            return _refusal(request, 400, exc.code, exc.message)
        if declared is None and is_chunked(request):
            refused = self._take_chunked(request, limit)
            if refused is not None:
                return refused
        elif limit is not None and declared is not None and declared > limit:
            return oversized_response(request, limit)
        return self.get_response(request)

    @staticmethod
    def _take_chunked(request: HttpRequest, limit: int | None) -> HttpResponse | None:
        if not request.META.get("wsgi.input_terminated"):
            message = "send the body with a Content-Length (this server cannot read a chunked body to its end)"
            return _refusal(request, 411, "length_required", message)
        body = _read_chunked(request, limit if limit is not None else 2**62)
        if body is None:
            return oversized_response(request, limit)
        # As if the body had come with its length: Django's request reads `_stream` (WSGIRequest set it to read 0
        # bytes of the input for want of a Content-Length).
        request.META["CONTENT_LENGTH"] = str(len(body))
        request._stream = LimitedStream(BytesIO(body), len(body))
        return None
