"""Judging a run with K model judges on a real Celery worker (Redis broker, PostgreSQL) whose pool process is
SIGKILLed once inside a judge's model call, once right after a judge's assessments were settled and once after the
job finished: the job succeeds, each judge's assessments are written once (one accepted call per judge, one
`rubric.assess` event each), and the cached score is computed from exactly those assessments."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import Actor
from llm.models import ModelCall
from rubrics import services as rubric_services
from rubrics import tasks as rubric_tasks
from rubrics.core.rubrics import parse_rubric_reply
from rubrics.models import RubricAssessmentRow, RubricJob, RubricJobStatus, RubricScoreRow
from tests.faults import fault_worker, wait_for
from tests.trajectories.factories import ingest, run_item, step_item

JUDGES = 3
KILL_POINTS = ["assessed:1", "call:2", "finished"]
RUBRIC = json.dumps(
    {
        "dimensions": [
            {"id": "task_completed", "description": "Did what was asked.", "weight": 2, "required": True},
            {"id": "policy_followed", "description": "Respected the policy.", "weight": 1},
        ]
    }
)


def a_run_and_a_version(actor: Actor):
    item = run_item(steps=[step_item("lookup_policy"), step_item("check_order", ok=False), step_item("issue_refund")])
    run_id = ingest(item).created_ids[0]
    rubric = rubric_services.rubric_ensure(actor=actor, key="refund_request")
    version, _ = rubric_services.rubric_version_add(
        actor=actor, rubric=rubric, document=parse_rubric_reply("refund", RUBRIC)
    )
    return run_id, version


@pytest.mark.redis
@pytest.mark.postgres
def test_a_judging_job_whose_worker_is_killed_mid_call_and_after_settling_writes_its_assessments_once(
    transactional_db, operator, tmp_path
):
    actor = Actor(user=operator)
    run_id, version = a_run_and_a_version(actor)
    with fault_worker("tests.rubrics.fault_worker", tmp_path, redis_db=6, points=KILL_POINTS) as worker:
        job = rubric_services.rubric_judge_start(actor=actor, run_id=run_id, version_id=version.pk, judges=JUDGES)

        def settled() -> bool:
            job.refresh_from_db()
            return job.status not in (RubricJobStatus.QUEUED, RubricJobStatus.RUNNING) and worker.killed() == sorted(
                KILL_POINTS
            )

        # The redelivered message finds the dead worker's lease; beat's rubric_reap hands the job on when it lapses.
        done = wait_for(settled, 50, tick=rubric_tasks.rubric_reap.delay)
        assert done, f"the job did not end ({job.status}, killed {worker.killed()}):\n" + worker.log_tail()

    assert job.status == RubricJobStatus.SUCCEEDED, job.error
    assert job.attempts == 3  # killed at assessed:1, killed at call:2, then the one that finished
    assert worker.lines("jobs.log") == [f"{job.pk}:succeeded"], "the job was settled more than once"
    names = [f"scripted-judge#{index}" for index in range(1, JUDGES + 1)]
    assert sorted(worker.lines("assessments.log")) == [f"judge:{name}" for name in names]  # each judge once

    rows = RubricAssessmentRow.objects.filter(run_id=run_id, version=version)
    assert rows.count() == JUDGES * 2
    assert sorted(set(rows.values_list("judge_name", flat=True))) == names
    assert AuditEvent.objects.filter(verb="rubric.assess", target_id=str(run_id)).count() == JUDGES
    accepted = set(rows.values_list("model_call_id", flat=True))
    calls = ModelCall.objects.filter(role="judge")
    assert set(calls.filter(status="succeeded").values_list("pk", flat=True)) == accepted and len(accepted) == JUDGES
    assert calls.exclude(status="succeeded").count() == 1  # the call killed mid-way (the stuck-work reaper ends it)

    score = RubricScoreRow.objects.get(run_id=run_id, version=version)  # one cached score …
    assert (score.assessment_count, score.rater_count) == (JUDGES * 2, JUDGES)  # … of exactly those assessments
    assert RubricJob.objects.filter(run_id=run_id).count() == 1


# --- the same without a worker process ---------------------------------------------------------------------------
class WorkerDied(BaseException):
    """Stands for SIGKILL: nothing after the raise runs."""


REAL_JUDGE_MODEL = rubric_services._judge_model


def judges_dying_at(monkeypatch, dying: int | None, on_call=None):
    real = REAL_JUDGE_MODEL

    class Judge:
        def __init__(self, inner, index):
            self.inner, self.index, self.model_id = inner, index, inner.model_id

        def complete(self, request):
            if self.index == dying:
                raise WorkerDied
            if on_call is not None:
                on_call()
            return self.inner.complete(request)

    monkeypatch.setattr(
        rubric_services, "_judge_model", lambda run, rubric, index: Judge(real(run, rubric, index), index)
    )


def lapse(job) -> None:
    RubricJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db
def test_a_takeover_skips_the_judges_a_dead_worker_already_wrote(operator, monkeypatch):
    actor = Actor(user=operator)
    run_id, version = a_run_and_a_version(actor)
    job = rubric_services.rubric_judge_start(actor=actor, run_id=run_id, version_id=version.pk, judges=JUDGES)
    judges_dying_at(monkeypatch, 2)
    with pytest.raises(WorkerDied):
        rubric_services.rubric_judge_run(job_id=job.pk, worker="first")
    job.refresh_from_db()
    assert [entry["who"] for entry in job.attempts_log] == ["scripted-judge#1"]  # saved with judge 1's assessments

    lapse(job)
    judges_dying_at(monkeypatch, None)
    job = rubric_services.rubric_judge_run(job_id=job.pk, worker="second")
    assert job.status == RubricJobStatus.SUCCEEDED
    calls = ModelCall.objects.filter(role="judge").order_by("pk")
    assert list(calls.values_list("status", flat=True)) == ["succeeded", "running", "succeeded", "succeeded"]
    answered = [
        json.loads(text)["assessments"][0]["explanation"][:16]
        for text in calls.values_list("response_text", flat=True)
        if text
    ]
    assert answered == ["Scripted judge 1", "Scripted judge 2", "Scripted judge 3"]  # judge 1 was not asked twice
    assert AuditEvent.objects.filter(verb="rubric.assess", target_id=str(run_id)).count() == JUDGES
    assert RubricScoreRow.objects.get(run_id=run_id, version=version).rater_count == JUDGES


@pytest.mark.django_db
def test_a_worker_whose_lease_was_taken_over_writes_nothing(operator, monkeypatch):
    actor = Actor(user=operator)
    run_id, version = a_run_and_a_version(actor)
    job = rubric_services.rubric_judge_start(actor=actor, run_id=run_id, version_id=version.pk, judges=1)
    # During the model call the lease runs out and another worker takes the job.
    judges_dying_at(monkeypatch, None, on_call=lambda: RubricJob.objects.filter(pk=job.pk).update(lease_owner="other"))
    job = rubric_services.rubric_judge_run(job_id=job.pk, worker="slow")
    assert job.status == RubricJobStatus.RUNNING and job.lease_owner == "other"
    assert not RubricAssessmentRow.objects.filter(run_id=run_id).exists()
    assert not AuditEvent.objects.filter(verb="rubric.assess").exists()
