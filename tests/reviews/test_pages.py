"""Review pages, tried by the owner (reviewers, admin), a read-only viewer and an outsider."""

import pytest
from django.urls import reverse

from reviews import services, webhooks
from reviews.models import Judgment, PromotionRequest, PromotionStatus, WebhookEndpoint
from tests.conftest import logged_in
from tests.helpers.reviews import post, propose

from .conftest import act

pytestmark = pytest.mark.django_db


def test_the_queue_shows_an_approve_button_to_reviewers_but_not_to_the_proposer_or_a_viewer(
    fake_kind, proposer, reviewer, viewer
):
    request = propose(fake_kind, proposer)
    approve_url = reverse("reviews:item", args=[request.pk]) + "#approve"  # the item, to confirm with the evidence
    page = logged_in(reviewer).get(reverse("reviews:queue"))
    assert page.status_code == 200 and approve_url in page.content.decode()
    assert "data-approve" in page.content.decode()
    for user in (proposer, viewer):
        page = logged_in(user).get(reverse("reviews:queue"))
        assert page.status_code == 200
        assert request.title in page.content.decode()
        assert "data-approve" not in page.content.decode()


def test_outsiders_are_sent_to_the_login_page(fake_kind, proposer, outsider):
    request = propose(fake_kind, proposer)
    for url in (reverse("reviews:queue"), reverse("reviews:item", args=[request.pk])):
        assert logged_in(outsider).get(url).status_code == 302
    response = post(logged_in(outsider), reverse("reviews:judge", args=[request.pk]), {"verdict": "approve"})
    assert response.status_code in (302, 403)
    assert not Judgment.objects.exists()


@pytest.mark.parametrize("size", [2, 10])
def test_the_queue_page_runs_a_bounded_number_of_queries(
    fake_kind, proposer, reviewer, size, django_assert_max_num_queries
):
    for n in range(size):
        propose(fake_kind, proposer, f"c{n}", parent=f"p{n}")
    client = logged_in(reviewer)
    with django_assert_max_num_queries(10):
        assert client.get(reverse("reviews:queue")).status_code == 200


def test_the_kind_filter_narrows_the_queue(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    page = logged_in(reviewer).get(reverse("reviews:queue") + "?kind=other").content.decode()
    assert request.title not in page.split("Recently closed")[0]


def test_approving_from_the_queue_returns_to_the_queue(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    queue = reverse("reviews:queue")
    response = post(
        logged_in(reviewer), reverse("reviews:judge", args=[request.pk]), {"verdict": "approve", "next": queue}
    )
    assert response.status_code == 302 and response["Location"] == queue
    assert Judgment.objects.get().reviewer == reviewer


def test_the_item_page_hides_others_judgments_until_my_own(fake_kind, proposer, reviewer, second_reviewer):
    request = propose(fake_kind, proposer, passing=False)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve", comment="secret note")
    page = logged_in(second_reviewer).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert "secret note" not in page and "1/2 approvals" not in page and "needs 2 approvals" in page
    assert "gate fails" in page and "Active" in page  # gate evidence and the kind's diff
    page = logged_in(reviewer).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert "secret note" in page
    page = logged_in(proposer).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert "secret note" not in page and "data-approve" not in page and "cannot judge" in page


@pytest.mark.parametrize("judges", [0, 2])
def test_the_item_page_runs_a_bounded_number_of_queries(
    fake_kind, proposer, reviewer, second_reviewer, admin_user, judges, django_assert_max_num_queries
):
    request = propose(fake_kind, proposer, passing=False)
    for judge in [reviewer, second_reviewer][:judges]:
        services.judgment_submit(actor=act(judge), request=request, verdict="approve")
    client = logged_in(admin_user)
    with django_assert_max_num_queries(10):
        assert client.get(reverse("reviews:item", args=[request.pk])).status_code == 200


def test_a_rejection_without_a_reason_re_renders_the_page_with_the_message(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    response = post(logged_in(reviewer), reverse("reviews:judge", args=[request.pk]), {"verdict": "reject"})
    assert response.status_code == 422
    assert "reason" in response.content.decode()
    assert not Judgment.objects.exists()


def test_a_viewer_cannot_judge_and_the_proposer_cannot_approve(fake_kind, proposer, viewer):
    request = propose(fake_kind, proposer)
    url = reverse("reviews:judge", args=[request.pk])
    assert post(logged_in(viewer), url, {"verdict": "approve"}).status_code == 403
    assert post(logged_in(proposer), url, {"verdict": "approve"}).status_code == 403
    assert not Judgment.objects.exists()


def test_a_stale_request_answers_409_and_offers_to_propose_again(fake_kind, proposer, reviewer):
    fake_kind.add("v0")
    fake_kind.seed_active("v0")
    request = propose(fake_kind, proposer)
    fake_kind.add("v2")
    fake_kind.seed_active("v2")
    response = post(logged_in(reviewer), reverse("reviews:judge", args=[request.pk]), {"verdict": "approve"})
    assert response.status_code == 409
    assert "Propose again" in response.content.decode()
    request.refresh_from_db()
    assert request.status == PromotionStatus.SUPERSEDED
    again = post(
        logged_in(proposer), reverse("reviews:propose"), {"kind": "fake", "candidate_id": "v1", "rationale": "again"}
    )
    assert again.status_code == 302
    assert PromotionRequest.objects.get(status=PromotionStatus.OPEN).replaces_id == "v2"


def test_an_override_needs_an_admin_and_a_reason_and_is_shown(fake_kind, proposer, reviewer, admin_user):
    request = propose(fake_kind, proposer, passing=None)
    url = reverse("reviews:override", args=[request.pk])
    assert post(logged_in(reviewer), url, {"reason": "trust me"}).status_code == 403
    assert post(logged_in(admin_user), url, {"reason": ""}).status_code == 422
    assert post(logged_in(admin_user), url, {"reason": "hand-seeded graph"}).status_code == 302
    page = logged_in(reviewer).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert "Gate overridden by" in page and "hand-seeded graph" in page


def test_proposing_from_the_page(fake_kind, proposer, viewer):
    fake_kind.add("v1")
    assert logged_in(viewer).get(reverse("reviews:propose")).status_code == 403
    assert (
        post(logged_in(viewer), reverse("reviews:propose"), {"kind": "fake", "candidate_id": "v1"}).status_code == 403
    )
    assert logged_in(proposer).get(reverse("reviews:propose") + "?kind=fake&candidate_id=v1").status_code == 200
    bad = post(logged_in(proposer), reverse("reviews:propose"), {"kind": "fake", "candidate_id": "v1", "rationale": ""})
    assert bad.status_code == 422
    assert not PromotionRequest.objects.exists()


def test_take_next_leases_an_item_and_opens_it(fake_kind, proposer, reviewer, viewer):
    request = propose(fake_kind, proposer)
    response = post(logged_in(reviewer), reverse("reviews:next"))
    assert response.status_code == 302 and response["Location"] == reverse("reviews:item", args=[request.pk])
    assert post(logged_in(viewer), reverse("reviews:next")).status_code == 403


def test_the_history_page_lists_requests_and_offers_rollbacks(fake_kind, proposer, reviewer, admin_user, viewer):
    fake_kind.add("v0")
    fake_kind.seed_active("v0")  # the first version, active without a review: nothing to roll back to yet
    fake_kind.add("v1")
    applied = propose(fake_kind, proposer, "v1")
    for judge in (reviewer, admin_user):
        services.judgment_submit(actor=act(judge), request=applied, verdict="approve")
    propose(fake_kind, proposer, "v2")
    url = reverse("reviews:history", args=["fake", "p1"])
    page = logged_in(viewer).get(url).content.decode()
    assert "fake v2" in page and "Roll back now" not in page
    page = logged_in(admin_user).get(url).content.decode()
    assert "Roll back now" in page and "Propose a rollback to v0" in page
    assert (
        logged_in(viewer)
        .post(reverse("reviews:rollback"), {"kind": "fake", "parent_key": "p1", "reason": "x"})
        .status_code
        == 403
    )
    response = post(
        logged_in(admin_user), reverse("reviews:rollback"), {"kind": "fake", "parent_key": "p1", "reason": "loops"}
    )
    assert response.status_code == 302
    assert fake_kind.current_active("p1") == "v0"


def test_webhook_pages_are_for_admins(admin_user, reviewer, viewer):
    for user in (reviewer, viewer):
        assert logged_in(user).get(reverse("reviews:webhooks")).status_code == 403
        assert logged_in(user).get(reverse("reviews:deliveries")).status_code == 403
    client = logged_in(admin_user)
    bad = post(client, reverse("reviews:webhooks"), {"url": "not a url", "events": ["promotion.activated"]})
    assert bad.status_code == 422 and not WebhookEndpoint.objects.exists()
    page = post(
        client, reverse("reviews:webhooks"), {"url": "https://hooks.example.test/w", "events": ["promotion.activated"]}
    )
    assert page.status_code == 200
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret in page.content.decode()
    assert endpoint.secret not in client.get(reverse("reviews:webhooks")).content.decode()
    post(client, reverse("reviews:webhook_toggle", args=[endpoint.pk]), {"active": "0"})
    endpoint.refresh_from_db()
    assert endpoint.active is False
    assert client.get(reverse("reviews:deliveries")).status_code == 200


@pytest.mark.parametrize("size", [2, 8])
def test_the_history_page_runs_a_bounded_number_of_queries(
    fake_kind, proposer, reviewer, viewer, size, django_assert_max_num_queries
):
    for n in range(size):
        request = propose(fake_kind, proposer, f"c{n}")
        services.judgment_submit(actor=act(reviewer), request=request, verdict="reject", comment=f"no {n}")
    client = logged_in(viewer)
    with django_assert_max_num_queries(10):
        page = client.get(reverse("reviews:history", args=["fake", "p1"]))
    assert page.status_code == 200 and f"no {size - 1}" in page.content.decode()


@pytest.mark.parametrize("size", [1, 6])
def test_the_delivery_log_runs_a_bounded_number_of_queries(admin_user, size, django_assert_max_num_queries):
    from reviews.models import WebhookAttempt, WebhookDelivery

    endpoint, _ = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url="https://hooks.example.test/w", events=["promotion.activated"]
    )
    for n in range(size):
        delivery = WebhookDelivery.objects.create(endpoint=endpoint, event="promotion.activated", payload={"n": n})
        WebhookAttempt.objects.create(delivery=delivery, number=1, status_code=500, error="HTTP 500")
    client = logged_in(admin_user)
    with django_assert_max_num_queries(8):
        page = client.get(reverse("reviews:deliveries"))
    assert page.content.decode().count("HTTP 500") >= size


def test_an_htmx_filter_request_gets_the_items_fragment_only(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    response = logged_in(reviewer).get(reverse("reviews:queue") + "?kind=fake", headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200 and 'id="queue-items"' in body and request.title in body
    assert "<html" not in body and "Take the next item" not in body


def test_an_unknown_or_out_of_range_item_is_404(reviewer):
    for pk in (424242, 10**24):
        assert logged_in(reviewer).get(f"/reviews/{pk}/").status_code == 404
