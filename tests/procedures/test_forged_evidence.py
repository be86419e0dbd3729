"""Forged gate evidence (issue 30, finding 1), end to end with a real Celery worker on Redis: an agent whose only
scope is trajectories:write plants runs named like the answers of live-replay jobs, present and future; the ingest
refuses every one, the honest agent's failing answers are what the worker settles the replay with, the gate fails,
the report names exactly the runs it counted with the token that wrote them, and two approvals cannot make the
failing version active."""

import pytest

from accounts.models import User
from accounts.roles import Role
from accounts.services import Actor
from procedures.mining import services as mining_services
from procedures.models import Procedure, ProcedureVersion, ReplayRun, ReplayStatus
from procedures.replay.services.live import REPLAY_JOB_KIND, replay_subject
from reviews import services as review_services
from reviews.models import PromotionStatus
from tests.factories import user_with
from tests.helpers.celery_workers import redis_app, replay_done, wait_for
from trajectories.choices import EVALUATION_SOURCE
from trajectories.models import Job, JobStatus, Run

from .factories import REFUND, refund_run, refund_runs

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
__all__ = ["redis_app"]  # the worker fixture, used by name

INGEST = "/api/v1/trajectories"
FORGED_SOURCES = [EVALUATION_SOURCE, "Waymark-Evaluation", "ｗａｙｍａｒｋ-evaluation", "waymark‐evaluation"]


def forge(api_client, token: str, job_id: int, source: str):
    """A perfect refund run named as the answer of job `job_id`."""
    item = refund_run(source=source, external_id=f"job-{job_id}", metadata={"job": {"id": job_id}})
    return api_client.post(INGEST, {"runs": [item]}, token=token)


def test_runs_planted_for_live_replay_jobs_never_become_evidence(
    transactional_db, redis_app, api_client, operator, make_agent_token
):
    refund_runs(successes=10, failures=2)
    result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    offline, live = sorted(result.replays, key=lambda replay: replay.mode != "offline")
    assert wait_for(lambda: replay_done(offline.pk)), "the worker did not finish the offline replay"
    jobs = list(Job.objects.filter(subject=replay_subject(live)).order_by("id"))
    assert jobs and all(job.status == JobStatus.QUEUED for job in jobs)

    attacker = make_agent_token("trajectories:write", name="mallory")
    honest = make_agent_token("evaluations:run", name="honest-agent")
    targets = [job.pk for job in jobs] + [jobs[-1].pk + n for n in range(1, 6)]  # today's jobs and future ones
    for job_id in targets:
        for source in FORGED_SOURCES:
            response = forge(api_client, attacker, job_id, source)
            assert response.status_code == 422, (source, response.content)
            types = {error["type"] for error in response.json()["details"]["errors"]}
            assert types == {"reserved_source", "reserved_external_id"}
        named_otherwise = forge(api_client, attacker, job_id, "mallory-agent")  # the job's id shape alone
        assert named_otherwise.status_code == 422
        assert [e["loc"] for e in named_otherwise.json()["details"]["errors"]] == [["runs", 0, "external_id"]]
    assert not Run.objects.filter(external_id__istartswith="job-").exists()

    answered = []
    for _ in jobs:
        claimed = api_client.post("/api/v1/jobs/claim", {"kinds": [REPLAY_JOB_KIND]}, token=honest)
        assert claimed.status_code == 200, claimed.content
        # The honest agent fails the case: it refunds without looking the policy up, and says so.
        failing = refund_run("issue_refund", outcome="failure")
        response = api_client.post(f"/api/v1/jobs/{claimed.json()['id']}/result", {"run": failing}, token=honest)
        assert response.status_code == 201, response.content
        answered.append(response.json()["run_id"])
    # After the claims, planting under the claimed jobs' names is refused all the same.
    assert forge(api_client, attacker, jobs[0].pk, EVALUATION_SOURCE).status_code == 422

    assert wait_for(lambda: replay_done(live.pk)), "the worker did not settle the live replay"
    live = ReplayRun.objects.get(pk=live.pk)
    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is False
    assert live.metrics["candidate"]["answered_rate"] == 1.0
    honest_agent = User.objects.get(username="honest-agent")
    (credited,) = live.gate_report["agents"]
    assert credited["agent"] == honest_agent.username and credited["answers"] == len(jobs)
    assert credited["token_prefix"] == honest.split("_")[1]
    assert sorted(credited["run_ids"]) == sorted(answered)
    counted = Run.objects.filter(pk__in=answered)
    assert {run.source for run in counted} == {EVALUATION_SOURCE}
    assert {run.outcome for run in counted} == {"failure"}
    assert {job.result_run_id for job in Job.objects.filter(subject=replay_subject(live))} == set(answered)

    # Two reviewers approve; the failing gate keeps the version from becoming active without an admin override.
    with_gate = review_services.promotion_propose(
        actor=Actor(user=operator), kind="procedure_version", candidate_id=str(result.version.pk), rationale="try"
    )
    for _ in range(with_gate.required_approvals):
        with_gate = review_services.judgment_submit(
            actor=Actor(user=user_with(Role.REVIEWER)), request=with_gate, verdict="approve"
        )
    assert with_gate.status != PromotionStatus.APPLIED
    assert Procedure.objects.get(pk=result.version.procedure_id).active_version_id is None
    assert ProcedureVersion.objects.get(pk=result.version.pk).status != "active"
