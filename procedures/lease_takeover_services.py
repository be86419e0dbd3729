"""Offline replays held by a worker process that died are taken over now, not when their lease runs out.

common.liveness (beat, every few seconds) asks `replay_lease_holders()` for the owners of live replay leases and
hands those whose process stopped stamping its liveness to `replay_leases_release`, which ends their leases (only
rows still running under that owner: a conditional update) with an audit event from the system actor, and enqueues
`procedures.requeue_expired_replays` on commit: the usual take-over (a fresh claim, attempts counted) runs at once.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounts.services import Actor, audit_record
from common.liveness import register_leases

from .models import ReplayMode, ReplayRun, ReplayStatus


def _held(now: datetime):
    return ReplayRun.objects.filter(
        mode=ReplayMode.OFFLINE, status=ReplayStatus.RUNNING, lease_expires_at__gt=now
    ).exclude(lease_owner="")


def replay_lease_holders(*, now: datetime | None = None) -> list[str]:
    return list(_held(now or timezone.now()).values_list("lease_owner", flat=True).distinct())


def replay_leases_release(*, owners: Collection[str], now: datetime | None = None) -> int:
    """End the live leases of offline replays held by `owners` (dead worker processes); returns how many."""
    now = now or timezone.now()
    released = 0
    with transaction.atomic(durable=True):
        for pk, owner, expires in (
            _held(now).filter(lease_owner__in=list(owners)).values_list("pk", "lease_owner", "lease_expires_at")
        ):
            if not _held(now).filter(pk=pk, lease_owner=owner).update(lease_expires_at=now):
                continue  # renewed or finished meanwhile: its worker was not dead after all, or is done
            audit_record(
                actor=Actor.system(),
                verb="replayrun.lease_released",
                target=("procedures.replayrun", str(pk)),
                before={"lease_owner": owner, "lease_expires_at": expires.isoformat()},
                after={"lease_expires_at": now.isoformat(), "reason": "its worker process stopped"},
            )
            released += 1
        if released:
            transaction.on_commit(_take_over)
    return released


def _take_over() -> None:
    from .tasks import requeue_expired_replays

    requeue_expired_replays.delay()


register_leases("procedures.replayrun", holders=replay_lease_holders, release=replay_leases_release)
