"""The API's one error shape and the exception every API path raises to answer with it."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ninja import Schema
from ninja.errors import HttpError

from common.cursors import InvalidCursor


class Error(Schema):
    code: str
    message: str
    details: Any = None


class ApiError(HttpError):
    """Raise anywhere under /api/v1/ to answer `status` with the Error body."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(status, message)
        self.code = code
        self.details = details


# Statuses an authenticated operation may answer besides its own (declared on every operation for the contract).
AUTH_ERRORS = {401: Error, 403: Error}


@contextmanager
def cursor_checked() -> Iterator[None]:
    """Around reading a cursor page: a cursor this API did not issue (InvalidCursor) answers 400 `bad_cursor`."""
    try:
        yield
    except InvalidCursor as exc:
        raise ApiError(400, "bad_cursor", str(exc)) from None
