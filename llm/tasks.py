"""Thin Celery tasks of llm."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(name="llm.roll_up_call_totals", ignore_result=True)
def roll_up_call_totals() -> int:
    """Celery beat, every ten minutes: the settled calls into the ledger's totals (the calls page reads them)."""
    return services.model_call_totals_roll()
