"""Celery tasks of the OTLP ingest: beat completes the traces that went quiet."""

from celery import shared_task

from common.retry import TRANSIENT_ERRORS


@shared_task(
    name="otlp.sweep_quiet_traces",
    ignore_result=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=True,
    max_retries=3,
)
def sweep_quiet_traces() -> int:
    """Beat, every minute: pending traces with no span for WAYMARK_OTLP_QUIET_SECONDS become runs (or are discarded)."""
    from .services import otlp_traces_sweep

    return otlp_traces_sweep()
