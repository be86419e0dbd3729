"""Activation history (reviews.models.Activation): written by the activation in its transaction, read for rollback
targets and shown on the history page; nothing reads the audit log to decide anything."""

import pytest
from django.urls import reverse

from accounts.models import AuditEvent
from reviews import activations, services
from reviews.models import Activation
from tests.conftest import logged_in

from .conftest import act, v0_then_v1_through_a_review

pytestmark = pytest.mark.django_db


def test_each_applied_request_and_emergency_rollback_is_one_activation_row(
    fake_kind, proposer, reviewer, second_reviewer, admin_user
):
    v0_then_v1_through_a_review(fake_kind, proposer, reviewer, second_reviewer)
    applied = Activation.objects.get()
    assert (applied.kind, applied.parent_key, applied.version_id, applied.replaced_id) == ("fake", "p1", "v1", "v0")
    assert applied.request.status == "applied" and applied.activated_by == second_reviewer
    assert activations.rollback_target("fake", "p1", "v1") == "v0"

    rollback = services.rollback_emergency(actor=act(admin_user), kind="fake", parent_key="p1", reason="v1 loops")
    newest = activations.history("fake", "p1")[0]
    assert (newest.version_id, newest.replaced_id, newest.request, newest.activated_by) == (
        "v0",
        "v1",
        rollback,
        admin_user,
    )
    assert activations.rollback_target("fake", "p1", "v0") == "v1"  # what the rollback replaced


def test_rollback_targets_do_not_come_from_the_audit_log(fake_kind, proposer, reviewer, second_reviewer):
    v0_then_v1_through_a_review(fake_kind, proposer, reviewer, second_reviewer)
    assert activations.rollback_target("fake", "p1", "v1") == "v0"
    Activation.objects.all().delete()  # the audit events stay
    assert AuditEvent.objects.filter(verb="promotion.apply").exists()
    assert activations.rollback_target("fake", "p1", "v1") is None


def test_a_failed_activation_leaves_no_history_row(fake_kind, proposer, reviewer, second_reviewer, monkeypatch):
    for version in ("v0", "v1"):
        fake_kind.add(version)
    fake_kind.seed_active("v0")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="better")
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")

    def broken(*args, **kwargs):
        raise RuntimeError("the announcement failed")

    monkeypatch.setattr(services, "_announce", broken)
    with pytest.raises(RuntimeError):
        services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
    assert not Activation.objects.exists() and fake_kind.current_active("p1") == "v0"


def test_the_history_page_lists_activations_with_labels(fake_kind, proposer, reviewer, second_reviewer, viewer):
    v0_then_v1_through_a_review(fake_kind, proposer, reviewer, second_reviewer)
    page = logged_in(viewer).get(reverse("reviews:history", args=["fake", "p1"])).content.decode()
    table = page.split("<h2>Activations</h2>", 1)[1].split("</table>", 1)[0]
    label = fake_kind.label_of
    assert f'<span class="label">{label("v1")}</span>' in table and f'<span class="label">{label("v0")}</span>' in table
    assert "second_reviewer" not in table and second_reviewer.username in table
