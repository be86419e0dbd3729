"""The periodic reaper for work stuck in `running` (a worker died, a process was killed mid-call).

Apps register what can get stuck from their AppConfig.ready():

    register_stuck_work(ModelCall, status_field="status", running="running", since_field="started_at",
                        stuck_status="abandoned")

Celery beat runs `reap_stuck_work` every minute (CELERY_BEAT_SCHEDULE); it marks every registered row that has been
`running` for longer than settings.WAYMARK_STUCK_AFTER_SECONDS as stuck, with one audit event per row (actor system,
verb "<model>.reaped"). The update is conditional on the row still being running and old, so the reaper is
idempotent and never overwrites work that finished meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

REAP_BATCH = 500


@dataclass(frozen=True)
class StuckWork:
    model: type[models.Model]
    status_field: str
    running: str
    since_field: str
    stuck_status: str
    only: Mapping[str, Any] = field(default_factory=dict)
    on_reaped: Callable[[list[int]], None] | None = None

    @property
    def label(self) -> str:
        return self.model._meta.label_lower

    @property
    def verb(self) -> str:
        return f"{self.model._meta.model_name}.reaped"


_registry: dict[str, StuckWork] = {}


def register_stuck_work(
    model: type[models.Model],
    *,
    status_field: str,
    running: str,
    since_field: str,
    stuck_status: str,
    only: Mapping[str, Any] | None = None,
    on_reaped: Callable[[list[int]], None] | None = None,
) -> StuckWork:
    """Declare that rows of `model` left in `running` for too long become `stuck_status`. Registering again replaces.

    `only` narrows the rows (filter lookups, e.g. {"mode": "offline"}); `on_reaped(pks)` runs inside the reaping
    transaction so the owning app can settle what depended on the reaped rows."""
    for name in (status_field, since_field):
        model._meta.get_field(name)  # FieldDoesNotExist for a typo, at start-up
    if running == stuck_status:
        raise ValueError("the stuck status must differ from the running status")
    entry = StuckWork(model, status_field, running, since_field, stuck_status, dict(only or {}), on_reaped)
    _registry[entry.label] = entry
    return entry


def registered_stuck_work() -> tuple[StuckWork, ...]:
    return tuple(_registry.values())


def stuck_work_reap(*, now: datetime | None = None, stuck_after: timedelta | None = None) -> dict[str, int]:
    """Mark every registered row running since before the cutoff as stuck. Returns the count reaped per model."""
    now = now or timezone.now()
    stuck_after = stuck_after if stuck_after is not None else timedelta(seconds=settings.WAYMARK_STUCK_AFTER_SECONDS)
    cutoff = now - stuck_after
    return {entry.label: _reap(entry, cutoff) for entry in registered_stuck_work()}


def _reap(entry: StuckWork, cutoff: datetime) -> int:
    from accounts.services import Actor, audit_record

    stuck = {**entry.only, entry.status_field: entry.running, f"{entry.since_field}__lt": cutoff}
    with transaction.atomic(durable=True):
        rows = list(
            entry.model._default_manager.select_for_update(skip_locked=True)
            .filter(**stuck)
            .order_by(entry.since_field, "pk")[:REAP_BATCH]
        )
        if not rows:
            return 0
        reaped = entry.model._default_manager.filter(pk__in=[row.pk for row in rows], **stuck).update(
            **{entry.status_field: entry.stuck_status}
        )
        for row in rows:
            since = getattr(row, entry.since_field)
            audit_record(
                actor=Actor.system(),
                verb=entry.verb,
                target=row,
                before={entry.status_field: entry.running},
                after={
                    entry.status_field: entry.stuck_status,
                    "running_since": since.isoformat(),
                    "cutoff": cutoff.isoformat(),
                },
            )
        if entry.on_reaped is not None:
            entry.on_reaped([row.pk for row in rows])
    return reaped


@shared_task(name="config.reaper.reap_stuck_work", ignore_result=True)
def reap_stuck_work() -> dict[str, int]:
    """Celery beat, every minute: reap work stuck in running."""
    return stuck_work_reap()
