"""waymark-client: push agent runs to Waymark, record them as the agent executes, pull the active graph and
procedures (ETag-cached, pinned for a run), ask for guidance at each step, and answer evaluation jobs.

    from waymark_client import Waymark

    with Waymark("http://127.0.0.1:8000", token) as client:
        with client.run(task="…", intent="refund_request", source="my-agent", workspace="support") as run:
            ...

See docs/integrations/python-client.md in the Waymark repository.
"""

from ._async import AsyncRun, AsyncRunContext, AsyncWaymark
from ._core import ResponseCache, RetryPolicy
from ._errors import (
    APIError,
    AuthenticationError,
    ConflictError,
    InvalidRequest,
    NotFoundError,
    PermissionDenied,
    RateLimited,
    ServerError,
    WaymarkConnectionError,
    WaymarkError,
)
from ._models import GraphRevision, Guidance, Job, JobAnswer, JobOutcome, Procedure, Procedures, PushResult
from ._recording import RecordedRun, current_run, tool
from ._sync import Run, RunContext, Waymark

__version__ = "0.1.0"

__all__ = [
    "APIError",
    "AsyncRun",
    "AsyncRunContext",
    "AsyncWaymark",
    "AuthenticationError",
    "ConflictError",
    "GraphRevision",
    "Guidance",
    "InvalidRequest",
    "Job",
    "JobAnswer",
    "JobOutcome",
    "NotFoundError",
    "PermissionDenied",
    "Procedure",
    "Procedures",
    "PushResult",
    "RateLimited",
    "RecordedRun",
    "ResponseCache",
    "RetryPolicy",
    "Run",
    "RunContext",
    "ServerError",
    "Waymark",
    "WaymarkConnectionError",
    "WaymarkError",
    "current_run",
    "tool",
]
