"""The worker heartbeat: beat enqueues `heartbeat` every minute, a worker stamps the time in the cache, /healthz
reads its age. A fresh stamp proves beat, the broker and at least one worker are all running. Which worker processes
are alive, one by one (to take a dead one's leases over), is config/liveness.py's."""

from __future__ import annotations

import time

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

HEARTBEAT_KEY = "waymark:worker-heartbeat"


@shared_task(name="config.heartbeat.heartbeat", ignore_result=True)
def heartbeat() -> None:
    cache.set(HEARTBEAT_KEY, time.time(), timeout=None)


def worker_state() -> dict:
    """{"state": ok|stale|unknown, "ok": bool, "age_seconds": int|None}; unknown when no stamp was ever written."""
    stamp = cache.get(HEARTBEAT_KEY)
    if stamp is None:
        return {"ok": False, "state": "unknown", "age_seconds": None}
    age = max(0, int(time.time() - float(stamp)))
    fresh = age <= settings.WAYMARK_HEARTBEAT_STALE_SECONDS
    return {"ok": fresh, "state": "ok" if fresh else "stale", "age_seconds": age}
