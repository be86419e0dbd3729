"""Evaluation jobs: leases, expiry and re-claim, answers stored once through ingest, bad answers write nothing."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import Actor
from trajectories import job_services
from trajectories.jobs import register_job_kind
from trajectories.models import Job, JobStatus, Run, Step

from .factories import run_item

pytestmark = pytest.mark.django_db
KIND = "test_evaluation"
answered_calls = []
register_job_kind(KIND, on_answered=lambda job_id, subject: answered_calls.append((job_id, subject)))
AGENT = Actor.system()


def queue(count=2, deadline=None, subject="test:1"):
    with transaction.atomic():
        return job_services.jobs_create(
            kind=KIND,
            subject=subject,
            payloads=[{"task": f"case {n}", "intent": "x"} for n in range(count)],
            deadline=deadline,
        )


def claim(worker="w1", lease=60, now=None):
    return job_services.job_claim(actor=AGENT, kind=KIND, worker=worker, lease_seconds=lease, now=now)


def test_jobs_of_an_unregistered_kind_are_refused():
    with transaction.atomic(), pytest.raises(ValueError, match="unknown job kind"):
        job_services.jobs_create(kind="never_registered", subject="s", payloads=[{}])


def test_claims_lease_the_oldest_job_and_never_the_same_one_twice():
    first, second = queue(2)
    a = claim("w1")
    b = claim("w2")
    assert (a.pk, b.pk) == (first.pk, second.pk)
    assert a.status == JobStatus.LEASED and a.lease_owner == "w1" and a.attempts == 1
    assert claim("w3") is None
    assert AuditEvent.objects.filter(verb="job.claim").count() == 2


def test_an_expired_lease_is_claimed_again():
    (job,) = queue(1)
    now = timezone.now()
    claim("w1", lease=30, now=now)
    assert claim("w2", now=now + timedelta(seconds=10)) is None
    again = claim("w2", now=now + timedelta(seconds=31))
    assert again.pk == job.pk and again.lease_owner == "w2" and again.attempts == 2


def test_the_reaper_requeues_lapsed_leases_and_expires_overdue_jobs():
    now = timezone.now()
    (lapsed,) = queue(1, subject="a")
    (overdue,) = queue(1, deadline=now + timedelta(seconds=5), subject="b")
    claim("w1", lease=1, now=now)
    counts = job_services.jobs_reap(now=now + timedelta(seconds=10))
    assert counts == {"requeued": 1, "expired": 1}
    assert Job.objects.get(pk=lapsed.pk).status == JobStatus.QUEUED
    assert Job.objects.get(pk=overdue.pk).status == JobStatus.EXPIRED
    assert claim("w2", now=now + timedelta(seconds=11)).pk == lapsed.pk


def test_a_job_past_its_deadline_is_never_claimed():
    queue(1, deadline=timezone.now() - timedelta(seconds=1))
    assert claim() is None


def answer(job, **overrides):
    item = run_item(**overrides)
    return job_services.job_complete(actor=AGENT, job=job, run_items=[item])


def test_an_answer_is_stored_through_ingest_under_the_jobs_identity(django_capture_on_commit_callbacks):
    queue(1)
    job = claim()
    answered_calls.clear()
    with django_capture_on_commit_callbacks(execute=True):
        result = answer(job, source="my-agent", external_id="mine")
    run = Run.objects.get(pk=result.run_id)
    assert result.counted and (run.source, run.external_id) == ("waymark-evaluation", f"job-{job.pk}")
    assert run.metadata["job"] == {"id": job.pk, "kind": KIND, "subject": "test:1"}
    assert Job.objects.get(pk=job.pk).status == JobStatus.DONE
    assert answered_calls == [(job.pk, "test:1")]


def test_a_result_posted_twice_is_counted_once():
    queue(1)
    job = claim()
    first = answer(job)
    second = answer(job, task="a different answer")
    assert first.counted and not second.counted and second.run_id == first.run_id
    assert Run.objects.count() == 1
    assert AuditEvent.objects.filter(verb="job.answer").count() == 1


def test_a_late_answer_after_the_lease_lapsed_still_counts_once():
    queue(1)
    now = timezone.now()
    job = claim("w1", lease=1, now=now)
    again = claim("w2", now=now + timedelta(seconds=5))
    assert answer(job).counted
    assert not answer(again).counted
    assert Run.objects.count() == 1


@pytest.mark.parametrize(
    "run_items",
    [
        [],
        "not a list",
        [{"source": "s", "external_id": "e", "outcome": "maybe"}],
        [{"source": "s", "external_id": "e", "steps": [{"tool": ""}]}],
        [{"source": "s", "external_id": "e", "unknown": 1}],
        [run_item(), run_item()],
    ],
)
def test_bad_answers_are_rejected_and_nothing_is_written(run_items):
    queue(1)
    job = claim()
    events = AuditEvent.objects.count()
    with pytest.raises(job_services.IngestInvalid):
        job_services.job_complete(actor=AGENT, job=job, run_items=run_items)
    assert Run.objects.count() == 0 and Step.objects.count() == 0
    assert Job.objects.get(pk=job.pk).status == JobStatus.LEASED
    assert AuditEvent.objects.count() == events


def test_an_unclaimed_or_expired_job_takes_no_answer():
    (unclaimed,) = queue(1, subject="a")
    with pytest.raises(job_services.JobClosed, match="claim it"):
        answer(unclaimed)
    now = timezone.now()
    (overdue,) = queue(1, deadline=now + timedelta(seconds=5), subject="b")
    job = job_services.job_claim(actor=AGENT, kind=KIND, worker="w", lease_seconds=60, now=now)
    assert job.pk == overdue.pk or job.pk == unclaimed.pk
    job_services.jobs_reap(now=now + timedelta(seconds=6))
    with pytest.raises(job_services.JobClosed, match="deadline"):
        answer(Job.objects.get(pk=overdue.pk))
    assert Run.objects.count() == 0


def test_lease_length_is_bounded():
    with pytest.raises(ValueError, match="lease_seconds"):
        claim(lease=0)
    with pytest.raises(ValueError, match="lease_seconds"):
        claim(lease=job_services.MAX_LEASE_SECONDS + 1)


def test_the_beat_task_reaps_through_the_service():
    from trajectories.jobs import reap_job_leases

    queue(1, deadline=timezone.now() - timedelta(seconds=1))
    assert reap_job_leases() == {"requeued": 0, "expired": 1}


@pytest.mark.postgres
def test_concurrent_claimers_never_share_a_job(transactional_db):
    import threading

    from django.db import connection

    queue(6)
    claimed, errors = [], []

    def worker(name):
        try:
            for _ in range(3):
                job = claim(name)
                if job is not None:
                    claimed.append(job.pk)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(f"w{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(claimed) == len(set(claimed)) == 6
