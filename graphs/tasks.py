"""Thin Celery tasks of graphs: ids in, re-fetch, return early when already done, call a service."""

from __future__ import annotations

from celery import shared_task

from common.liveness import lease_owner
from common.retry import RETRY

from . import certification_services
from .evolution import services


@shared_task(name="graphs.evolution_step", bind=True, ignore_result=True, **RETRY)
def evolution_step(self, run_id: int) -> None:
    """The steps of an evolution run (the baseline, then one round each) for a time slice: each step hands the run
    on as it ends, and this task takes the next one itself until the slice is over (then it goes out as a message,
    so a long run shares the workers). A run held by a live worker is tried again when its lease runs out; a
    finished run is left alone."""
    worker = lease_owner(self.request.id)
    with services.StepsHere(run_id, services.slice_seconds()) as here:
        while True:
            result = services.evolution_step(run_id=run_id, worker=worker)
            if result is None:
                wait = services.lease_wait(run_id)
                if wait is not None:  # 0: the lease ran out since the claim, so the next try takes it
                    self.apply_async((run_id,), countdown=wait + 1)
                return
            if not here.take():
                return


@shared_task(name="graphs.certification_step", bind=True, ignore_result=True, **RETRY)
def certification_step(self, certification_id: int) -> None:
    """Measure what is left of a graph certification and issue its certificate. One held by a live worker is tried
    again when its lease runs out; a finished one is left alone."""
    result = certification_services.certification_step(
        certification_id=certification_id, worker=lease_owner(self.request.id)
    )
    if result is None:
        wait = certification_services.lease_wait(certification_id)
        if wait is not None:  # 0: the lease ran out since the claim, so the next try takes it
            self.apply_async((certification_id,), countdown=wait + 1)


@shared_task(name="graphs.evolution_reap", ignore_result=True)
def evolution_reap() -> list[int]:
    """Celery beat, every minute: runs (and graph certifications) whose worker died or whose message was lost get
    their next step again. Returns the runs'."""
    ids = services.evolution_runs_to_resume()
    for run_id in ids:
        evolution_step.delay(run_id)
    for certification_id in certification_services.certifications_to_resume():
        certification_step.delay(certification_id)
    return ids


def on_evaluation_job(job_id: int, subject: str) -> None:
    """trajectories.jobs callback (after commit): an agent answered a job of a run or of a certification, or its
    jobs expired."""
    from .evolution.jobs import certification_id_of_subject, run_id_of_subject

    run_id = run_id_of_subject(subject)
    if run_id is not None:
        evolution_step.delay(run_id)
    certification_id = certification_id_of_subject(subject)
    if certification_id is not None:
        certification_step.delay(certification_id)
