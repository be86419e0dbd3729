"""Request bodies: the size limit and the limited reader ingest and OTLP use.

Django refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE (`upload_limit`) by raising RequestDataTooBig wherever the body
is first read. config.middleware.BodyLimitMiddleware answers before that, from the declared Content-Length (413 with
the API's Error body under /api/, the styled 413 page elsewhere), and reads a chunked body to at most the limit;
config/api.py maps a RequestDataTooBig raised inside the API to the same 413 (`too_large`).

`read_limited_body` is for the operations that read their body themselves (ingest, OTLP) under their own, smaller
limit (WAYMARK_INGEST_MAX_BYTES). It reads the stream rather than `request.body`, so the request does not keep the raw
bytes alive once the caller has parsed them, and it refuses a body shorter than its Content-Length (the client
stopped sending: what arrived may be a truncated batch that still parses).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.http.request import UnreadablePostError

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
