"""uplift's Celery tasks: thin, each calls one service."""

from __future__ import annotations

from celery import shared_task

from common.liveness import process_name

from . import services, watch_services


@shared_task(name="uplift.coverage_check", acks_late=True, ignore_result=True)
def coverage_check(kind: str | None = None) -> dict[str, int]:
    """Flag and clear "not certified for <model>" (beat, every 10 minutes; and after a flagged candidate's new
    certificate)."""
    return services.coverage_check(kind=kind)


@shared_task(name="uplift.watch_tick", ignore_result=True)
def watch_tick() -> int:
    """Beat, every minute: a look at every running watch."""
    ids = watch_services.running_watches()
    for watch_id in ids:
        watch_look.delay(watch_id)
    return len(ids)


@shared_task(name="uplift.watch_look", bind=True, acks_late=True, ignore_result=True)
def watch_look(self, watch_id: int) -> None:
    """One look at a watch (leased: a second worker finds it taken and returns)."""
    watch_services.watch_look(watch_id=watch_id, worker=f"{process_name()}:{self.request.id}")
