"""Live replay: one job per held-out case and arm; complete when all are answered or the deadline passes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import Actor
from procedures.mining import services as mining_services
from procedures.models import ProcedureVersion, ReplayCase, ReplayStatus, VersionStatus
from procedures.replay.services import live as live_replay_services
from trajectories import job_services
from trajectories.models import Job, JobStatus

from .factories import REFUND, refund_run, refund_runs

pytestmark = pytest.mark.django_db
AGENT = Actor.system()


@pytest.fixture
def live(operator, django_capture_on_commit_callbacks):
    refund_runs(successes=10, failures=0)
    with django_capture_on_commit_callbacks(execute=True):
        result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    return result.version.replays.get(mode="live")


def claim_all():
    jobs = []
    while job := job_services.job_claim(
        actor=AGENT, kind=live_replay_services.REPLAY_JOB_KIND, worker="t", lease_seconds=60
    ):
        jobs.append(job)
    return jobs


def test_mining_with_live_replay_queues_one_job_per_held_out_case_and_arm(live):
    assert live.status == ReplayStatus.RUNNING and live.deadline is not None
    jobs = Job.objects.filter(subject=live_replay_services.replay_subject(live))
    by_arm = {
        arm: sorted(j.payload["case_run_id"] for j in jobs if j.payload["arm"] == arm) for arm in ("candidate", "none")
    }
    # A first version is measured against no procedure at all: the none arm's jobs carry none.
    assert by_arm == {"candidate": sorted(live.held_out_run_ids), "none": sorted(live.held_out_run_ids)}
    assert all(j.payload["procedure"] is None for j in jobs if j.payload["arm"] == "none")
    assert all(j.payload["procedure"]["steps"] for j in jobs if j.payload["arm"] == "candidate")
    assert ProcedureVersion.objects.get(pk=live.version_id).status == VersionStatus.REPLAYING


def test_the_replay_completes_when_every_job_is_answered(live, django_capture_on_commit_callbacks):
    jobs = claim_all()
    for job in jobs:
        with django_capture_on_commit_callbacks(execute=True):
            job_services.job_complete(actor=AGENT, job=job, run_items=[refund_run()])
    live.refresh_from_db()
    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is True
    assert live.metrics["candidate"]["answered_rate"] == 1.0
    rows = ReplayCase.objects.filter(replay=live)
    assert rows.count() == len(jobs) and all(row.result_run_id for row in rows)
    assert ProcedureVersion.objects.get(pk=live.version_id).status == VersionStatus.READY


def test_a_missing_step_in_the_agents_runs_fails_the_live_gate(live, django_capture_on_commit_callbacks):
    for job in claim_all():
        with django_capture_on_commit_callbacks(execute=True):
            job_services.job_complete(actor=AGENT, job=job, run_items=[refund_run("issue_refund", outcome="failure")])
    live.refresh_from_db()
    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is False
    assert ProcedureVersion.objects.get(pk=live.version_id).status == VersionStatus.FAILED


def test_after_the_deadline_unanswered_cases_are_reported_and_never_pass(live, django_capture_on_commit_callbacks):
    first = next(job for job in claim_all() if job.payload["arm"] == "candidate")
    with django_capture_on_commit_callbacks(execute=True):
        job_services.job_complete(actor=AGENT, job=first, run_items=[refund_run()])
    live.refresh_from_db()
    assert live.status == ReplayStatus.RUNNING

    settled = live_replay_services.replay_live_settle(replay=live, now=live.deadline + timedelta(seconds=1))

    assert settled.status == ReplayStatus.DONE
    unanswered = set(live.held_out_run_ids) - {first.payload["case_run_id"]}
    assert set(settled.report["unanswered"]) == unanswered
    assert settled.gate_report["passed"] is False
    assert ReplayCase.objects.filter(replay=live, arm="candidate", answered=False).count() == len(unanswered)
    assert ReplayCase.objects.filter(replay=live, arm="none", answered=False).count() == len(live.held_out_run_ids)
    assert not Job.objects.filter(subject=live_replay_services.replay_subject(live), status=JobStatus.LEASED).exists()
    assert ProcedureVersion.objects.get(pk=live.version_id).status == VersionStatus.FAILED


def test_before_the_deadline_an_incomplete_replay_keeps_running(live):
    assert live_replay_services.replay_live_settle(replay=live, now=timezone.now()).status == ReplayStatus.RUNNING
    assert live_replay_services.overdue_live_replays(now=live.deadline + timedelta(seconds=1)) == [live.pk]


def test_the_beat_task_settles_overdue_live_replays(live, django_capture_on_commit_callbacks):
    from procedures.tasks import settle_overdue_replays

    type(live).objects.filter(pk=live.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert settle_overdue_replays() == 1
    live.refresh_from_db()
    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is False
    assert set(live.report["unanswered"]) == set(live.held_out_run_ids)
