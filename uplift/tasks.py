"""uplift's Celery tasks: thin, each calls one service."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(name="uplift.coverage_check", acks_late=True, ignore_result=True)
def coverage_check(kind: str | None = None) -> dict[str, int]:
    """Flag and clear "not certified for <model>" (beat, every 10 minutes; and after a flagged candidate's new
    certificate)."""
    return services.coverage_check(kind=kind)
