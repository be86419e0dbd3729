"""Queue leases and the independence of judgments (selectors)."""

from datetime import timedelta

import pytest
from django.http import Http404
from django.utils import timezone

from accounts.roles import RoleRequired
from reviews import selectors, services
from reviews.models import QueueLease

from .conftest import act

pytestmark = pytest.mark.django_db


def propose(kind, proposer, candidate, parent="p1"):
    kind.add(candidate, parent=parent)
    return services.promotion_propose(actor=act(proposer), kind="fake", candidate_id=candidate, rationale="go")


def test_a_reviewer_sees_others_judgments_only_after_their_own(
    fake_kind, proposer, reviewer, second_reviewer, third_reviewer
):
    request = propose(fake_kind, proposer, "v1")
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve", comment="looks right")
    before = selectors.promotion_view(second_reviewer, request)
    assert before.judgments is None and before.approvals is None and before.can_judge  # counts hidden too
    services.judgment_submit(actor=act(second_reviewer), request=request, verdict="reject", comment="loops")
    request.refresh_from_db()
    after = selectors.promotion_view(second_reviewer, request)
    assert [j.comment for j in after.judgments] == ["looks right", "loops"]
    assert not after.can_judge


def test_the_proposer_sees_counts_only_while_the_request_is_open(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer, "v1")
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve", comment="fine")
    view = selectors.promotion_view(proposer, request)
    assert view.judgments is None and view.approvals == 1 and not view.can_judge and view.is_proposer


def test_everyone_sees_the_judgments_of_a_closed_request(fake_kind, proposer, reviewer, viewer):
    request = propose(fake_kind, proposer, "v1")
    request = services.judgment_submit(actor=act(reviewer), request=request, verdict="reject", comment="no")
    assert [j.verdict for j in selectors.promotion_view(viewer, request).judgments] == ["reject"]
    assert [j.verdict for j in selectors.promotion_view(proposer, request).judgments] == ["reject"]


def test_outsiders_get_404(fake_kind, proposer, outsider):
    request = propose(fake_kind, proposer, "v1")
    with pytest.raises(Http404):
        selectors.promotion_for_user(outsider, request.pk)
    with pytest.raises(Http404):
        selectors.queue_for(outsider)


def test_the_queue_shows_my_pending_items_first(fake_kind, proposer, reviewer, second_reviewer):
    mine_to_judge = propose(fake_kind, second_reviewer, "a", parent="pa")
    judged = propose(fake_kind, proposer, "b", parent="pb")
    services.judgment_submit(actor=act(reviewer), request=judged, verdict="approve")
    waiting = propose(fake_kind, proposer, "c", parent="pc")
    rows = selectors.queue_for(reviewer)
    assert [r.pk for r in rows] == [mine_to_judge.pk, waiting.pk, judged.pk]
    assert [r.pending_for_me for r in rows] == [True, True, False]
    assert selectors.queue_for(reviewer, kind="other") == []


def test_the_queue_leases_an_item_to_one_reviewer_until_the_lease_expires(
    fake_kind, proposer, reviewer, second_reviewer
):
    first = propose(fake_kind, proposer, "a", parent="pa")
    second = propose(fake_kind, proposer, "b", parent="pb")
    assert services.queue_next(actor=act(reviewer)) == first
    assert services.queue_next(actor=act(reviewer)) == first  # still mine
    assert services.queue_next(actor=act(second_reviewer)) == second
    assert services.queue_next(actor=act(second_reviewer)) == second
    QueueLease.objects.filter(request=first).update(expires_at=timezone.now() - timedelta(seconds=1))
    services.judgment_submit(actor=act(second_reviewer), request=second, verdict="approve")  # releases its lease
    assert services.queue_next(actor=act(second_reviewer)) == first  # the expired lease returned to the queue


def test_the_queue_skips_my_own_proposals_and_what_i_judged(fake_kind, proposer, reviewer):
    own = propose(fake_kind, reviewer, "a", parent="pa")
    judged = propose(fake_kind, proposer, "b", parent="pb")
    services.judgment_submit(actor=act(reviewer), request=judged, verdict="approve")
    assert own and services.queue_next(actor=act(reviewer)) is None


def test_an_approval_leaves_its_lease_to_run_out_and_the_next_item_is_another(fake_kind, proposer, reviewer):
    """A lease ending at the approval, on a request still open, would tell everyone its holder approved (issue 30)."""
    request = propose(fake_kind, proposer, "a")
    other = propose(fake_kind, proposer, "b", parent="p2")
    assert services.queue_next(actor=act(reviewer)) == request
    held = QueueLease.objects.get(request=request)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    assert QueueLease.objects.get(request=request).expires_at == held.expires_at
    assert services.queue_next(actor=act(reviewer)) == other


def test_a_rejection_closes_the_request_and_drops_its_lease(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer, "a")
    services.queue_next(actor=act(reviewer))
    services.judgment_submit(actor=act(reviewer), request=request, verdict="reject", comment="no")
    assert not QueueLease.objects.exists()


def test_only_reviewers_take_items_from_the_queue(fake_kind, proposer, viewer):
    propose(fake_kind, proposer, "a")
    with pytest.raises(RoleRequired):
        services.queue_next(actor=act(viewer))


def test_history_lists_every_request_of_an_artifact(fake_kind, proposer, reviewer, second_reviewer, viewer):
    first = propose(fake_kind, proposer, "v1")
    services.judgment_submit(actor=act(reviewer), request=first, verdict="reject", comment="no")
    second = propose(fake_kind, proposer, "v2")
    services.judgment_submit(actor=act(reviewer), request=second, verdict="approve", comment="ok")
    rows = selectors.history_for(viewer, kind="fake", parent_key="p1")
    assert [r.pk for r in rows] == [second.pk, first.pk]
    assert rows[0].visible_judgments is None and rows[0].approvals == 1
    assert [j.comment for j in rows[1].visible_judgments] == ["no"]
