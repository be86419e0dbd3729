"""Celery tasks of the OTLP ingest: beat completes the traces that went quiet."""

from celery import shared_task

from common.retry import RETRY


@shared_task(name="otlp.sweep_quiet_traces", ignore_result=True, **RETRY)
def sweep_quiet_traces() -> int:
    """Beat, every minute: pending traces with no span for WAYMARK_OTLP_QUIET_SECONDS become runs (or are discarded)."""
    from .services import otlp_traces_sweep

    return otlp_traces_sweep()
