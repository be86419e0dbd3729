"""The demo seed yields real candidates with finished offline replay reports, and running it again adds nothing."""

import pytest

from accounts.services import Actor
from procedures.demo import seed_demo_procedures
from procedures.models import ProcedureVersion, ReplayRun, ReplayStatus
from trajectories.demo import seed_demo_runs

pytestmark = pytest.mark.django_db


def test_the_demo_refund_runs_yield_a_candidate_with_a_finished_replay():
    seed_demo_runs(actor=Actor.system())
    lines = seed_demo_procedures(actor=Actor.system())
    refund = ProcedureVersion.objects.get(procedure__intent="refund request")
    tools = refund.tools
    assert tools[0] == "lookup_policy" and "issue_refund" in tools and len(tools) >= 2
    replay = refund.replays.get()
    assert replay.status == ReplayStatus.DONE and replay.gate_report is not None
    assert refund.status in ("ready", "failed")
    assert any(line.startswith("refund_request: v1") for line in lines)


def test_seeding_again_creates_nothing_new():
    seed_demo_runs(actor=Actor.system())
    seed_demo_procedures(actor=Actor.system())
    counts = (ProcedureVersion.objects.count(), ReplayRun.objects.count())
    lines = seed_demo_procedures(actor=Actor.system())
    assert (ProcedureVersion.objects.count(), ReplayRun.objects.count()) == counts
    assert all("already there" in line or "not mined" in line for line in lines)
