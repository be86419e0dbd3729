"""A database that stays busy past its timeout answers 503 with Retry-After, never 500.

On the embedded default (SQLite in WAL, immediate write transactions) writers queue on the database lock for
`OPTIONS["timeout"]` seconds. A write that still cannot get the lock raises OperationalError("database is locked");
that is load, not a bug: the client should come back shortly. The API answers the Error body (config/api.py
registers `api_busy_response`); pages answer a short 503 page through `DatabaseBusyMiddleware`.
"""

import logging

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger("waymark.busy")

RETRY_AFTER_SECONDS = 2
BUSY_MESSAGES = ("database is locked", "database table is locked", "database is busy")
BODY = {"code": "busy", "message": "the database is busy; retry shortly", "details": None}
PAGE = (
    "<!doctype html><html><head><meta charset=utf-8><title>Busy — Waymark</title></head>"
    "<body><h1>Busy</h1><p>The database is busy right now. Please retry in a few seconds.</p></body></html>"
)


def is_database_busy(exc: BaseException) -> bool:
    """True for SQLite's lock timeouts (and their Django wrappers); other OperationalErrors are real faults."""
    if not isinstance(exc, OperationalError):
        return False
    message = str(exc).lower()
    return any(text in message for text in BUSY_MESSAGES)


def _log(request: HttpRequest, exc: BaseException) -> None:
    logger.warning("database busy: %s %s answered 503 (%s)", request.method, request.path, exc)


def api_busy_response(request: HttpRequest, exc: BaseException) -> HttpResponse:
    _log(request, exc)
    response = JsonResponse(BODY, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def page_busy_response(request: HttpRequest, exc: BaseException) -> HttpResponse:
    if request.path.startswith("/api/"):
        return api_busy_response(request, exc)
    _log(request, exc)
    response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseBusyMiddleware:
    """Maps a busy database raised by any view to 503 + Retry-After; everything else passes through untouched."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if is_database_busy(exc):
            return page_busy_response(request, exc)
        return None
