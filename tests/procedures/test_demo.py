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


# --- the user's runs of the same intents (issue 24) ------------------------------------------------------------------
def test_the_demo_mines_only_its_own_runs_and_leaves_the_mined_through_mark_alone():
    from procedures.mining.services import intents_due_for_mining
    from tests.demo_data import assert_the_users_runs_were_left_alone, push_user_runs

    push_user_runs(400)  # lookup_order → issue_refund, under the demo's intents
    seed_demo_runs(actor=Actor.system())

    seed_demo_procedures(actor=Actor.system())

    refund = ProcedureVersion.objects.get(procedure__intent="refund request")
    assert refund.tools[0] == "lookup_policy"  # the demo's refunds, not the user's lookup_order ones
    assert_the_users_runs_were_left_alone()
    assert refund.procedure.mined_through_run_id == 0
    assert "refund request" in intents_due_for_mining()  # the user's runs are still new to periodic mining


def test_the_review_demo_proposes_the_version_learnt_from_the_demo_runs(operator):
    from procedures.mining.services import procedure_mine
    from procedures.replay.services.offline import replay_offline_run
    from reviews.registry import get_kind
    from tests.demo_data import push_user_runs

    seed_demo_runs(actor=Actor.system())
    push_user_runs(400)
    seed_demo_procedures(actor=Actor.system())
    demo = ProcedureVersion.objects.get(procedure__intent="refund request")
    theirs = procedure_mine(actor=Actor(user=operator), intent="refund_request", live=False).version  # all runs
    for replay in theirs.replays.filter(status=ReplayStatus.QUEUED):
        replay_offline_run(replay=replay, actor=Actor.system())
    theirs.refresh_from_db()
    assert theirs.number > demo.number and theirs.status in ("ready", "failed")

    assert get_kind("procedure_version").demo_candidate(actor=Actor.system()) == str(demo.pk)
