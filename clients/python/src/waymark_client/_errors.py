"""Errors the client raises: every API refusal is an APIError carrying Waymark's error body."""

from __future__ import annotations

from typing import Any


class WaymarkError(Exception):
    """Base class of every error of this client."""


class WaymarkConnectionError(WaymarkError):
    """The server could not be reached, or stopped answering, and the retry policy gave up (or may not retry)."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class APIError(WaymarkError):
    """The API answered with an error: `status`, and the body's `code`, `message` and `details`."""

    def __init__(self, status: int, code: str, message: str, details: Any = None, *, attempts: int = 1) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details if details is not None else {}
        self.attempts = attempts


class AuthenticationError(APIError):
    """401: a missing, unknown or revoked token."""


class PermissionDenied(APIError):
    """403: the token lacks the scope, or another token claimed the job (`not_claimant`)."""


class NotFoundError(APIError):
    """404: no such workspace, revision, job or run (or no active graph yet: `no_active_graph`)."""


class ConflictError(APIError):
    """409: e.g. `job_closed` (past its deadline or never claimed)."""


class InvalidRequest(APIError):
    """400, 413 or 422: the request does not match the API's format; nothing was written."""


class RateLimited(APIError):
    """429 after the retries: the token's calls per minute are spent."""


class ServerError(APIError):
    """5xx after the retries."""


def error_class(status: int) -> type[APIError]:
    if status == 401:
        return AuthenticationError
    if status == 403:
        return PermissionDenied
    if status == 404:
        return NotFoundError
    if status == 409:
        return ConflictError
    if status == 429:
        return RateLimited
    if status >= 500:
        return ServerError
    if status in (400, 413, 415, 422):
        return InvalidRequest
    return APIError
