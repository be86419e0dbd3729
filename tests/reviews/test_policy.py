"""The promotion policy of DESIGN.md §5 through the services, with the test-only FakeKind."""

import pytest

from accounts.models import AuditEvent
from accounts.roles import RoleRequired
from reviews import services
from reviews.errors import Conflict, Invalid, NotAllowed, NotFound
from reviews.models import Judgment, PromotionRequest, PromotionStatus

from .conftest import act, activations, v0_then_v1_through_a_review

pytestmark = pytest.mark.django_db


def propose(kind, proposer, candidate="v1", **kwargs):
    if candidate not in kind.candidates:
        kind.add(candidate, **kwargs)
    return services.promotion_propose(actor=act(proposer), kind=kind.key, candidate_id=candidate, rationale="better")


def test_a_proposal_records_the_replaced_version_and_the_gate(fake_kind, proposer):
    fake_kind.add("v0")
    fake_kind.seed_active("v0")
    request = propose(fake_kind, proposer, passing=False)
    assert request.replaces_id == "v0"
    assert request.gate_snapshot["passing"] is False
    assert request.required_approvals == 2
    assert request.status == PromotionStatus.OPEN
    assert AuditEvent.objects.filter(verb="promotion.propose", target_id=str(request.pk)).count() == 1


def test_a_viewer_cannot_propose(fake_kind, viewer):
    fake_kind.add("v1")
    with pytest.raises(RoleRequired):
        services.promotion_propose(actor=act(viewer), kind="fake", candidate_id="v1", rationale="x")
    assert not PromotionRequest.objects.exists()


def test_a_proposal_needs_a_rationale_a_known_kind_and_a_known_candidate(fake_kind, proposer):
    fake_kind.add("v1")
    with pytest.raises(Invalid):
        services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="  ")
    with pytest.raises(Invalid):
        services.promotion_propose(actor=act(proposer), kind="nope", candidate_id="v1", rationale="x")
    with pytest.raises(NotFound):
        services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v9", rationale="x")
    assert not PromotionRequest.objects.exists()


def test_a_candidate_has_at_most_one_open_request(fake_kind, proposer, reviewer):
    propose(fake_kind, proposer)
    with pytest.raises(Conflict) as exc:
        services.promotion_propose(actor=act(reviewer), kind="fake", candidate_id="v1", rationale="again")
    assert exc.value.code == "already_open"
    assert PromotionRequest.objects.count() == 1


def test_the_active_version_cannot_be_proposed(fake_kind, proposer):
    fake_kind.add("v0")
    fake_kind.seed_active("v0")
    with pytest.raises(Conflict):
        services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v0", rationale="x")


def test_the_proposer_cannot_approve(fake_kind, proposer):
    request = propose(fake_kind, proposer)
    with pytest.raises(NotAllowed) as exc:
        services.judgment_submit(actor=act(proposer), request=request, verdict="approve")
    assert exc.value.code == "proposer_cannot_judge"
    assert not Judgment.objects.exists()


def test_a_non_reviewer_cannot_judge(fake_kind, proposer, viewer):
    request = propose(fake_kind, proposer)
    with pytest.raises(RoleRequired):
        services.judgment_submit(actor=act(viewer), request=request, verdict="approve")
    assert not Judgment.objects.exists()


def test_one_approval_is_not_enough(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    request = services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    assert request.status == PromotionStatus.OPEN
    assert fake_kind.current_active("p1") is None
    assert activations() == 0


def test_two_approvals_from_distinct_reviewers_apply_the_promotion(
    fake_kind, proposer, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    request = propose(fake_kind, proposer)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    with django_capture_on_commit_callbacks(execute=True):
        request = services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve", comment="ok")
    assert request.status == PromotionStatus.APPLIED
    assert request.applied_by == second_reviewer
    assert fake_kind.current_active("p1") == "v1"
    assert activations() == 1
    assert AuditEvent.objects.filter(verb="promotion.apply").count() == 1


def test_a_reviewer_judges_once(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    with pytest.raises(Conflict) as exc:
        services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    assert exc.value.code == "already_judged"
    assert Judgment.objects.count() == 1


def test_the_database_refuses_a_second_judgment_by_the_same_reviewer(fake_kind, proposer, reviewer):
    from django.db import IntegrityError, transaction

    request = propose(fake_kind, proposer)
    Judgment.objects.create(request=request, reviewer=reviewer, verdict="approve")
    with pytest.raises(IntegrityError), transaction.atomic():
        Judgment.objects.create(request=request, reviewer=reviewer, verdict="reject", comment="no")


def test_a_rejection_without_a_reason_is_refused(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    with pytest.raises(Invalid) as exc:
        services.judgment_submit(actor=act(reviewer), request=request, verdict="reject", comment="   ")
    assert exc.value.code == "reason_required"
    assert not Judgment.objects.exists()
    request.refresh_from_db()
    assert request.status == PromotionStatus.OPEN


def test_an_unknown_verdict_is_refused(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    with pytest.raises(Invalid):
        services.judgment_submit(actor=act(reviewer), request=request, verdict="maybe")


def test_one_rejection_rejects_the_request(fake_kind, proposer, reviewer, second_reviewer, third_reviewer):
    request = propose(fake_kind, proposer)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    request = services.judgment_submit(actor=act(second_reviewer), request=request, verdict="reject", comment="no")
    assert request.status == PromotionStatus.REJECTED
    assert activations() == 0
    with pytest.raises(Conflict):
        services.judgment_submit(actor=act(third_reviewer), request=request, verdict="approve")


def test_a_failing_gate_waits_for_an_admin_override(
    fake_kind, proposer, reviewer, second_reviewer, admin_user, django_capture_on_commit_callbacks
):
    request = propose(fake_kind, proposer, passing=None)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    request = services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
    assert request.status == PromotionStatus.APPROVED
    assert activations() == 0
    with django_capture_on_commit_callbacks(execute=True):
        request = services.promotion_override(actor=act(admin_user), request=request, reason="hand-seeded graph")
    assert request.status == PromotionStatus.APPLIED
    assert request.override_by == admin_user
    assert request.override_reason == "hand-seeded graph"
    assert fake_kind.current_active("p1") == "v1"


def test_an_override_needs_an_admin_and_a_reason(fake_kind, proposer, reviewer, admin_user):
    request = propose(fake_kind, proposer, passing=False)
    with pytest.raises(RoleRequired):
        services.promotion_override(actor=act(reviewer), request=request, reason="trust me")
    with pytest.raises(Invalid):
        services.promotion_override(actor=act(admin_user), request=request, reason=" ")
    request.refresh_from_db()
    assert request.override_by is None
    assert not AuditEvent.objects.filter(verb="promotion.override").exists()


def test_a_passing_gate_needs_no_override(fake_kind, proposer, admin_user):
    request = propose(fake_kind, proposer, passing=True)
    with pytest.raises(Invalid):
        services.promotion_override(actor=act(admin_user), request=request, reason="why not")


def test_a_stale_request_is_superseded_and_answers_a_conflict(fake_kind, proposer, reviewer, second_reviewer):
    fake_kind.add("v0")
    fake_kind.seed_active("v0")
    request = propose(fake_kind, proposer)
    fake_kind.add("v2")
    fake_kind.seed_active("v2")  # someone else moved the pointer
    with pytest.raises(Conflict) as exc:
        services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    assert exc.value.code == "stale"
    request.refresh_from_db()
    assert request.status == PromotionStatus.SUPERSEDED
    assert not Judgment.objects.exists()
    assert fake_kind.current_active("p1") == "v2"


def test_applying_supersedes_the_other_requests_of_the_parent(
    fake_kind, proposer, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    first = propose(fake_kind, proposer, "v1")
    other = propose(fake_kind, proposer, "v2")
    services.judgment_submit(actor=act(reviewer), request=first, verdict="approve")
    with django_capture_on_commit_callbacks(execute=True):
        services.judgment_submit(actor=act(second_reviewer), request=first, verdict="approve")
    other.refresh_from_db()
    assert other.status == PromotionStatus.SUPERSEDED
    again = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v2", rationale="again")
    assert again.replaces_id == "v1"


def test_a_rollback_proposal_must_name_the_previous_version(fake_kind, proposer, reviewer, second_reviewer):
    v0_then_v1_through_a_review(fake_kind, proposer, reviewer, second_reviewer)
    fake_kind.add("v2")
    with pytest.raises(Invalid):
        services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v2", rationale="x", is_rollback=True)
    request = services.promotion_propose(
        actor=act(proposer), kind="fake", candidate_id="v0", rationale="v1 misbehaves", is_rollback=True
    )
    assert request.is_rollback and request.replaces_id == "v1"


def test_an_admin_rolls_back_alone_in_an_emergency(fake_kind, admin_user, reviewer, proposer, second_reviewer):
    v0_then_v1_through_a_review(fake_kind, proposer, reviewer, second_reviewer)
    with pytest.raises(RoleRequired):
        services.rollback_emergency(actor=act(reviewer), kind="fake", parent_key="p1", reason="broken")
    with pytest.raises(Invalid):
        services.rollback_emergency(actor=act(admin_user), kind="fake", parent_key="p1", reason="")
    request = services.rollback_emergency(actor=act(admin_user), kind="fake", parent_key="p1", reason="v1 loops")
    assert request.status == PromotionStatus.APPLIED and request.is_rollback
    assert fake_kind.current_active("p1") == "v0"
    event = AuditEvent.objects.get(verb="promotion.rollback_emergency")
    assert event.before["active"] == "v1" and event.after["active"] == "v0"


def test_an_emergency_rollback_without_a_previous_version_is_refused(fake_kind, admin_user):
    with pytest.raises(Conflict):
        services.rollback_emergency(actor=act(admin_user), kind="fake", parent_key="p1", reason="broken")
    assert not PromotionRequest.objects.exists()


def test_the_proposer_or_an_admin_withdraws(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    with pytest.raises(NotAllowed):
        services.promotion_withdraw(actor=act(reviewer), request=request)
    request = services.promotion_withdraw(actor=act(proposer), request=request)
    assert request.status == PromotionStatus.WITHDRAWN
