"""The demo runs: realistic variety, stored through the service, idempotent."""

import pytest

from accounts.services import Actor
from trajectories.demo import DEMO_SOURCE, seed_demo_runs
from trajectories.models import Run, Step

pytestmark = pytest.mark.django_db


def test_it_seeds_a_few_dozen_varied_runs_once():
    first = seed_demo_runs(actor=Actor.system())
    assert 30 <= first.created <= 60
    runs = Run.objects.filter(source=DEMO_SOURCE)
    assert set(runs.values_list("intent", flat=True)) >= {"refund_request", "change_address", "cancel_order"}
    assert set(runs.values_list("outcome", flat=True)) == {"success", "failure", "unknown"}
    assert Step.objects.filter(run__source=DEMO_SOURCE, ok=False, tool="issue_refund").exists()
    assert Step.objects.filter(run__source=DEMO_SOURCE, ok=False, tool="check_account", run__outcome="success").exists()
    refund_tools = {tuple(tools) for tools in runs.filter(intent="refund_request").values_list("tools", flat=True)}
    assert ("lookup_policy", "check_account", "issue_refund", "notify") in refund_tools
    assert ("lookup_policy", "issue_refund", "notify") in refund_tools  # check_account skipped
    assert not Step.objects.filter(arguments__has_key="auth_token").exists()  # secret-like keys dropped
    assert set(Step.objects.filter(tool="issue_refund").values_list("action_family", flat=True)) == {"execute"}

    again = seed_demo_runs(actor=Actor.system())
    assert again.created == 0 and again.existing == first.created
    assert Run.objects.filter(source=DEMO_SOURCE).count() == first.created
