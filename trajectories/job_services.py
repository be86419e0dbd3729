"""Every write on evaluation jobs (trajectories.jobs): create, claim with a lease, answer with a run, reap.

* `jobs_create` runs inside the caller's transaction (like audit_record), so an owning app creates its jobs in the
  same transaction as the evaluation they belong to.
* `job_claim` leases the oldest claimable job among one kind or several (one agent loop serves several kinds):
  queued, or leased with a lease that ran out; never one past its deadline. PostgreSQL skips rows other claimers
  hold (SELECT … FOR UPDATE SKIP LOCKED); every database also re-checks the status in a conditional update, so two
  claimers never get the same lease. The claiming token is stored (`claimed_by_token`); `worker` is informational.
* `job_complete` accepts an answer only from the token of the latest claim (NotClaimant otherwise, even for a
  repeat), then stores the answered run (the ingest format and validation, all or nothing) under a fixed identity
  (source "waymark-evaluation", external_id "job-<id>") in the transaction that marks the job done, under the job's
  row lock: posting a result twice stores one run and counts one answer. Ingest refuses that namespace
  (trajectories.services), so no other writer can plant a run there; a run that holds a job's identity without
  being its answer (stored before that refusal existed) is never counted: the job answers 409 `answer_taken`.
* `jobs_reap` returns expired leases to the queue and expires jobs past their deadline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.services import Actor, audit_record
from common.leases import RELEASED, lease_claim, lease_until

from .jobs import job_kind
from .models import EVALUATION_SOURCE, Job, JobStatus
from .services import AnswerIdentityTaken, IngestInvalid, run_record_job_answer, validate_job_answer

RESULT_SOURCE = EVALUATION_SOURCE
MAX_LEASE_SECONDS = 3600
REAP_BATCH = 500


class JobClosed(Exception):
    """The job can no longer be answered (expired) or was never claimed."""


class NotClaimant(Exception):
    """The answer comes from another token than the one that claimed the job (its latest claim)."""


class AnswerTaken(JobClosed):
    """A run already holds this job's answer identity without being its answer: the job cannot be answered."""


@dataclass(frozen=True)
class JobAnswer:
    job: Job
    run_id: int
    counted: bool  # False when the job had been answered already (the repeat is not counted again)


def result_external_id(job: Job) -> str:
    return f"job-{job.pk}"


def jobs_create(
    *, kind: str, subject: str, payloads: Sequence[dict[str, Any]], deadline: datetime | None = None
) -> list[Job]:
    """Queue one job per payload. Must run inside the caller's transaction (which audits the evaluation)."""
    if not connection.in_atomic_block:
        raise RuntimeError("jobs_create must run inside the transaction of the evaluation it belongs to")
    if job_kind(kind) is None:
        raise ValueError(f"unknown job kind {kind!r}: register it with trajectories.jobs.register_job_kind")
    return Job.objects.bulk_create(
        [Job(kind=kind, subject=subject, payload=payload, deadline=deadline) for payload in payloads]
    )


def _claimable(kinds: Sequence[str], now: datetime, match: Mapping[str, Sequence[Any]] | None = None):
    waiting = Q(status=JobStatus.QUEUED) | Q(status=JobStatus.LEASED, lease_expires_at__lt=now)
    jobs = Job.objects.filter(waiting, kind__in=kinds).filter(Q(deadline__isnull=True) | Q(deadline__gt=now))
    for key, values in (match or {}).items():
        jobs = jobs.filter(**{f"payload__{key}__in": list(values)})
    return jobs


def job_claim(
    *,
    actor: Actor,
    kind: str | None = None,
    kinds: Sequence[str] | None = None,
    worker: str,
    lease_seconds: int,
    match: Mapping[str, Sequence[Any]] | None = None,
    now: datetime | None = None,
) -> Job | None:
    """Lease the oldest claimable job of `kind` (or of any of `kinds`) to `worker` for `lease_seconds`; None when
    there is none. Give exactly one of `kind` and `kinds`; an empty `kinds` claims nothing. `match` narrows the offer
    to jobs whose payload holds, for each key, one of its values (keys are plain names: the API's schema checks)."""
    if (kind is None) == (kinds is None):
        raise TypeError("job_claim takes exactly one of kind= and kinds=")
    if isinstance(kinds, str):
        raise TypeError("kinds is a sequence of kind names, not one name: use kind= for one")
    names = (kind,) if kind is not None else tuple(dict.fromkeys(kinds))
    if not 1 <= lease_seconds <= MAX_LEASE_SECONDS:
        raise ValueError(f"lease_seconds must be between 1 and {MAX_LEASE_SECONDS}")
    if not names:
        return None
    worker = (worker or "").strip()[:200] or actor.label[:200]
    now = now or timezone.now()
    skip_locked = connection.features.has_select_for_update_skip_locked
    with transaction.atomic(durable=True):
        for _ in range(5):
            rows = _claimable(names, now, match).order_by("id")
            rows = rows.select_for_update(skip_locked=True) if skip_locked else rows.select_for_update()
            job = rows.first()
            if job is None:
                return None
            before = {"status": job.status, "lease_owner": job.lease_owner}
            expires = lease_until(lease_seconds, now)
            taken = lease_claim(
                _claimable(names, now, match).filter(pk=job.pk, status=job.status),
                owner=worker,
                seconds=lease_seconds,
                now=now,
                status=JobStatus.LEASED,
                claimed_by_token=actor.token,
                attempts=job.attempts + 1,
            )
            if not taken:
                continue
            job.refresh_from_db()
            audit_record(
                actor=actor,
                verb="job.claim",
                target=job,
                before=before,
                after={
                    "status": job.status,
                    "lease_owner": worker,
                    "token": actor.token.pk if actor.token is not None else None,
                    "lease_expires_at": expires.isoformat(),
                },
            )
            return job
    return None


def _one_run(job: Job, run_items: Any) -> list[dict[str, Any]]:
    if not isinstance(run_items, list | tuple) or len(run_items) != 1 or not isinstance(run_items[0], dict):
        raise IngestInvalid([{"loc": ["runs"], "msg": "a job is answered with exactly one run", "type": "too_long"}])
    item = dict(run_items[0])
    metadata = item.get("metadata")
    item["source"] = RESULT_SOURCE
    item["external_id"] = result_external_id(job)
    item["metadata"] = {
        **(metadata if isinstance(metadata, dict) else {}),
        "job": {"id": job.pk, "kind": job.kind, "subject": job.subject},
    }
    if not item.get("intent") and isinstance(job.payload.get("intent"), str):
        item["intent"] = job.payload["intent"]
    return [item]


def _check_answerable(job: Job, now: datetime) -> None:
    if job.status == JobStatus.EXPIRED or (job.deadline is not None and job.deadline <= now):
        raise JobClosed(f"job {job.pk} is past its deadline and takes no more answers")
    if job.attempts == 0:
        raise JobClosed(f"job {job.pk} has not been claimed: claim it before answering")


def _check_claimant(job: Job, actor: Actor) -> None:
    """Only the token of the job's latest claim may answer it (a claim without a token: only an answer without one)."""
    if job.attempts == 0:
        return  # never claimed: _check_answerable says so
    token_id = actor.token.pk if actor.token is not None else None
    if job.claimed_by_token_id != token_id:
        raise NotClaimant(f"job {job.pk} was claimed by another token: only the token that claimed it may answer it")


def job_complete(*, job: Job, run_items: Any, actor: Actor | None = None, now: datetime | None = None) -> JobAnswer:
    """Answer `job` with one run in the ingest format. Bad input raises IngestInvalid and writes nothing; an
    expired or unclaimed job raises JobClosed; an answer from another token than the claiming one raises NotClaimant
    (a repeat included); a repeat of an answered job returns its run, `counted` False."""
    actor = actor or Actor.system()
    now = now or timezone.now()
    job = Job.objects.get(pk=job.pk)
    if job.status != JobStatus.DONE:
        _check_answerable(job, now)  # an expired or unclaimed job is closed to everyone: 409 before who asks
    _check_claimant(job, actor)
    if job.status == JobStatus.DONE:
        return JobAnswer(job=job, run_id=job.result_run_id, counted=False)
    answer = validate_job_answer(_one_run(job, run_items)[0])  # bad input fails before any lock is taken
    with transaction.atomic(durable=True):
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status != JobStatus.DONE:
            _check_answerable(locked, now)
        _check_claimant(locked, actor)
        if locked.status == JobStatus.DONE:
            return JobAnswer(job=locked, run_id=locked.result_run_id, counted=False)
        try:
            run_id = run_record_job_answer(actor=actor, run=answer)
        except AnswerIdentityTaken as taken:
            raise AnswerTaken(f"job {locked.pk} cannot be answered: {taken}") from None
        before = {"status": locked.status, "lease_owner": locked.lease_owner}
        locked.status = JobStatus.DONE
        locked.result_run_id = run_id
        locked.finished_at = now
        locked.save(update_fields=["status", "result_run", "finished_at"])
        audit_record(
            actor=actor, verb="job.answer", target=locked, before=before, after={"status": "done", "run": run_id}
        )
        kind = job_kind(locked.kind)
        if kind is not None and kind.on_answered is not None:
            callback = kind.on_answered
            transaction.on_commit(lambda: callback(locked.pk, locked.subject))
    return JobAnswer(job=locked, run_id=run_id, counted=True)


def answering_agents(subject: str) -> list[dict[str, Any]]:
    """Who produced the counted answers of `subject`'s jobs: one row per answering token, with its agent identity
    (username), token name and lookup prefix, the number of answers and the ids of the runs they answered with; the
    evidence a gate report names. An answer is counted exactly when its job is done with a run, and that run was
    written by this token in the transaction that closed the job (job_complete)."""
    rows = (
        Job.objects.filter(subject=subject, status=JobStatus.DONE, result_run__isnull=False)
        .values_list(
            "claimed_by_token__user__username",
            "claimed_by_token__user__is_agent",
            "claimed_by_token__name",
            "claimed_by_token__prefix",
            "result_run_id",
        )
        .order_by("result_run_id")
    )
    runs: dict[tuple, list[int]] = {}
    for username, is_agent, token_name, prefix, run_id in rows:
        key = (username or "unknown", bool(is_agent), token_name or "", prefix or "")
        runs.setdefault(key, []).append(run_id)
    return [
        {
            "agent": username,
            "is_agent": is_agent,
            "token": token_name,
            "token_prefix": prefix,
            "answers": len(run_ids),
            "run_ids": run_ids,
        }
        for (username, is_agent, token_name, prefix), run_ids in sorted(runs.items())
    ]


def jobs_expire(*, subject: str, now: datetime | None = None) -> int:
    """Expire the unanswered jobs of `subject`. Runs inside the caller's transaction (which audits the reason)."""
    if not connection.in_atomic_block:
        raise RuntimeError("jobs_expire must run inside the caller's transaction")
    return Job.objects.filter(subject=subject, status__in=[JobStatus.QUEUED, JobStatus.LEASED]).update(
        status=JobStatus.EXPIRED, finished_at=now or timezone.now()
    )


def jobs_reap(*, now: datetime | None = None) -> dict[str, int]:
    """Leases that ran out go back to the queue; jobs past their deadline expire. One audit event per job."""
    now = now or timezone.now()
    counts = {"requeued": 0, "expired": 0}
    subjects: dict[str, set[str]] = {}
    with transaction.atomic(durable=True):
        overdue = list(
            Job.objects.select_for_update()
            .filter(status__in=[JobStatus.QUEUED, JobStatus.LEASED], deadline__lte=now)
            .order_by("id")[:REAP_BATCH]
        )
        for job in overdue:
            audit_record(
                actor=Actor.system(),
                verb="job.expire",
                target=job,
                before={"status": job.status},
                after={"status": "expired"},
            )
            subjects.setdefault(job.kind, set()).add(job.subject)
        counts["expired"] = Job.objects.filter(pk__in=[job.pk for job in overdue]).update(
            status=JobStatus.EXPIRED, finished_at=now
        )
        lapsed = list(
            Job.objects.select_for_update()
            .filter(status=JobStatus.LEASED, lease_expires_at__lt=now)
            .order_by("id")[:REAP_BATCH]
        )
        for job in lapsed:
            audit_record(
                actor=Actor.system(),
                verb="job.requeue",
                target=job,
                before={"status": "leased", "lease_owner": job.lease_owner},
                after={"status": "queued"},
            )
        counts["requeued"] = Job.objects.filter(pk__in=[job.pk for job in lapsed]).update(
            status=JobStatus.QUEUED, **RELEASED
        )
        for name, names in subjects.items():
            kind = job_kind(name)
            if kind is not None and kind.on_expired is not None:
                callback = kind.on_expired
                for subject in sorted(names):
                    transaction.on_commit(lambda subject=subject, callback=callback: callback(0, subject))
    return counts
