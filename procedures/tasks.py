"""Thin Celery tasks of procedures: ids in, re-fetch, return early when already done, call a service."""

from celery import shared_task

from accounts.services import Actor
from common.liveness import lease_owner
from common.retry import RETRY

from . import errors
from .mining import services as mining_services
from .models import ReplayRun
from .replay.services import live as live_replay_services
from .replay.services import offline as offline_replay_services


@shared_task(name="procedures.replay_offline", bind=True, ignore_result=True, **RETRY)
def replay_offline(self, replay_id: int) -> None:
    """Claim the offline replay with a lease and run it. A message redelivered while another worker's lease is still
    live (say, the pool process was killed a moment ago) comes back when that lease runs out and takes over."""
    replay = ReplayRun.objects.filter(pk=replay_id).first()
    if replay is None:
        return
    offline_replay_services.replay_offline_run(replay=replay, worker=lease_owner(self.request.id))
    wait = offline_replay_services.replay_lease_wait(replay_id)
    if wait is not None and wait > 0 and not self.request.is_eager:  # held elsewhere: look again when it runs out
        self.apply_async((replay_id,), countdown=wait + 1)


@shared_task(name="procedures.requeue_expired_replays", ignore_result=True)
def requeue_expired_replays() -> list[int]:
    """Celery beat, every minute: offline replays whose worker died (lease ran out) or whose message was lost are
    enqueued again; those out of attempts fail with the reason."""
    ids = offline_replay_services.replays_to_requeue()
    for replay_id in ids:
        replay_offline.delay(replay_id)
    return ids


@shared_task(name="procedures.replay_live_start", ignore_result=True, **RETRY)
def replay_live_start(replay_id: int) -> None:
    replay = ReplayRun.objects.filter(pk=replay_id).first()
    if replay is not None:
        live_replay_services.replay_live_start(replay=replay)


@shared_task(name="procedures.replay_live_settle", ignore_result=True, **RETRY)
def replay_live_settle(replay_id: int) -> None:
    replay = ReplayRun.objects.filter(pk=replay_id).first()
    if replay is not None:
        live_replay_services.replay_live_settle(replay=replay)


@shared_task(name="procedures.settle_overdue_replays", ignore_result=True)
def settle_overdue_replays() -> int:
    """Celery beat, every minute: live replays past their deadline are finished with what was answered."""
    overdue = live_replay_services.overdue_live_replays()
    for replay_id in overdue:
        replay_live_settle.delay(replay_id)
    return len(overdue)


@shared_task(name="procedures.mine_new_runs", ignore_result=True)
def mine_new_runs() -> list[str]:
    """Celery beat: mine each intent again once WAYMARK_MINE_MIN_NEW_RUNS new successful runs arrived."""
    mined = []
    for key in mining_services.intents_due_for_mining():
        try:
            mining_services.procedure_mine(actor=Actor.system(), intent=key)
        except errors.MiningError:
            continue
        mined.append(key)
    return mined


def on_replay_job_answered(job_id: int, subject: str) -> None:
    """trajectories.jobs callback (after commit): see whether the live replay the job belongs to is complete."""
    prefix = "procedures.replayrun:"
    if subject.startswith(prefix) and subject[len(prefix) :].isdigit():
        replay_live_settle.delay(int(subject[len(prefix) :]))
