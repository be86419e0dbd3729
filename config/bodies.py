"""Request bodies read with a size limit, for the API operations that read their body themselves (ingest, OTLP)."""

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.http.request import RawPostDataException

from .errors import ApiError


def too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"the body is larger than {limit} bytes", {"max_bytes": limit})


def read_limited_body(request: HttpRequest, limit: int) -> bytes:
    """The raw body, or 413 `payload_too_large` when it (or its declared Content-Length) is over `limit` bytes; 400
    for a Content-Length that is not a number."""
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        raise ApiError(400, "bad_request", "the Content-Length header is not a number") from None
    if declared > limit:
        raise too_large(limit)
    try:
        body = request.body
    except (RequestDataTooBig, RawPostDataException):
        raise too_large(limit) from None
    if len(body) > limit:
        raise too_large(limit)
    return body
