"""The worker heartbeat: beat enqueues `heartbeat` every minute, a worker stamps the time in the cache, /healthz
reads its age. A fresh stamp proves beat, the broker and at least one worker are all running. Which worker processes
are alive, one by one (to take a dead one's leases over), is common/liveness.py's."""

from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.signals import worker_ready
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


@worker_ready.connect(dispatch_uid="config.heartbeat.when_ready")
def heartbeat_when_ready(**_kwargs) -> None:
    """A worker that is ready sends itself a heartbeat through the broker (issue 24), so a cold-started stack is "ok"
    as soon as a worker runs tasks instead of after beat's first heartbeat (up to a minute). Until beat's own next
    heartbeat this stamp proves the broker and a worker, not beat; a beat that never sends one still leaves it to go
    stale. Never stops a worker from starting."""
    try:
        heartbeat.apply_async(expires=60)
    except Exception:
        logging.getLogger("waymark.heartbeat").warning("the heartbeat of a ready worker was not sent", exc_info=True)
