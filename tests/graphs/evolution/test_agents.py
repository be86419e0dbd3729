"""The "agents" evaluator and the stored-runs trace source: evaluation jobs agents answer over the claim / lease /
answer protocol, a run that waits for them, unanswered tasks that never count as passes, and traces read from the
runs a workspace guided (stale ones per the policy)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import Actor
from graphs.core.twohop import ROUND_1_BUILD
from graphs.evolution.jobs import JOB_KIND
from graphs.evolution.services import evolution_start, evolution_step
from graphs.evolution.sources import StoredRunsTraceSource
from graphs.models import EvolutionRun, Revision
from graphs.services import workspace_create
from tests.trajectories.factories import ingest, run_item, step_item
from trajectories.job_services import job_claim, job_complete, jobs_reap
from trajectories.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab():
    workspace = workspace_create(actor=Actor.system(), slug="lab", task_description="answer questions").workspace
    seed = Revision.objects.get(workspace=workspace, kind="graph", seq=0)
    items = [
        run_item(
            task=f"Question {n}",
            outcome="success" if n % 2 else "failure",
            score=None,
            graph_workspace="lab",
            graph_revision="0" if n < 5 else "ffff" + seed.digest[4:],
            steps=[step_item("search"), step_item("answer")],
        )
        for n in range(6)
    ]
    ingest(*items)
    return workspace


def answer(job, outcome: str, captured) -> None:
    item = run_item(task=job.payload["task"], outcome=outcome, score=None, steps=[step_item("answer")])
    with captured(execute=True):
        job_complete(job=job, run_items=[item])


def claim_all(operator):
    jobs = []
    while (job := job_claim(actor=Actor(user=operator), kind=JOB_KIND, worker="agent-1", lease_seconds=60)) is not None:
        jobs.append(job)
    return jobs


def test_a_run_waits_for_agents_and_counts_only_what_they_answered(lab, operator, django_capture_on_commit_callbacks):
    run = evolution_start(
        actor=Actor(user=operator), workspace=lab, rounds=1, evaluator="agents", script=[ROUND_1_BUILD], enqueue=False
    )
    assert [task["task"] for task in run.config["validation_tasks"]][:2] == ["Question 5", "Question 4"]
    evolution_step(run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert run.status == EvolutionRun.Status.WAITING
    jobs = claim_all(operator)
    assert len(jobs) == 6 and {job.payload["purpose"] for job in jobs} == {"baseline"}
    assert jobs[0].payload["graph"]["nodes"][0]["id"] in ("End", "Start")
    for job in jobs[:3]:
        answer(job, "success", django_capture_on_commit_callbacks)
    run.refresh_from_db()
    assert run.status == EvolutionRun.Status.WAITING and run.baseline is None  # three still unanswered
    for job in jobs[3:]:
        answer(job, "failure", django_capture_on_commit_callbacks)
    run.refresh_from_db()
    assert run.baseline_score == 0.5
    assert run.status == EvolutionRun.Status.WAITING  # round 1's candidate is out for evaluation now
    candidate_jobs = claim_all(operator)
    assert {job.payload["purpose"] for job in candidate_jobs} == {"candidate"}
    answer(candidate_jobs[0], "success", django_capture_on_commit_callbacks)

    later = timezone.now() + timedelta(hours=2)
    with django_capture_on_commit_callbacks(execute=True):
        jobs_reap(now=later)
    run.refresh_from_db()
    assert run.status == EvolutionRun.Status.SUCCEEDED, run.error
    (round_,) = run.rounds.all()
    # One of six tasks answered (a pass), five expired unanswered: 1/6, never counted as passes.
    assert round_.candidate_score == pytest.approx(1 / 6)
    assert round_.outcome == "rejected"
    assert Job.objects.filter(status="expired").count() == 5


def test_stored_runs_are_collected_by_stride_and_carry_the_revision_they_ran_under(lab):
    seed = Revision.objects.get(workspace=lab, kind="graph", seq=0)
    source = StoredRunsTraceSource(lab, stride=4)
    first = source.collect(None, graph_ref=seed.digest, iteration=1)
    second = source.collect(None, graph_ref=seed.digest, iteration=2)
    assert [trace.text for trace in first] == ["Question 0", "Question 1", "Question 2", "Question 3"]
    assert [trace.text for trace in second] == ["Question 4", "Question 5", "Question 0", "Question 1"]
    assert first[0].graph_ref == seed.digest and first[0].score == 0.0 and first[1].score == 1.0
    stale = second[1]
    assert stale.graph_ref is None  # it names a revision this workspace never had
    assert [step.action for step in first[0].steps] == ["search", "answer"]


def test_a_workspace_without_runs_cannot_use_the_agents_evaluator(operator):
    from graphs.evolution.services import EvolutionRefused

    empty = workspace_create(actor=Actor.system(), slug="empty").workspace
    with pytest.raises(EvolutionRefused, match="no stored run"):
        evolution_start(actor=Actor(user=operator), workspace=empty, rounds=1, evaluator="agents")
