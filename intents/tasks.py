"""Thin Celery tasks of intents: ids in, re-fetch, return early when already done, call a service."""

from __future__ import annotations

from celery import shared_task

from common.liveness import lease_owner
from common.retry import RETRY

from . import services


@shared_task(name="intents.proposal_step", bind=True, ignore_result=True, **RETRY)
def intent_proposal_step(self, run_id: int) -> None:
    """One batch of a proposal run. A run held by a live worker is tried again when its lease runs out; a finished
    run is left alone. The step enqueues the next one on commit."""
    result = services.intent_proposal_step(run_id=run_id, worker=lease_owner(self.request.id))
    if result is None:
        wait = services.lease_wait(run_id)
        if wait is not None:  # 0: the lease ran out since the claim, so the next try takes it
            self.apply_async((run_id,), countdown=wait + 1)


@shared_task(name="intents.propose_new_runs", ignore_result=True)
def propose_new_runs() -> int | None:
    """Celery beat, every WAYMARK_INTENT_PROPOSE_EVERY_MINUTES: propose intents for runs no proposal covered yet."""
    run = services.intent_proposals_schedule()
    return run.pk if run is not None else None


@shared_task(name="intents.proposal_reap", ignore_result=True)
def proposal_reap() -> list[int]:
    """Celery beat, every minute: runs whose worker died or whose message was lost get their next step again."""
    ids = services.intent_proposals_to_resume()
    for run_id in ids:
        intent_proposal_step.delay(run_id)
    return ids
