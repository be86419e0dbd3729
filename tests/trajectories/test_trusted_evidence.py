"""Trusted evidence: a job's answer is accepted only from the token that claimed it (over /jobs, /replays and the
service), and gate reports name the agents whose answers they count (live replay, the agents evaluator)."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.urls import reverse

from accounts.models import ApiToken, User
from accounts.services import Actor, agent_create, api_token_create
from graphs.core.twohop import ROUND_1_BUILD
from graphs.evolution.jobs import JOB_KIND as GRAPH_JOB_KIND
from graphs.evolution.services import evolution_start, evolution_step
from graphs.services import workspace_create
from procedures.mining import services as mining_services
from procedures.models import ReplayStatus
from procedures.replay.services import live as live_replay_services
from tests.conftest import logged_in
from tests.procedures.factories import REFUND, refund_run, refund_runs
from trajectories import job_services
from trajectories.jobs import register_job_kind
from trajectories.models import Job, JobStatus, Run

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.django_db
KIND = "test_trust"
register_job_kind(KIND)


def agent_actor(name: str, *scopes: str) -> tuple[Actor, str]:
    agent = User.objects.filter(username=name).first() or agent_create(actor=Actor.system(), name=name)
    token, plaintext = api_token_create(
        actor=Actor.system(), user=agent, name=f"{name}-token", scopes=list(scopes or ["evaluations:run"])
    )
    return Actor(user=agent, token=token), plaintext


def queue(kind=KIND, count=1):
    with transaction.atomic():
        return job_services.jobs_create(kind=kind, subject="trust:1", payloads=[{"task": "t"}] * count)


def test_an_answer_from_another_token_is_refused_and_not_counted(api_client):
    _, alice = agent_actor("alice")
    _, bob = agent_actor("bob")
    (job,) = queue()
    assert api_client.post("/api/v1/jobs/claim", {"worker": "a"}, token=alice).json()["id"] == job.pk
    refused = api_client.post(f"/api/v1/jobs/{job.pk}/result", {"run": run_item()}, token=bob)
    assert refused.status_code == 403 and refused.json()["code"] == "not_claimant", refused.content
    job.refresh_from_db()
    assert job.status == JobStatus.LEASED and job.result_run_id is None and not Run.objects.exists()
    assert job.claimed_by_token == ApiToken.objects.get(name="alice-token")
    counted = api_client.post(f"/api/v1/jobs/{job.pk}/result", {"run": run_item()}, token=alice)
    assert counted.status_code == 201
    # a repeat by another token learns nothing either
    again = api_client.post(f"/api/v1/jobs/{job.pk}/result", {"run": run_item()}, token=bob)
    assert again.status_code == 403 and again.json()["code"] == "not_claimant"


def test_a_second_token_of_the_same_agent_is_another_token(api_client):
    _, first = agent_actor("alice")
    _, second = agent_actor("alice")
    (job,) = queue()
    api_client.post("/api/v1/jobs/claim", {}, token=first)
    response = api_client.post(f"/api/v1/jobs/{job.pk}/result", {"run": run_item()}, token=second)
    assert response.status_code == 403


def test_the_worker_string_is_informational(api_client):
    _, alice = agent_actor("alice")
    _, bob = agent_actor("bob")
    (job,) = queue()
    api_client.post("/api/v1/jobs/claim", {"worker": "shared-name"}, token=alice)
    api_client.post("/api/v1/jobs/claim", {"worker": "shared-name"}, token=bob)  # nothing left: 204
    response = api_client.post(f"/api/v1/jobs/{job.pk}/result", {"run": run_item()}, token=bob)
    assert response.status_code == 403
    assert not Run.objects.exists()


def test_a_reclaim_after_the_lease_ran_out_moves_the_answer_right(api_client):
    alice, _ = agent_actor("alice")
    bob, _ = agent_actor("bob")
    (job,) = queue()
    claimed = job_services.job_claim(actor=alice, kind=KIND, worker="a", lease_seconds=1)
    later = claimed.lease_expires_at + timedelta(seconds=1)
    job_services.job_claim(actor=bob, kind=KIND, worker="b", lease_seconds=60, now=later)
    with pytest.raises(job_services.NotClaimant):
        job_services.job_complete(actor=alice, job=job, run_items=[run_item()])
    assert job_services.job_complete(actor=bob, job=job, run_items=[run_item()]).counted


def test_a_replay_job_claimed_by_one_agent_cannot_be_answered_by_another(
    api_client, operator, django_capture_on_commit_callbacks
):
    refund_runs(successes=10, failures=0)
    with django_capture_on_commit_callbacks(execute=True):
        mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    _, alice = agent_actor("alice")
    _, bob = agent_actor("bob")
    job = api_client.post("/api/v1/replays/claim", {"worker": "a"}, token=alice).json()
    response = api_client.post(f"/api/v1/replays/{job['id']}/result", {"run": refund_run()}, token=bob)
    assert response.status_code == 403 and response.json()["code"] == "not_claimant"
    assert Job.objects.get(pk=job["id"]).status == JobStatus.LEASED


def test_the_live_gate_report_names_the_agents_it_counts(operator, django_capture_on_commit_callbacks):
    refund_runs(successes=10, failures=0)
    with django_capture_on_commit_callbacks(execute=True):
        result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    live = result.version.replays.get(mode="live")
    alice, _ = agent_actor("alice")
    bob, _ = agent_actor("bob")
    jobs = []
    for n in range(2 * len(live.held_out_run_ids)):  # a first version: each case with and without it
        actor = alice if n % 2 == 0 else bob
        jobs.append(
            (
                actor,
                job_services.job_claim(
                    actor=actor, kind=live_replay_services.REPLAY_JOB_KIND, worker="w", lease_seconds=60
                ),
            )
        )
    for actor, job in jobs:
        with django_capture_on_commit_callbacks(execute=True):
            job_services.job_complete(actor=actor, job=job, run_items=[refund_run()])
    live.refresh_from_db()
    assert live.status == ReplayStatus.DONE
    agents = live.gate_report["agents"]
    assert [row["agent"] for row in agents] == ["alice", "bob"][: len(jobs)]
    assert all(row["is_agent"] for row in agents)
    assert sum(row["answers"] for row in agents) == len(jobs)
    assert agents[0]["token"] == "alice-token"
    page = logged_in(operator).get(reverse("procedures:version", args=[live.version_id]))
    assert page.status_code == 200 and "Evidence from: <strong>alice</strong>" in page.content.decode()


def test_the_agents_evaluation_names_the_agents_it_counts(operator, django_capture_on_commit_callbacks):
    workspace = workspace_create(actor=Actor.system(), slug="lab", task_description="answer questions").workspace
    ingest(
        *[
            run_item(task=f"Question {n}", outcome="success", score=None, graph_workspace="lab", steps=[step_item("a")])
            for n in range(3)
        ]
    )
    run = evolution_start(
        actor=Actor(user=operator),
        workspace=workspace,
        rounds=1,
        evaluator="agents",
        script=[ROUND_1_BUILD],
        enqueue=False,
    )
    evolution_step(run_id=run.pk, worker="w")
    alice, _ = agent_actor("alice")
    while (job := job_services.job_claim(actor=alice, kind=GRAPH_JOB_KIND, worker="w", lease_seconds=60)) is not None:
        if job.payload["purpose"] != "baseline":
            break
        item = run_item(task=job.payload["task"], outcome="success", score=None, steps=[step_item("answer")])
        with django_capture_on_commit_callbacks(execute=True):
            job_services.job_complete(actor=alice, job=job, run_items=[item])
    run.refresh_from_db()
    (row,) = run.baseline["aggregate"]["agents"]
    assert (row["agent"], row["token"], row["is_agent"]) == ("alice", "alice-token", True)
    assert row["answers"] == run.baseline["aggregate"]["answered"] > 0
