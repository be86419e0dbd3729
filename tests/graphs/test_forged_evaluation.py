"""Forged gate evidence for graphs (issue 30, finding 1), end to end with a real Celery worker on Redis: while an
evolution run waits for agents to evaluate its baseline and its candidate, an agent with only trajectories:write
plants runs named as the answers of those jobs and of future ones. Every plant is refused; the round is decided on
the honest agent's answers (the candidate fails every task, so it is rejected) and the evaluation names the token
whose runs it counted."""

import pytest

from accounts.services import Actor
from graphs.core.twohop import ROUND_1_BUILD
from graphs.evolution.jobs import JOB_KIND
from graphs.evolution.services import evolution_start
from graphs.models import EvolutionRun, Revision
from graphs.services import workspace_create
from tests.helpers.celery_workers import redis_app, wait_for
from tests.trajectories.factories import ingest, run_item, step_item
from trajectories.choices import EVALUATION_SOURCE
from trajectories.models import Job, JobStatus, Run

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
__all__ = ["redis_app"]  # the worker fixture, used by name

TASKS = 4


def open_jobs(purpose: str) -> list[Job]:
    return list(Job.objects.filter(kind=JOB_KIND, payload__purpose=purpose, status=JobStatus.QUEUED).order_by("id"))


def plant_everywhere(api_client, token: str, around: list[Job]) -> None:
    """The attacker's move: a passing run named as the answer of each job, and of the next ten job ids."""
    targets = [job.pk for job in around] + [around[-1].pk + n for n in range(1, 11)]
    for job_id in targets:
        item = run_item(source=EVALUATION_SOURCE, external_id=f"job-{job_id}", outcome="success", score=1.0)
        response = api_client.post("/api/v1/trajectories", {"runs": [item]}, token=token)
        assert response.status_code == 422, response.content


def answer_all(api_client, token: str, outcome: str) -> list[int]:
    run_ids = []
    while True:
        claimed = api_client.post("/api/v1/jobs/claim", {"kinds": [JOB_KIND]}, token=token)
        if claimed.status_code == 204:
            return run_ids
        job = claimed.json()
        item = run_item(task=job["payload"]["task"], outcome=outcome, score=None, steps=[step_item("answer")])
        response = api_client.post(f"/api/v1/jobs/{job['id']}/result", {"run": item}, token=token)
        assert response.status_code == 201, response.content
        run_ids.append(response.json()["run_id"])


def test_runs_planted_for_graph_evaluation_jobs_never_decide_a_round(
    transactional_db, redis_app, api_client, operator, make_agent_token
):
    workspace = workspace_create(actor=Actor.system(), slug="lab", task_description="answer questions").workspace
    seed = Revision.objects.get(workspace=workspace, kind="graph", seq=0)
    ingest(
        *[
            run_item(task=f"Question {n}", graph_workspace="lab", graph_revision=seed.digest, score=None)
            for n in range(TASKS)
        ]
    )
    attacker = make_agent_token("trajectories:write", name="mallory")
    honest = make_agent_token("evaluations:run", name="honest-agent")
    run = evolution_start(
        actor=Actor(user=operator), workspace=workspace, rounds=1, evaluator="agents", script=[ROUND_1_BUILD]
    )

    assert wait_for(lambda: len(open_jobs("baseline")) == TASKS), "the worker did not queue the baseline's jobs"
    plant_everywhere(api_client, attacker, open_jobs("baseline"))
    baseline_runs = answer_all(api_client, honest, "success")
    assert len(baseline_runs) == TASKS

    assert wait_for(lambda: len(open_jobs("candidate")) == TASKS), "the worker did not queue the candidate's jobs"
    plant_everywhere(api_client, attacker, open_jobs("candidate"))
    candidate_runs = answer_all(api_client, honest, "failure")

    assert wait_for(lambda: EvolutionRun.objects.get(pk=run.pk).is_finished), "the worker did not finish the run"
    run.refresh_from_db()
    assert run.status == EvolutionRun.Status.SUCCEEDED, run.error
    (round_,) = run.rounds.all()
    assert (round_.retained_score, round_.candidate_score, round_.outcome) == (1.0, 0.0, "rejected")
    assert Run.objects.filter(source=EVALUATION_SOURCE).count() == 2 * TASKS  # the honest answers, nothing else
    memory = Revision.objects.filter(workspace=workspace, kind="rejections").order_by("-seq").first().document
    (entry,) = memory["entries"]
    (credited,) = entry["validation"]["aggregate"]["agents"]
    assert credited["agent"] == "honest-agent" and credited["token_prefix"] == honest.split("_")[1]
    assert sorted(credited["run_ids"]) == sorted(candidate_runs)
