"""The one lease mechanism (common/leases): claim, refusal while held, heartbeat, loss, release and the take-over of
a dead holder's lease, on PostgreSQL with real row locks. The rows are evaluation jobs (trajectories.Job), the
simplest leased table; every leased model has the same two columns (common.leases.models.Leased)."""

import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from common import leases, liveness
from common.leases.models import Leased
from trajectories.models import Job, JobStatus

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LEASED_MODELS = [
    "graphs.EvolutionRun",
    "graphs.GraphCertification",
    "intents.IntentProposalRun",
    "procedures.ReplayRun",
    "reviews.WebhookDelivery",
    "rubrics.RubricJob",
    "trajectories.Job",
    "uplift.Watch",
]


def rows(job: Job):
    return Job.objects.filter(pk=job.pk)


def claim(job: Job, owner: str, *, seconds: float = 60, now=None) -> int:
    return leases.lease_claim(rows(job), owner=owner, seconds=seconds, now=now, status=JobStatus.LEASED)


@pytest.fixture
def job(db) -> Job:
    return Job.objects.create(kind="lease-test")


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(liveness, "_registry", {})
    cache.clear()
    yield liveness._registry
    cache.clear()


def test_every_leased_model_has_the_columns_of_the_one_mixin():
    from django.apps import apps

    for label in LEASED_MODELS:
        model = apps.get_model(label)
        assert issubclass(model, Leased), label
        owner, expires = model._meta.get_field("lease_owner"), model._meta.get_field("lease_expires_at")
        assert (owner.max_length, owner.blank, owner.null) == (200, True, False), label
        assert (expires.null, expires.blank) == (True, True), label


def test_one_worker_claims_and_a_second_is_refused_while_the_lease_lives(job):
    assert claim(job, "host:1:a") == 1
    assert claim(job, "host:2:b") == 0
    job.refresh_from_db()
    assert job.lease_owner == "host:1:a" and job.status == JobStatus.LEASED
    assert 55 < leases.lease_wait(rows(job)) <= 60


def test_a_claimed_row_comes_back_as_claimed_with_its_related_rows_and_a_held_one_does_not(
    job, django_assert_num_queries
):
    Job.objects.filter(pk=job.pk).update(payload={"task": "t"})
    now = timezone.now()
    with django_assert_num_queries(1):
        claimed = leases.lease_claim_row(
            rows(job), owner="host:1:a", seconds=60, now=now, related=("claimed_by_token",), status=JobStatus.LEASED
        )
        assert claimed.claimed_by_token is None  # the related row came with it (none here): no query
    job.refresh_from_db()
    assert claimed.pk == job.pk and claimed.payload == {"task": "t"} == job.payload
    assert (claimed.lease_owner, claimed.status, claimed.lease_expires_at) == (
        "host:1:a",
        JobStatus.LEASED,
        job.lease_expires_at,
    )
    assert claimed.lease_expires_at == now + timedelta(seconds=60)
    assert leases.lease_claim_row(rows(job), owner="host:2:b", seconds=60) is None
    job.refresh_from_db()
    assert job.lease_owner == "host:1:a"


def test_a_claim_brings_what_the_holder_reads_first_in_the_same_round_trip(job, django_assert_num_queries):
    from common.fixed_queries import FixedQuery

    status = FixedQuery(lambda: Job.objects.filter(pk=job.pk).values_list("status", "lease_owner"))
    with django_assert_num_queries(1):
        claimed, read = leases.lease_claim_row_reading(
            rows(job), owner="host:1:a", seconds=60, reads=[status], status=JobStatus.LEASED
        )
    assert claimed.pk == job.pk and read == [[(JobStatus.LEASED, "host:1:a")]]  # read after the claim
    refused, read = leases.lease_claim_row_reading(rows(job), owner="host:2:b", seconds=60, reads=[status])
    assert refused is None and read == [[(JobStatus.LEASED, "host:1:a")]]


def test_a_write_alone_commits_by_itself_while_held_and_raises_lease_lost_when_not(job, django_assert_num_queries):
    assert claim(job, "host:1:a") == 1
    with django_assert_num_queries(1):
        leases.lease_write_alone(
            rows(job), owner="host:1:a", what="the job", status=JobStatus.QUEUED, **leases.RELEASED
        )
    job.refresh_from_db()
    assert (job.status, job.lease_owner, job.lease_expires_at) == (JobStatus.QUEUED, "", None)
    with pytest.raises(leases.LeaseLost, match="the job"):
        leases.lease_write_alone(rows(job), owner="host:1:a", what="the job", status=JobStatus.LEASED)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED
    with pytest.raises(RuntimeError), transaction.atomic():  # it commits by itself: never inside a transaction
        leases.lease_write_alone(rows(job), owner="host:1:a", what="the job", status=JobStatus.LEASED)


def test_of_workers_claiming_at_once_on_row_locks_exactly_one_wins(job):
    workers = 12
    barrier = threading.Barrier(workers)
    won: list[str] = []

    def compete(n: int) -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                if claim(job, f"host:{n}:t"):
                    won.append(f"host:{n}:t")
                    time.sleep(0.05)  # hold the row lock a while: the others wait on it, then find the lease taken
        finally:
            connection.close()

    threads = [threading.Thread(target=compete, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(won) == 1
    assert Job.objects.get(pk=job.pk).lease_owner == won[0]


def test_a_claim_waits_for_the_holders_row_lock_and_sees_its_commit(job):
    """A claim blocked on a row lock re-reads the row when the lock is released: it sees the committed lease."""
    locked, done = threading.Event(), threading.Event()
    result: list[int] = []

    def second() -> None:
        try:
            locked.wait(5)
            result.append(claim(job, "host:2:b"))
        finally:
            done.set()
            connection.close()

    thread = threading.Thread(target=second)
    thread.start()
    with transaction.atomic():
        Job.objects.select_for_update().get(pk=job.pk)
        locked.set()
        assert not done.wait(0.3)  # the second claim is blocked on our lock
        assert claim(job, "host:1:a") == 1
    thread.join(10)
    assert result == [0]


def test_a_heartbeat_extends_the_lease_and_writes_with_it(job):
    now = timezone.now()
    claim(job, "host:1:a", seconds=10, now=now)
    leases.lease_heartbeat(rows(job), owner="host:1:a", seconds=300, what="job", attempts=3)
    job.refresh_from_db()
    assert job.lease_expires_at > now + timedelta(seconds=290)
    assert job.attempts == 3


def test_a_lost_lease_raises_lease_lost_and_writes_nothing(job):
    past = timezone.now() - timedelta(seconds=120)
    claim(job, "host:1:a", seconds=60, now=past)  # ran out a minute ago
    assert claim(job, "host:2:b") == 1  # taken over
    with pytest.raises(leases.LeaseLost, match="job 1 is no longer held by host:1:a"):
        leases.lease_heartbeat(rows(job), owner="host:1:a", seconds=60, what="job 1")
    with pytest.raises(leases.LeaseLost):
        leases.lease_write(rows(job), owner="host:1:a", what="job 1", attempts=9)
    assert leases.lease_release(rows(job), owner="host:1:a") == 0
    job.refresh_from_db()
    assert (job.lease_owner, job.attempts) == ("host:2:b", 0)


def test_a_heartbeat_on_a_cancelled_row_raises_run_cancelled_and_keeps_the_lease(job):
    claim(job, "host:1:a")
    stop = Q(status=JobStatus.LEASED)  # the caller's "asked to stop" condition
    with pytest.raises(leases.RunCancelled, match="cancelled before judging"):
        leases.lease_heartbeat(
            rows(job), owner="host:1:a", seconds=60, what="job", cancelled=stop, why="cancelled before judging"
        )
    assert Job.objects.get(pk=job.pk).lease_owner == "host:1:a"


def test_a_lease_that_ran_out_is_taken_over_by_the_next_claim(job):
    past = timezone.now() - timedelta(seconds=61)
    claim(job, "host:1:a", seconds=60, now=past)
    assert leases.lease_wait(rows(job)) == 0.0
    assert claim(job, "host:2:b") == 1
    exactly = timezone.now()
    other = Job.objects.create(kind="lease-test")
    claim(other, "host:1:a", seconds=0, now=exactly)  # expires at exactly `exactly`
    assert leases.lease_claim(rows(other), owner="host:2:b", seconds=60, now=exactly) == 0
    assert leases.lease_claim(rows(other), owner="host:2:b", seconds=60, now=exactly, ended_at_expiry=True) == 1


def test_release_frees_the_row_for_anyone(job):
    claim(job, "host:1:a")
    job.refresh_from_db()
    assert job.lease_lives() and not job.lease_lives(job.lease_expires_at)
    assert leases.lease_release(rows(job), owner="host:1:a", status=JobStatus.QUEUED) == 1
    job.refresh_from_db()
    assert (job.lease_owner, job.lease_expires_at, job.status) == ("", None, JobStatus.QUEUED)
    assert leases.lease_wait(rows(job)) is None and not job.lease_lives()
    assert claim(job, "host:2:b") == 1


def test_a_dead_holders_lease_is_ended_by_its_liveness_stamp_and_taken_over(job, registry):
    alive, dead = Job.objects.create(kind="lease-test"), job
    claim(dead, "deadhost:111:task")
    claim(alive, "livehost:222:task")
    unknown = Job.objects.create(kind="lease-test")
    claim(unknown, "agent-7")  # not host:pid: never judged dead
    liveness.stamp("deadhost:111", at=time.time() - settings.WAYMARK_LIVENESS_STALE_SECONDS - 1)
    liveness.stamp("livehost:222")
    audited: list[dict] = []
    taken: list[list[int]] = []
    leases.register_lease_takeover(
        Job, running=Q(status=JobStatus.LEASED), take_over=taken.append, audit=lambda **event: audited.append(event)
    )

    assert liveness.dead_leases_release() == {"trajectories.job": 1}

    assert taken == [[dead.pk]]
    assert [(event["verb"], event["target"]) for event in audited] == [
        ("job.lease_released", ("trajectories.job", str(dead.pk)))
    ]
    assert audited[0]["before"]["lease_owner"] == "deadhost:111:task"
    assert claim(dead, "livehost:222:next") == 1  # free for the next claim at once
    assert claim(alive, "livehost:222:next") == 0
    assert claim(unknown, "livehost:222:next") == 0
    assert liveness.dead_leases_release() == {"trajectories.job": 0}  # nothing left of the dead process


def test_a_dead_holder_that_released_meanwhile_is_left_alone(job, registry):
    claim(job, "deadhost:111:task")
    holders = leases.lease_holders(rows(job))
    assert holders == ["deadhost:111:task"]
    leases.lease_release(rows(job), owner="deadhost:111:task")
    ended = leases.leases_end(rows(job), owners=holders, audit=lambda **_: None, take_over=lambda pks: None)
    assert ended == 0
