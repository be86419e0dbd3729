"""Offline replays hold a lease: a dead worker's replay is taken over and finished once, the beat requeues expired
ones and gives up after a bounded number of attempts with the reason; mining again or an operator re-runs a failed
replay."""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.urls import reverse
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import Actor
from procedures import errors, tasks
from procedures.mining import services as mining_services
from procedures.models import ProcedureVersion, ReplayCase, ReplayRun, ReplayStatus, VersionStatus
from procedures.replay.services import offline as offline_replay_services
from procedures.versions import services as version_services
from tests.conftest import logged_in

from .factories import REFUND, refund_runs

pytestmark = pytest.mark.django_db
SYSTEM = Actor.system()


@pytest.fixture
def queued(operator, django_capture_on_commit_callbacks):
    """A mined version whose offline replay is queued (its message not sent)."""
    refund_runs()
    with django_capture_on_commit_callbacks(execute=False):
        result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND)
    return result.replays[0]


def died_holding(replay: ReplayRun, worker: str = "dead-worker", *, attempts: int | None = None) -> ReplayRun:
    """The replay was claimed by `worker`, which died: its lease ran out a second ago."""
    assert offline_replay_services._claim(replay.pk, worker, actor=SYSTEM) is not None
    fields = {"lease_expires_at": timezone.now() - timedelta(seconds=1)}
    if attempts is not None:
        fields["attempts"] = attempts
    ReplayRun.objects.filter(pk=replay.pk).update(**fields)
    return ReplayRun.objects.get(pk=replay.pk)


def test_a_replay_whose_worker_died_is_taken_over_and_finished_once(queued):
    died_holding(queued)
    version = ProcedureVersion.objects.get(pk=queued.version_id)
    assert version.status == VersionStatus.REPLAYING
    # whatever a dead attempt might have left is replaced, never counted twice
    ReplayCase.objects.create(replay=queued, arm="candidate", case_run_id=version.held_out_run_ids[0], result={})

    replay = offline_replay_services.replay_offline_run(replay=queued, worker="second")

    assert replay.status == ReplayStatus.DONE and replay.attempts == 2
    assert (replay.lease_owner, replay.lease_expires_at) == ("", None)
    assert ReplayCase.objects.filter(replay=replay).count() == len(version.held_out_run_ids)
    assert AuditEvent.objects.filter(verb="replay.takeover", target_id=str(replay.pk)).count() == 1
    assert AuditEvent.objects.filter(verb="replay.finish", target_id=str(replay.pk)).count() == 1
    assert ProcedureVersion.objects.get(pk=version.pk).status == VersionStatus.READY
    # a late redelivery does nothing
    assert offline_replay_services.replay_offline_run(replay=queued, worker="third").attempts == 2
    assert AuditEvent.objects.filter(verb="replay.finish", target_id=str(replay.pk)).count() == 1


def test_a_replay_held_by_a_live_worker_is_left_alone_and_the_holder_that_lost_it_writes_nothing(queued):
    offline_replay_services._claim(queued.pk, "alive", actor=SYSTEM)
    replay = offline_replay_services.replay_offline_run(replay=queued, worker="redelivered")
    assert replay.status == ReplayStatus.RUNNING and replay.lease_owner == "alive"
    assert offline_replay_services.replay_lease_wait(queued.pk) > 0
    assert not ReplayCase.objects.filter(replay=queued).exists()

    ReplayRun.objects.filter(pk=queued.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    offline_replay_services._claim(queued.pk, "new-owner", actor=SYSTEM)
    with pytest.raises(errors.LeaseLost):
        offline_replay_services.replay_heartbeat(queued, "alive", "loaded")


def test_a_transient_error_gives_the_lease_back_with_the_error_and_the_retry_finishes(queued, monkeypatch):
    real = offline_replay_services._case_runs

    def locked(replay):
        raise OperationalError("database is locked")

    monkeypatch.setattr(offline_replay_services, "_case_runs", locked)
    with pytest.raises(OperationalError):
        offline_replay_services.replay_offline_run(replay=queued, worker="first")
    replay = ReplayRun.objects.get(pk=queued.pk)
    assert (replay.status, replay.lease_owner, replay.lease_expires_at) == (ReplayStatus.RUNNING, "", None)
    assert replay.error == "OperationalError: database is locked"

    monkeypatch.setattr(offline_replay_services, "_case_runs", real)
    assert offline_replay_services.replay_offline_run(replay=queued, worker="retry").status == ReplayStatus.DONE


def test_the_beat_requeues_expired_replays_and_leaves_held_and_live_ones(queued):
    died_holding(queued)
    held = ReplayRun.objects.create(version=queued.version, held_out_run_ids=queued.held_out_run_ids)
    offline_replay_services._claim(held.pk, "alive", actor=SYSTEM)
    live = ReplayRun.objects.create(
        version=queued.version, mode="live", status=ReplayStatus.RUNNING, started_at=timezone.now() - timedelta(days=1)
    )

    assert offline_replay_services.replays_to_requeue() == [queued.pk]

    assert tasks.requeue_expired_replays() == [queued.pk]  # eager in tests: the replay runs now
    assert ReplayRun.objects.get(pk=queued.pk).status == ReplayStatus.DONE
    assert ReplayRun.objects.get(pk=held.pk).lease_owner == "alive"
    assert ReplayRun.objects.get(pk=live.pk).status == ReplayStatus.RUNNING


@pytest.mark.parametrize(
    ("last_error", "reason"),
    [("", "gave up after 3 attempts: the worker died"), ("OSError: boom", "gave up after 3 attempts: OSError: boom")],
)
def test_after_the_last_attempt_the_beat_fails_the_replay_with_the_reason(queued, last_error, reason):
    died_holding(queued, attempts=3)
    ReplayRun.objects.filter(pk=queued.pk).update(error=last_error)

    assert offline_replay_services.replays_to_requeue() == []

    replay = ReplayRun.objects.get(pk=queued.pk)
    assert (replay.status, replay.error) == (ReplayStatus.FAILED, reason)
    assert ProcedureVersion.objects.get(pk=queued.version_id).status == VersionStatus.FAILED
    assert AuditEvent.objects.get(verb="replay.fail", target_id=str(replay.pk)).after["error"] == reason


def test_a_redelivery_past_the_last_attempt_fails_the_replay_too(queued):
    died_holding(queued, attempts=3)
    replay = offline_replay_services.replay_offline_run(replay=queued, worker="fourth")
    assert (replay.status, replay.error) == (ReplayStatus.FAILED, "gave up after 3 attempts: the worker died")
    assert not ReplayCase.objects.filter(replay=replay).exists()


def test_mining_again_after_a_failed_replay_queues_a_new_one(queued, operator, django_capture_on_commit_callbacks):
    died_holding(queued, attempts=3)
    offline_replay_services.replays_to_requeue()
    assert ProcedureVersion.objects.get(pk=queued.version_id).status == VersionStatus.FAILED

    with django_capture_on_commit_callbacks(execute=True):
        again = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND)

    assert not again.created and again.version.pk == queued.version_id
    assert [replay.mode for replay in again.replays] == ["offline"]
    assert ReplayRun.objects.get(pk=again.replays[0].pk).status == ReplayStatus.DONE
    assert ProcedureVersion.objects.get(pk=queued.version_id).status == VersionStatus.READY  # the newest replay counts
    assert AuditEvent.objects.filter(verb="replay.rerun", target_id=str(queued.version_id)).count() == 1

    with django_capture_on_commit_callbacks(execute=True):
        third = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND)
    assert third.replays == ()  # nothing failed: nothing queued


def rerun(client, version):
    client.get(reverse("procedures:version", args=[version.pk]))
    url = reverse("procedures:rerun", args=[version.pk])
    return client.post(url, {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def test_an_operator_reruns_a_failed_replay_from_the_page(queued, operator, viewer, django_capture_on_commit_callbacks):
    died_holding(queued, attempts=3)
    offline_replay_services.replays_to_requeue()
    version = ProcedureVersion.objects.get(pk=queued.version_id)

    page = logged_in(operator).get(reverse("procedures:version", args=[version.pk]))
    assert b"Re-run replay" in page.content
    assert b"Re-run replay" not in logged_in(viewer).get(reverse("procedures:version", args=[version.pk])).content
    assert rerun(logged_in(viewer), version).status_code == 403
    assert version.replays.count() == 1

    with django_capture_on_commit_callbacks(execute=True):
        response = rerun(logged_in(operator), version)

    assert response.status_code == 302
    newest = version.replays.order_by("-id").first()
    assert newest.pk != queued.pk and newest.status == ReplayStatus.DONE
    assert newest.held_out_run_ids == version.held_out_run_ids
    assert ProcedureVersion.objects.get(pk=version.pk).status == VersionStatus.READY
    event = AuditEvent.objects.get(verb="replay.rerun", target_id=str(version.pk))
    assert event.actor_user_id == operator.pk and event.before == {"status": "failed"}


def test_only_a_failed_version_without_an_open_replay_is_rerun(queued, operator):
    with pytest.raises(errors.ReplayRefused, match="queued or running"):
        version_services.replay_rerun(actor=Actor(user=operator), version=queued.version)
    offline_replay_services.replay_offline_run(replay=queued)
    with pytest.raises(errors.ReplayRefused, match="only a failed version"):
        version_services.replay_rerun(actor=Actor(user=operator), version=queued.version)
    response = rerun(logged_in(operator), queued.version)
    assert response.status_code == 302 and queued.version.replays.count() == 1
