"""The one NinjaAPI at /api/v1/: every app's router, and every error answered with the Error schema."""

import logging

from django.core.exceptions import BadRequest, PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.db import OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from common.bodies import too_large, upload_limit
from common.errors import ApiError
from common.text import JsonBodyParser
from graphs.api import router as graphs_router
from llm.api import router as llm_router
from procedures.api import router as procedures_router
from reviews.api import router as reviews_router
from trajectories.api import router as trajectories_router

from .busy import api_busy_response, is_database_busy
from .error_views import GENERIC_400, SERVER_ERROR

logger = logging.getLogger("waymark.api")

_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}
# Answers any operation may give besides its own: a URL too long (config/middleware.py), the rate limits
# (common/ratelimit.py) and a database that stayed locked past its timeout on the embedded default (config/busy.py).
# Declared once here rather than on each route: (description, response headers).
EVERY_OPERATION_MAY_ANSWER = {
    "414": (
        "URI Too Long: the URL is longer than the server accepts (code `uri_too_long`, the limit in `details`)",
        None,
    ),
    "429": (
        "Too Many Requests: a rate limit was reached (code `rate_limited`), or an ingest request found its token's or "
        "agent's share of requests in flight taken (`too_many_in_flight`); retry after `Retry-After` seconds",
        _RETRY_AFTER,
    ),
    "503": (
        "Service Unavailable: the database is busy, or an ingest request found no room among the bodies this server "
        "process works on at once (code `busy`); retry after `Retry-After` seconds",
        _RETRY_AFTER,
    ),
}

# ... and every operation that reads a body (common/bodies.py), unless it declares its own 413.
BODY_TOO_LARGE = (
    "Content Too Large: the body is over DATA_UPLOAD_MAX_MEMORY_SIZE bytes (code `payload_too_large`, the limit in "
    "`details.max_bytes`); nothing was read or written"
)


class WaymarkApi(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        for item in schema["paths"].values():
            for operation in item.values():
                for status, (description, headers) in EVERY_OPERATION_MAY_ANSWER.items():
                    answer = {"description": description, "content": error}
                    operation["responses"].setdefault(status, {**answer, "headers": headers} if headers else answer)
                if "requestBody" in operation:
                    operation["responses"].setdefault("413", {"description": BODY_TOO_LARGE, "content": error})
        return schema


api = WaymarkApi(
    title="Waymark API",
    version="1",
    description="Agents push traces and pull active graphs and procedures; see docs/api.md.",
    urls_namespace="api",
    parser=JsonBodyParser(),
)

STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "invalid",
    429: "throttled",
}


def _error(request: HttpRequest, status: int, code: str, message: str, details=None) -> HttpResponse:
    return api.create_response(request, {"code": code, "message": message, "details": details}, status=status)


@api.exception_handler(ApiError)
def on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    response = _error(request, exc.status_code, exc.code, exc.message, exc.details)
    for name, value in getattr(exc, "headers", {}).items():  # e.g. Retry-After on 429 (common/ratelimit.py)
        response[name] = value
    return response


@api.exception_handler(AuthenticationError)
def on_unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = _error(request, 401, "unauthorized", "a valid bearer token is required (Authorization: Bearer wm_…)")
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, ApiError):  # raised by JsonBodyParser, wrapped by ninja in a plain 400
        return on_api_error(request, exc.__cause__)
    code = STATUS_CODES.get(exc.status_code, "error")
    return _error(request, exc.status_code, code, str(exc))


@api.exception_handler(ValidationError)
def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = [
        {
            "loc": [str(part) for part in err.get("loc", ())],
            "msg": err.get("msg", ""),
            "type": err.get("type", ""),
        }
        for err in exc.errors
    ]
    return _error(request, 422, "invalid", "the request does not match the schema", {"errors": errors})


@api.exception_handler(RequestDataTooBig)
def on_body_too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    """Django refused to read a body over DATA_UPLOAD_MAX_MEMORY_SIZE (config.middleware.BodyLimitMiddleware answers
    most of these before the API runs: this covers a body whose size only showed while it was read)."""
    return on_api_error(request, too_large(upload_limit()))


@api.exception_handler(Http404)
def on_not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, "not_found", str(exc) or "not found")


@api.exception_handler(PermissionDenied)
def on_permission_denied(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    """Django's PermissionDenied raised under an operation: the Error body's 403, never the catch-all's 500. A service's
    accounts.roles.RoleRequired carries its own code (`not_a_reviewer`, `admin_required`, …)."""
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else "forbidden"
    return _error(request, 403, getattr(exc, "code", "forbidden"), message)


@api.exception_handler(BadRequest)
def on_bad_request(request: HttpRequest, exc: BadRequest) -> HttpResponse:
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else GENERIC_400
    return _error(request, 400, "bad_request", message)


@api.exception_handler(SuspiciousOperation)
def on_suspicious(request: HttpRequest, exc: SuspiciousOperation) -> HttpResponse:
    """Django's 400 for what it refuses to read (too many fields, a bad host): its text names settings, so only the
    generic message goes out (Django's security logger has the rest)."""
    logger.warning("refused as suspicious: %s", exc)
    return _error(request, 400, "bad_request", GENERIC_400)


@api.exception_handler(OperationalError)
def on_database_error(request: HttpRequest, exc: OperationalError) -> HttpResponse:
    if is_database_busy(exc):  # the lock stayed taken past the timeout: load, not a fault (config/busy.py)
        return api_busy_response(request, exc)
    return on_unexpected(request, exc)


@api.exception_handler(Exception)
def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("unhandled API error", exc_info=exc)
    return _error(request, 500, "internal_error", SERVER_ERROR)


api.add_router("/trajectories", trajectories_router)
api.add_router("/graphs", graphs_router)
api.add_router("/graphs/{ws}/evolutions", "graphs.evolution.api.router")
api.add_router("/procedures", procedures_router)
api.add_router("/replays", "procedures.api.replays_router")
api.add_router("/jobs", "trajectories.jobs_api.router")
api.add_router("/reviews", reviews_router)
api.add_router("/promotions", "reviews.api.promotions_router")
api.add_router("/models", llm_router)
api.add_router("/rubrics", "rubrics.api.router")
api.add_router("/intents", "intents.api.router")
api.add_router("/intents/windows", "intents.windows.api.router")
api.add_router("/intents/taxonomy", "intents.taxonomy.api.router")
api.add_router("/intents/alerts", "intents.windows.alerts_api.router")
api.add_router("/otlp", "otlp.api.router")
api.add_router("/certification", "uplift.api.router")
