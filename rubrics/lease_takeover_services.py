"""Rubric jobs whose worker process died are taken over now, not when their lease runs out.

common.liveness (beat, every few seconds) asks `rubric_lease_holders()` for the owners of live job leases and hands
those whose process stopped stamping its liveness to `rubric_leases_release`, which ends their leases (only jobs
still running under that owner: a conditional update) with an audit event from the system actor, and enqueues
`reviews.rubric_reap` (rubrics.tasks) on commit: the job is claimed again at once, keeping the judges already written.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounts.services import Actor, audit_record
from common.liveness import register_leases

from .models import RubricJob, RubricJobStatus

LEASES = RubricJob._meta.label_lower  # "rubrics.rubricjob", as audit events name a job


def _held(now: datetime):
    return RubricJob.objects.filter(status=RubricJobStatus.RUNNING, lease_expires_at__gt=now).exclude(lease_owner="")


def rubric_lease_holders(*, now: datetime | None = None) -> list[str]:
    return list(_held(now or timezone.now()).values_list("lease_owner", flat=True).distinct())


def rubric_leases_release(*, owners: Collection[str], now: datetime | None = None) -> int:
    """End the live leases of rubric jobs held by `owners` (dead worker processes); returns how many."""
    now = now or timezone.now()
    released = 0
    with transaction.atomic(durable=True):
        for pk, owner, expires in (
            _held(now).filter(lease_owner__in=list(owners)).values_list("pk", "lease_owner", "lease_expires_at")
        ):
            if not _held(now).filter(pk=pk, lease_owner=owner).update(lease_expires_at=now):
                continue  # renewed or finished meanwhile
            audit_record(
                actor=Actor.system(),
                verb="rubricjob.lease_released",
                target=(LEASES, str(pk)),
                before={"lease_owner": owner, "lease_expires_at": expires.isoformat()},
                after={"lease_expires_at": now.isoformat(), "reason": "its worker process stopped"},
            )
            released += 1
        if released:
            transaction.on_commit(_take_over)
    return released


def _take_over() -> None:
    from .tasks import rubric_reap

    rubric_reap.delay()


register_leases(LEASES, holders=rubric_lease_holders, release=rubric_leases_release)
