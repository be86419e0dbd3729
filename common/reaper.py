"""The periodic reaper for work stuck in `running` (a worker died, a process was killed mid-call).

config knows no app's tables. Each app that can leave work running registers, from its AppConfig.ready(), a service
of its own that settles its stuck rows, under the label of its model:

    register_stuck_work("llm.modelcall", model_calls_abandon_stuck)

A reaper is called as `reap(cutoff=...)` and returns how many rows it marked: the rows still `running` that started
before the cutoff. Celery beat runs `reap_stuck_work` every minute (CELERY_BEAT_SCHEDULE) with the cutoff now minus
settings.WAYMARK_STUCK_AFTER_SECONDS. The app's service writes and audits (verb "<model>.reaped", actor system); it
updates only rows still running and old, so reaping is idempotent and never overwrites work that finished meanwhile.

Leased work (replays, evolution steps, proposal batches, rubric jobs) is not reaped here: its leases run out, and
common/liveness.py ends them early when their worker process is known dead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

Reaper = Callable[..., int]  # reap(*, cutoff: datetime) -> rows marked stuck

_registry: dict[str, Reaper] = {}


def register_stuck_work(label: str, reap: Reaper) -> None:
    """Declare that `reap(cutoff=...)` settles the stuck rows of `label` ("app.model"). Registering again replaces."""
    if not callable(reap):
        raise TypeError(f"the reaper of {label} must be callable")
    _registry[label] = reap


def registered_stuck_work() -> dict[str, Reaper]:
    return dict(_registry)


def stuck_work_reap(*, now: datetime | None = None, stuck_after: timedelta | None = None) -> dict[str, int]:
    """Call every registered reaper with the cutoff. Returns the count reaped per label."""
    now = now or timezone.now()
    stuck_after = stuck_after if stuck_after is not None else timedelta(seconds=settings.WAYMARK_STUCK_AFTER_SECONDS)
    cutoff = now - stuck_after
    return {label: reap(cutoff=cutoff) for label, reap in registered_stuck_work().items()}


@shared_task(name="common.reaper.reap_stuck_work", ignore_result=True)
def reap_stuck_work() -> dict[str, int]:
    """Celery beat, every minute: reap work stuck in running."""
    return stuck_work_reap()
