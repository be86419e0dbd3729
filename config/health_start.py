"""When this web process started, for /healthz's "starting" (issue 24).

Right after a cold start the worker has not stamped its heartbeat yet (config.heartbeat), and the stamp the cache
kept from the last run is old: /healthz would say "degraded" though nothing is wrong. For as long as a running
stack may go without a heartbeat (WAYMARK_HEARTBEAT_STALE_SECONDS) after the web process started, a worker check
that is not ok and has no stamp written since then answers "starting" instead. A worker that stamped after the
start and then went quiet is "degraded" as before, and so is everything once the grace is over.

config/wsgi.py notes the start when it builds the application (gunicorn's workers, runserver); a process that
serves no WSGI application (tests, management commands) never says "starting".
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from django.conf import settings

_started_at: float | None = None


def note_web_started(at: float | None = None) -> None:
    global _started_at
    _started_at = time.time() if at is None else at


def is_starting(worker: Mapping[str, Any], *, now: float | None = None) -> bool:
    """True while this web process is within its grace and `worker` (config.heartbeat.worker_state()) is not ok
    and was not stamped since the process started."""
    if _started_at is None or worker.get("ok"):
        return False
    age = (time.time() if now is None else now) - _started_at
    if age > settings.WAYMARK_HEARTBEAT_STALE_SECONDS:
        return False
    stamp_age = worker.get("age_seconds")
    return stamp_age is None or stamp_age >= age
