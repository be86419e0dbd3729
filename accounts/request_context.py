"""The request id of the request being served (set by RequestIdMiddleware), read by the audit helper."""

from contextvars import ContextVar

current_request_id: ContextVar[str] = ContextVar("current_request_id", default="")
