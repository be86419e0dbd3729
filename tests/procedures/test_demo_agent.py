"""The demo agent: its environment's rules decide success; over real HTTP it claims and answers live replay jobs."""

import io

import pytest
from django.core.management import call_command

from accounts.services import Actor
from procedures import services
from procedures.demo_agent import simulate_run
from procedures.models import ReplayStatus, VersionStatus
from trajectories.models import Job, JobStatus, Run

from .factories import REFUND, refund_runs


def payload(*tools, task="Refund order ORD-4101 please"):
    return {
        "replay": 1,
        "arm": "candidate",
        "case_run_id": 7,
        "task": task,
        "intent": REFUND,
        "procedure": {"steps": [{"tool": tool, "arguments": {}} for tool in tools]},
    }


def test_a_refund_after_the_policy_lookup_succeeds():
    run = simulate_run(payload("lookup_policy", "issue_refund"))
    assert run["outcome"] == "success"
    assert [step["tool"] for step in run["steps"]] == ["lookup_policy", "issue_refund"]
    assert run["steps"][1]["arguments"] == {"order_id": "ORD-4101"}


def test_a_refund_without_the_policy_lookup_fails():
    run = simulate_run(payload("issue_refund", "notify"))
    assert run["outcome"] == "failure"
    assert run["steps"][-1]["ok"] is False and "lookup_policy" in run["steps"][-1]["observation"]


def test_an_empty_procedure_fails_and_the_simulation_is_deterministic():
    assert simulate_run(payload())["outcome"] == "failure"
    assert simulate_run(payload("lookup_policy")) == simulate_run(payload("lookup_policy"))


def test_with_the_server_down_it_reports_and_exits_under_once(db):
    err = io.StringIO()
    call_command("run_demo_agent", "--once", "--token", "wm_x_y", "--url", "http://127.0.0.1:9", stderr=err)
    assert "demo agent:" in err.getvalue()


@pytest.mark.postgres
def test_it_answers_every_live_replay_job_over_http(transactional_db, live_server, operator, make_token):
    refund_runs(successes=10, failures=2)
    result = services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    live = result.version.replays.get(mode="live")
    token = make_token(operator, "evaluations:run")
    out = io.StringIO()

    call_command("run_demo_agent", "--once", "--token", token, "--url", live_server.url, stdout=out)

    jobs = Job.objects.filter(subject=services.replay_subject(live))
    assert jobs.exists() and set(jobs.values_list("status", flat=True)) == {JobStatus.DONE}
    assert f"answered {jobs.count()} job(s)" in out.getvalue()
    assert Run.objects.filter(source="waymark-evaluation").count() == jobs.count()
    live.refresh_from_db()
    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is True
    result.version.refresh_from_db()
    assert result.version.status == VersionStatus.READY
