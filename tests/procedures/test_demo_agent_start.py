"""The demo agent is one of `make run`'s processes, and one of them ending stops the stack: nothing a job carries,
and no error it did not expect, may end it (issue 24)."""

import io

import pytest
from django.core.management import call_command

from accounts.services import Actor
from procedures.demo_agent import simulate_job
from procedures.management.commands import run_demo_agent
from procedures.mining import services as mining_services
from procedures.replay.services import live as live_replay_services
from trajectories.models import Job, JobStatus

from .factories import REFUND, refund_runs


@pytest.mark.postgres
def test_a_job_it_cannot_simulate_is_reported_and_the_others_are_answered(
    transactional_db, live_server, operator, make_agent_token, monkeypatch
):
    refund_runs(successes=10, failures=2)
    live = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True).version.replays.get(
        mode="live"
    )
    jobs = Job.objects.filter(subject=live_replay_services.replay_subject(live))
    broken = jobs.order_by("id").first()

    def simulate(kind, payload):
        if payload == broken.payload:
            raise KeyError("a payload the simulation does not know")
        return simulate_job(kind, payload)

    monkeypatch.setattr(run_demo_agent, "simulate_job", simulate)
    out, err = io.StringIO(), io.StringIO()
    token = make_agent_token("evaluations:run")

    call_command("run_demo_agent", "--once", "--token", token, "--url", live_server.url, stdout=out, stderr=err)

    broken.refresh_from_db()
    assert broken.status == JobStatus.LEASED  # left to its lease, for another agent or a later try
    assert f"job {broken.pk} not run: KeyError" in err.getvalue()
    assert set(jobs.exclude(pk=broken.pk).values_list("status", flat=True)) == {JobStatus.DONE}
    assert f"answered {jobs.count() - 1} job(s)" in out.getvalue()


def test_an_unexpected_error_is_reported_and_waited_out(db, monkeypatch):
    class Stop(BaseException):  # (as an interrupt would: the loop lets it through)
        pass

    calls = []

    def work(self, **kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise RuntimeError("the client met something new")
        raise Stop  # the second poll: the loop survived the first

    monkeypatch.setattr(run_demo_agent.Command, "work", work)
    monkeypatch.setattr(run_demo_agent.time, "sleep", lambda seconds: None)
    err = io.StringIO()

    with pytest.raises(Stop):
        call_command("run_demo_agent", "--token", "wm_x_y", "--url", "http://127.0.0.1:9", stderr=err)

    assert len(calls) == 2
    assert "demo agent: unexpected error, next try in 1 s" in err.getvalue()
    assert "Traceback" in err.getvalue() and "the client met something new" in err.getvalue()
