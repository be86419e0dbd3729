"""Offline replay, the gate, version statuses, immutability and the admin-only audited activation."""

import pytest

from accounts.models import AuditEvent
from accounts.roles import Role, RoleRequired
from accounts.services import Actor
from procedures import errors
from procedures.mining import services as mining_services
from procedures.models import (
    ImmutableVersionError,
    Procedure,
    ProcedureVersion,
    ReplayCase,
    ReplayStatus,
    VersionStatus,
)
from procedures.replay.services import offline as offline_replay_services
from procedures.versions import services as version_services
from reviews import services as review_services
from reviews.models import PromotionRequest, PromotionStatus
from tests.factories import user_with
from tests.promote import promote_procedure_version
from tests.trajectories.factories import ingest

from .factories import REFUND, queued_replay, refund_run, refund_runs, stored_version

pytestmark = pytest.mark.django_db


@pytest.fixture
def mined(operator, django_capture_on_commit_callbacks):
    refund_runs(successes=10, failures=4)
    with django_capture_on_commit_callbacks(execute=True):
        return mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND)


def test_mining_replays_the_candidate_offline_and_marks_it_ready(mined):
    version = ProcedureVersion.objects.get(pk=mined.version.pk)
    replay = version.replays.get()
    assert replay.status == ReplayStatus.DONE and replay.mode == "offline"
    assert replay.compared_with is None
    assert replay.held_out_run_ids == version.held_out_run_ids
    assert replay.gate_report["passed"] is True
    assert replay.metrics["candidate"]["task_success"] == 0.75  # 3 held-out successes follow it, 1 failure
    assert replay.metrics["active"] is None
    assert len(replay.report["counterexamples"]) == 0
    assert ReplayCase.objects.filter(replay=replay, arm="candidate").count() == len(version.held_out_run_ids)
    assert version.status == VersionStatus.READY
    assert AuditEvent.objects.filter(verb="replay.finish", target_id=str(replay.pk)).exists()


def test_a_regression_against_the_active_version_fails_the_gate(admin_user):
    # Held-out successes that skip check_eligibility: the active two-step version passes them, the candidate not.
    held_out = ingest(
        *[refund_run() for _ in range(3)], refund_run("lookup_policy", "check_eligibility", "issue_refund")
    )
    procedure = Procedure.objects.create(intent="refund request", title=REFUND)
    active = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
    promote_procedure_version(active)
    candidate = stored_version(
        procedure, "lookup_policy", "check_eligibility", "issue_refund", number=2, status=VersionStatus.CANDIDATE
    )
    replay = queued_replay(candidate, compared_with=active, held_out=held_out.created_ids)

    replay = offline_replay_services.replay_offline_run(replay=replay)

    assert replay.status == ReplayStatus.DONE
    assert replay.gate_report["passed"] is False
    failed = {check["metric"] for check in replay.gate_report["checks"] if not check["passed"]}
    assert {"task_success", "regressions"} <= failed
    assert sorted(replay.report["regressions"]) == sorted(held_out.created_ids[:3])
    assert replay.metrics["active"]["task_success"] == 1.0 and replay.metrics["candidate"]["task_success"] == 0.25
    regression_rows = ReplayCase.objects.filter(replay=replay, arm="candidate", result__regression=True)
    assert regression_rows.count() == 3
    assert ProcedureVersion.objects.get(pk=candidate.pk).status == VersionStatus.FAILED


def test_a_replay_runs_once(mined):
    replay = mined.version.replays.get()
    again = offline_replay_services.replay_offline_run(replay=replay)
    assert again.status == ReplayStatus.DONE
    assert ReplayCase.objects.filter(replay=replay).count() == len(replay.held_out_run_ids)


def test_a_replays_cases_go_with_it_through_the_orm_without_a_database_constraint(mined):
    # The case rows hold no database constraint on their replay (docs/decisions.md): the ORM's cascade removes them.
    replay = ProcedureVersion.objects.get(pk=mined.version.pk).replays.get()
    other = ReplayCase.objects.exclude(replay=replay).count()
    assert ReplayCase.objects.filter(replay=replay).exists()
    replay.delete()
    assert ReplayCase.objects.filter(replay_id=replay.pk).count() == 0
    assert ReplayCase.objects.count() == other


def test_a_version_refuses_content_changes(mined):
    version = ProcedureVersion.objects.get(pk=mined.version.pk)
    version.steps = [{"tool": "issue_refund", "arguments": {}}]
    with pytest.raises(ImmutableVersionError):
        version.save()
    with pytest.raises(ImmutableVersionError):
        ProcedureVersion.objects.filter(pk=version.pk).update(steps=[])
    assert ProcedureVersion.objects.get(pk=version.pk).tools == ["lookup_policy", "issue_refund"]


def test_a_promoted_ready_version_becomes_active_and_the_revision_moves(mined):
    version = mined.version
    request = promote_procedure_version(version)
    procedure = Procedure.objects.get(pk=version.procedure_id)
    assert procedure.active_version_id == version.pk and procedure.revision == 1
    assert request.gate_snapshot["passing"] is True  # the replay gate passed: two approvals were enough
    assert ProcedureVersion.objects.get(pk=version.pk).status == VersionStatus.ACTIVE
    event = AuditEvent.objects.get(verb="procedure.activate")
    assert event.before == {"active_version": None, "revision": 0} and event.after["revision"] == 1


def test_a_stale_promotion_of_a_procedure_version_answers_409_and_is_superseded(mined, api_client, make_token):
    procedure = mined.version.procedure
    newer = stored_version(procedure, "lookup_policy", "confirm", "issue_refund", number=2)
    proposer, judge = (make_token(user_with(Role.REVIEWER), "reviews:judge") for _ in range(2))
    body = {"kind": "procedure_version", "candidate_id": str(mined.version.pk), "rationale": "mined and replayed"}
    proposed = api_client.post("/api/v1/promotions", body, token=proposer)
    assert proposed.status_code == 201, proposed.content
    # Another request wins first (judged before the winner's after-commit sweep supersedes this one).
    promote_procedure_version(newer, on_commit=False)

    response = api_client.post(
        f"/api/v1/promotions/{proposed.json()['id']}/judgments", {"verdict": "approve"}, token=judge
    )

    assert response.status_code == 409 and response.json()["code"] == "stale"
    assert Procedure.objects.get(pk=procedure.pk).active_version_id == newer.pk
    assert PromotionRequest.objects.get(pk=proposed.json()["id"]).status == PromotionStatus.SUPERSEDED
    assert ProcedureVersion.objects.get(pk=mined.version.pk).status == VersionStatus.READY


def test_promoting_retires_the_previous_version(mined):
    procedure = mined.version.procedure
    promote_procedure_version(mined.version)
    newer = stored_version(procedure, "lookup_policy", "confirm", "issue_refund", number=2)
    promote_procedure_version(newer)
    assert ProcedureVersion.objects.get(pk=mined.version.pk).status == VersionStatus.RETIRED
    assert Procedure.objects.get(pk=procedure.pk).active_version_id == newer.pk


def test_a_failed_version_is_applied_only_with_an_admin_override(mined, operator, reviewer, admin_user):
    failed = stored_version(mined.version.procedure, "x", number=2, status=VersionStatus.FAILED)
    with pytest.raises(RoleRequired):
        review_services.promotion_propose(
            actor=Actor(user=user_with()), kind="procedure_version", candidate_id=str(failed.pk), rationale="r"
        )
    request = review_services.promotion_propose(
        actor=Actor(user=operator), kind="procedure_version", candidate_id=str(failed.pk), rationale="try it"
    )
    assert request.gate_snapshot["passing"] is not True
    for judge in (reviewer, user_with(Role.REVIEWER)):
        request = review_services.judgment_submit(actor=Actor(user=judge), request=request, verdict="approve")
    assert request.status == PromotionStatus.APPROVED
    assert Procedure.objects.get().active_version_id is None
    with pytest.raises(RoleRequired):
        review_services.promotion_override(actor=Actor(user=operator), request=request, reason="trust me")
    request = review_services.promotion_override(actor=Actor(user=admin_user), request=request, reason="known good")
    assert request.status == PromotionStatus.APPLIED
    assert Procedure.objects.get().active_version_id == failed.pk


def test_an_operator_amends_a_version_into_a_new_one_with_the_old_as_parent(
    mined, operator, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        result = version_services.procedure_version_amend(
            actor=Actor(user=operator),
            version=mined.version,
            preconditions=["the order was delivered", "  "],
            failure_exits=["refund denied: hand over to a human"],
        )
    amended = ProcedureVersion.objects.get(pk=result.version.pk)
    assert result.created and amended.number == 2 and amended.parent_id == mined.version.pk
    assert amended.steps == mined.version.steps and amended.preconditions == ["the order was delivered"]
    assert amended.content_revision != mined.version.content_revision
    assert amended.candidate_revision == mined.version.candidate_revision
    assert amended.status == VersionStatus.READY and amended.replays.get().status == ReplayStatus.DONE
    again = version_services.procedure_version_amend(
        actor=Actor(user=operator),
        version=mined.version,
        preconditions=["the order was delivered"],
        failure_exits=["refund denied: hand over to a human"],
    )
    assert not again.created and again.version.pk == amended.pk
    assert AuditEvent.objects.filter(verb="procedure_version.amend").count() == 1


def test_amending_refuses_bad_notes_and_non_operators(mined, operator, viewer):
    with pytest.raises(errors.MiningError, match="list of texts"):
        version_services.procedure_version_amend(
            actor=Actor(user=operator), version=mined.version, preconditions=[1], failure_exits=[]
        )
    with pytest.raises(errors.MiningError, match="at most 300"):
        version_services.procedure_version_amend(
            actor=Actor(user=operator), version=mined.version, preconditions=["x" * 301], failure_exits=[]
        )
    with pytest.raises(RoleRequired):
        version_services.procedure_version_amend(
            actor=Actor(user=viewer), version=mined.version, preconditions=[], failure_exits=[]
        )
    assert ProcedureVersion.objects.count() == 1


def test_a_replay_that_cannot_be_evaluated_fails_visibly(db):
    procedure = Procedure.objects.create(intent="refund request", title=REFUND)
    broken = stored_version(procedure, number=1, status=VersionStatus.CANDIDATE)  # no steps: replay refuses it
    replay = offline_replay_services.replay_offline_run(replay=queued_replay(broken, compared_with=None, held_out=[]))
    assert replay.status == ReplayStatus.FAILED and "non-empty" in replay.error
    assert ProcedureVersion.objects.get(pk=broken.pk).status == VersionStatus.FAILED
    assert AuditEvent.objects.filter(verb="replay.fail").exists()
