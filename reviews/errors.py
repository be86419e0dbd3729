"""Errors of the review services. Each carries the HTTP status and code the API answers with; pages show the text."""

from __future__ import annotations

from typing import Any


class ReviewError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class NotAllowed(ReviewError):
    """The actor's roles do not allow this (403)."""

    status = 403
    code = "forbidden"


class Invalid(ReviewError):
    """The input breaks a rule (422): a rejection without a reason, an override without a reason, …"""

    status = 422
    code = "invalid"


class NotFound(ReviewError):
    status = 404
    code = "not_found"


class Conflict(ReviewError):
    """The state moved (409): a stale request, a closed request, a second judgment, a duplicate request."""

    status = 409
    code = "conflict"
