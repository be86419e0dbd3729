"""Mining: deterministic split, ok-only steps, no duplicate versions, clear refusals, periodic re-mining."""

import pytest
from django.db import transaction

from accounts.models import AuditEvent
from accounts.roles import RoleRequired
from accounts.services import Actor
from procedures import errors
from procedures.mining import content_revision, intent_key, split_ids
from procedures.mining import services as mining_services
from procedures.models import Procedure, ProcedureVersion, ReplayRun, VersionStatus
from tests.trajectories.factories import ingest

from .factories import REFUND, refund_run, refund_runs

pytestmark = pytest.mark.django_db


def mine(user=None, **kwargs):
    kwargs.setdefault("intent", REFUND)
    return mining_services.procedure_mine(actor=Actor(user=user), **kwargs)


def test_the_split_is_the_same_for_the_same_ids_share_and_seed():
    ids = list(range(1, 101))
    first = split_ids(ids, held_out_share=0.3, seed=17)
    again = split_ids(reversed(ids), held_out_share=0.3, seed=17)
    assert first == again
    assert len(first.held_out) == 30 and len(first.training) == 70
    assert set(first.held_out) | set(first.training) == set(ids)
    assert split_ids(ids, held_out_share=0.3, seed=18) != first


def test_the_split_keeps_one_run_on_each_side_when_asked():
    split = split_ids([5, 9], held_out_share=0.1, seed=17, at_least_one=True)
    assert len(split.training) == 1 and len(split.held_out) == 1


def test_intent_keys_follow_normalize_intent():
    assert intent_key("  Reset_Password!! ") == "reset password"
    assert intent_key("ＲＥＳＥＴ　password") == "reset password"
    assert intent_key("___") == ""


def test_it_mines_a_version_and_splits_successes_and_failures(operator, django_capture_on_commit_callbacks):
    ids = refund_runs(successes=10, failures=4)
    with django_capture_on_commit_callbacks(execute=True):
        result = mine(operator)
    version = result.version
    assert result.created and version.number == 1
    assert version.tools == ["lookup_policy", "issue_refund"]
    assert version.steps[0]["arguments"] == {"order_id": "A-1"}
    assert version.procedure.intent == "refund request" and version.procedure.title == REFUND
    assert sorted(version.training_run_ids + version.held_out_run_ids) == sorted(ids)
    assert len(version.held_out_run_ids) == 3 + 1  # 30% of 10 successes, 30% of 4 failures
    assert set(version.source_run_ids) <= set(version.training_run_ids)
    assert version.content_revision == content_revision(intent="refund request", steps=version.steps)
    assert AuditEvent.objects.filter(verb="procedure_version.create", target_id=str(version.pk)).exists()


def test_mining_the_same_runs_twice_stores_one_version(operator, django_capture_on_commit_callbacks):
    refund_runs()
    with django_capture_on_commit_callbacks(execute=True):
        first = mine(operator)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        second = mine(operator)
    assert not second.created and second.version.pk == first.version.pk
    assert ProcedureVersion.objects.count() == 1 and ReplayRun.objects.count() == 1
    assert callbacks == []


def mine_and_roll_back(user, **kwargs) -> tuple[list[int], list[int]]:
    """A fresh mining of the same runs (rolled back, so the next one is not answered with the stored version)."""
    savepoint = transaction.savepoint_create()  # not an atomic block: the service's durable block may run inside it
    result = mine(user, **kwargs)
    split = (sorted(result.version.training_run_ids), sorted(result.version.held_out_run_ids))  # read while stored
    transaction.savepoint_rollback(savepoint)
    assert result.created and not ProcedureVersion.objects.exists()
    return split


def test_the_same_seed_gives_the_same_split_and_another_seed_may_not(operator):
    ids = refund_runs(successes=20, failures=6)
    training, held_out = mine_and_roll_back(operator)  # the default seed, 17
    assert len(held_out) == 6 + 2 and sorted(training + held_out) == sorted(ids)
    assert mine_and_roll_back(operator, seed=17) == (training, held_out)
    other_training, other_held_out = mine_and_roll_back(operator, seed=18)
    assert len(other_held_out) == 6 + 2 and sorted(other_training + other_held_out) == sorted(ids)
    assert other_held_out != held_out


def test_only_ok_steps_are_mined_and_empty_runs_are_skipped(operator):
    ingest(
        refund_run("lookup_policy", "issue_refund", "issue_refund", failed=("issue_refund",)),
        *[refund_run("lookup_policy", "retry", "issue_refund", failed=("retry",)) for _ in range(8)],
        refund_run("lookup_policy", "issue_refund", failed=("lookup_policy", "issue_refund")),
    )
    version = mine(operator, held_out_share=0.1).version
    assert "retry" not in version.tools
    assert version.tools[0] == "lookup_policy"
    assert all(pk not in version.source_run_ids for pk in version.skipped_run_ids)


def test_it_refuses_with_too_few_successful_runs_and_writes_nothing(operator):
    ingest(refund_run(), refund_run(outcome="failure"))
    with pytest.raises(errors.MiningError, match="1 successful run"):
        mine(operator)
    assert not Procedure.objects.exists() and not ProcedureVersion.objects.exists()


def test_it_refuses_an_unknown_intent_and_a_bad_share(operator):
    with pytest.raises(errors.MiningError, match="0 successful"):
        mine(operator, intent="nothing_like_this")
    with pytest.raises(errors.MiningError, match="an intent is required"):
        mine(operator, intent="  __ ")
    with pytest.raises(errors.MiningError, match="held_out_share"):
        mine(operator, held_out_share=1.0)


def test_it_refuses_runs_that_share_no_step(operator):
    ingest(*[refund_run("a") for _ in range(2)], *[refund_run("b") for _ in range(2)])
    with pytest.raises(errors.MiningError, match="share no procedure steps"):
        mine(operator, held_out_share=0.25, seed=1)
    assert not ProcedureVersion.objects.exists()


def test_a_user_without_the_operator_role_cannot_mine(viewer):
    refund_runs()
    with pytest.raises(RoleRequired):
        mine(viewer)
    assert not ProcedureVersion.objects.exists()


def test_intents_are_due_again_after_enough_new_successful_runs(operator, settings):
    settings.WAYMARK_MINE_MIN_NEW_RUNS = 5
    refund_runs(successes=6, failures=0)
    assert mining_services.intents_due_for_mining() == ["refund request"]
    mine(operator)
    assert mining_services.intents_due_for_mining() == []
    refund_runs(successes=4, failures=3)
    assert mining_services.intents_due_for_mining() == []
    refund_runs(successes=1, failures=0)
    assert mining_services.intents_due_for_mining() == ["refund request"]


def test_the_periodic_task_mines_due_intents(settings, django_capture_on_commit_callbacks):
    from procedures.tasks import mine_new_runs

    settings.WAYMARK_MINE_MIN_NEW_RUNS = 3
    refund_runs(successes=3, failures=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert mine_new_runs() == ["refund request"]
    version = ProcedureVersion.objects.get()
    assert version.created_by is None and version.status in (VersionStatus.READY, VersionStatus.FAILED)
