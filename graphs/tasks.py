"""Thin Celery tasks of graphs: ids in, re-fetch, return early when already done, call a service."""

from __future__ import annotations

import os
import socket

from celery import shared_task

from config.celery import TRANSIENT_ERRORS

from .evolution import services

RETRY = {"autoretry_for": TRANSIENT_ERRORS, "retry_backoff": True, "max_retries": 5}


def _worker_name(task_id: str | None) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{task_id or 'local'}"


@shared_task(name="graphs.evolution_step", bind=True, ignore_result=True, **RETRY)
def evolution_step(self, run_id: int) -> None:
    """One step of an evolution run (the baseline, or one round). A run held by a live worker is tried again when
    its lease runs out; a finished run is left alone."""
    result = services.evolution_step(run_id=run_id, worker=_worker_name(self.request.id))
    if result is None:
        wait = services.lease_wait(run_id)
        if wait is not None and wait > 0:
            self.apply_async((run_id,), countdown=wait + 1)


@shared_task(name="graphs.evolution_reap", ignore_result=True)
def evolution_reap() -> list[int]:
    """Celery beat, every minute: runs whose worker died or whose message was lost get their next step again."""
    ids = services.evolution_runs_to_resume()
    for run_id in ids:
        evolution_step.delay(run_id)
    return ids


def on_evaluation_job(job_id: int, subject: str) -> None:
    """trajectories.jobs callback (after commit): an agent answered a job of a run, or its jobs expired."""
    from .evolution.jobs import run_id_of_subject

    run_id = run_id_of_subject(subject)
    if run_id is not None:
        evolution_step.delay(run_id)
