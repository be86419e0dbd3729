"""Four eyes between the override and the approvals (issue 30, item 7): the admin who overrode a request's gate is
not one of its judges, and an approver does not override its gate — in the service, the page, the API and under a
race on PostgreSQL."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.roles import Role
from reviews import selectors, services
from reviews.errors import Conflict
from reviews.models import Judgment, PromotionRequest, PromotionStatus
from tests.conftest import logged_in
from tests.factories import user_with
from tests.helpers.concurrency import run_at_once
from tests.helpers.reviews import post, propose

from .conftest import act


@pytest.fixture
def ada(db):
    """An admin (admins hold every role, so she is a reviewer too)."""
    return user_with(Role.ADMIN, username="ada")


@pytest.mark.django_db
def test_the_admin_who_overrode_the_gate_cannot_also_approve(fake_kind, proposer, reviewer, ada):
    request = propose(fake_kind, proposer, passing=False)
    services.promotion_override(actor=act(ada), request=request, reason="measured by hand")
    with pytest.raises(Conflict) as refused:
        services.judgment_submit(actor=act(ada), request=request, verdict="approve")
    assert refused.value.code == "four_eyes" and "overrode the gate" in refused.value.message
    assert not Judgment.objects.filter(reviewer=ada).exists()
    # two other reviewers still apply it
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    services.judgment_submit(actor=act(user_with(Role.REVIEWER, username="rob")), request=request, verdict="approve")
    request.refresh_from_db()
    assert request.status == PromotionStatus.APPLIED


@pytest.mark.django_db
def test_an_approver_cannot_then_override_the_gate(fake_kind, proposer, ada):
    request = propose(fake_kind, proposer, passing=False)
    services.judgment_submit(actor=act(ada), request=request, verdict="approve")
    with pytest.raises(Conflict) as refused:
        services.promotion_override(actor=act(ada), request=request, reason="it is fine")
    assert refused.value.code == "four_eyes" and "approved" in refused.value.message
    request.refresh_from_db()
    assert not request.is_overridden


@pytest.mark.django_db
def test_the_pages_offer_neither_and_answer_a_clear_409(fake_kind, proposer, ada, second_reviewer):
    overridden = propose(fake_kind, proposer, "v1", passing=False)
    services.promotion_override(actor=act(ada), request=overridden, reason="measured by hand")
    client = logged_in(ada)
    page = client.get(reverse("reviews:item", args=[overridden.pk])).content.decode()
    assert "data-approve" not in page and "You overrode the gate of this request" in page
    response = post(client, reverse("reviews:judge", args=[overridden.pk]), {"verdict": "approve"})
    assert response.status_code == 409 and "so you cannot also judge it" in response.content.decode()
    assert not Judgment.objects.exists()
    # the queue does not wait for her judgment, and the next item is never this one
    (row,) = selectors.queue_for(ada)
    assert row.pending_for_me is False and row.counts_visible is True
    assert services.queue_next(actor=act(ada)) is None

    approved = propose(fake_kind, proposer, "v2", parent="p2", passing=False)
    services.judgment_submit(actor=act(ada), request=approved, verdict="approve")
    page = client.get(reverse("reviews:item", args=[approved.pk])).content.decode()
    assert 'id="override"' not in page and "an approver does not (four eyes)" in page
    response = post(client, reverse("reviews:override", args=[approved.pk]), {"reason": "fine"})
    assert response.status_code == 409 and "so you cannot also override its gate" in response.content.decode()
    # another admin who has not judged may
    alan = logged_in(user_with(Role.ADMIN, username="alan"))
    assert 'id="override"' in alan.get(reverse("reviews:item", args=[approved.pk])).content.decode()


@pytest.mark.django_db
def test_the_api_answers_409_four_eyes_with_the_error_body(fake_kind, proposer, ada, make_token, api_client):
    request = propose(fake_kind, proposer, passing=False)
    services.promotion_override(actor=act(ada), request=request, reason="measured by hand")
    response = api_client.post(
        f"/api/v1/promotions/{request.pk}/judgments", {"verdict": "approve"}, token=make_token(ada, "reviews:judge")
    )
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "four_eyes" and "overrode the gate" in body["message"] and "details" in body


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(4))
def test_an_override_and_an_approval_by_one_admin_at_once_let_exactly_one_through(fake_kind, proposer, ada, round_):
    request = propose(fake_kind, proposer, f"v{round_}", parent=f"p{round_}", passing=False)
    results = run_at_once(
        [
            lambda: services.promotion_override(actor=act(ada), request=request, reason="measured by hand"),
            lambda: services.judgment_submit(actor=act(ada), request=request, verdict="approve"),
        ]
    )
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(refused) == 1 and isinstance(refused[0], Conflict) and refused[0].code == "four_eyes", results
    request = PromotionRequest.objects.get(pk=request.pk)
    approved = Judgment.objects.filter(request=request, reviewer=ada).exists()
    assert request.is_overridden != approved  # one or the other, never both
