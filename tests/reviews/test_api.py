"""/api/v1/reviews/queue and /api/v1/promotions: the same policy and errors as the services, for reviewer tokens."""

import pytest

from accounts.services import Actor, user_roles_set
from reviews import services
from reviews.models import Judgment, PromotionRequest, PromotionStatus

from .conftest import act

pytestmark = pytest.mark.django_db

PROMOTIONS = "/api/v1/promotions"
QUEUE = "/api/v1/reviews/queue"


def assert_error(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code is not None:
        assert body["code"] == code


@pytest.fixture
def tokens(make_token, proposer, reviewer, second_reviewer, viewer):
    return {
        "proposer": make_token(proposer, "reviews:judge"),
        "rita": make_token(reviewer, "reviews:judge"),
        "rob": make_token(second_reviewer, "reviews:judge"),
        "viewer": make_token(viewer, "graphs:read"),
    }


def propose(api_client, token, candidate="v1", **extra):
    return api_client.post(
        PROMOTIONS, {"kind": "fake", "candidate_id": candidate, "rationale": "go", **extra}, token=token
    )


def test_a_reviewer_proposes_and_two_others_approve_over_the_api(fake_kind, api_client, tokens):
    fake_kind.add("v1")
    response = propose(api_client, tokens["proposer"])
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "open" and body["replaces_id"] is None and body["gate"]["passing"] is True
    url = f"{PROMOTIONS}/{body['id']}/judgments"
    first = api_client.post(url, {"verdict": "approve", "comment": "fine"}, token=tokens["rita"])
    assert first.status_code == 201 and first.json()["status"] == "open"
    second = api_client.post(url, {"verdict": "approve"}, token=tokens["rob"])
    assert second.status_code == 201
    assert second.json()["status"] == "applied"
    assert [j["reviewer"] for j in second.json()["judgments"]] == ["rita", "rob"]
    assert fake_kind.current_active("p1") == "v1"


def test_the_proposer_cannot_approve_over_the_api(fake_kind, api_client, tokens):
    fake_kind.add("v1")
    promotion = propose(api_client, tokens["proposer"]).json()
    response = api_client.post(
        f"{PROMOTIONS}/{promotion['id']}/judgments", {"verdict": "approve"}, token=tokens["proposer"]
    )
    assert_error(response, 403, "proposer_cannot_judge")
    assert not Judgment.objects.exists()


def test_a_rejection_without_a_reason_answers_422(fake_kind, api_client, tokens):
    fake_kind.add("v1")
    promotion = propose(api_client, tokens["proposer"]).json()
    response = api_client.post(f"{PROMOTIONS}/{promotion['id']}/judgments", {"verdict": "reject"}, token=tokens["rita"])
    assert_error(response, 422, "reason_required")
    assert not Judgment.objects.exists()


def test_bad_input_answers_422_and_writes_nothing(fake_kind, api_client, tokens):
    fake_kind.add("v1")
    assert_error(api_client.post(PROMOTIONS, {"kind": "fake"}, token=tokens["rita"]), 422, "invalid")
    assert_error(propose(api_client, tokens["rita"], extra_field=1), 422, "invalid")
    assert_error(propose(api_client, tokens["rita"], "v1", is_rollback="yes"), 422)
    assert_error(propose(api_client, tokens["rita"], "nope"), 404, "unknown_candidate")
    assert_error(api_client.post(PROMOTIONS, raw="{not json", token=tokens["rita"]), 400)
    assert not PromotionRequest.objects.exists()


def test_a_non_reviewer_gets_403_and_an_outsider_401(fake_kind, api_client, tokens, reviewer, outsider, make_token):
    fake_kind.add("v1")
    promotion = propose(api_client, tokens["proposer"]).json()
    assert_error(api_client.get(QUEUE, token=tokens["viewer"]), 403, "missing_scope")
    assert_error(api_client.get(f"{PROMOTIONS}/{promotion['id']}", token=tokens["viewer"]), 403)
    assert_error(propose(api_client, tokens["viewer"], "v1"), 403)
    user_roles_set(actor=Actor.system(), user=reviewer, roles=[])  # rita loses the reviewer role
    response = api_client.post(
        f"{PROMOTIONS}/{promotion['id']}/judgments", {"verdict": "approve"}, token=tokens["rita"]
    )
    assert_error(response, 403)
    assert_error(api_client.get(QUEUE), 401, "unauthorized")
    reviewer.is_active = False
    reviewer.save(update_fields=["is_active"])
    assert_error(api_client.get(QUEUE, token=tokens["rita"]), 401)
    assert not Judgment.objects.exists()


def test_an_unknown_promotion_answers_404(fake_kind, api_client, tokens):
    assert_error(api_client.get(f"{PROMOTIONS}/999999", token=tokens["rita"]), 404, "not_found")
    assert_error(api_client.post(f"{PROMOTIONS}/999999/judgments", {"verdict": "approve"}, token=tokens["rita"]), 404)


def test_others_judgments_are_hidden_until_my_own(fake_kind, api_client, tokens):
    fake_kind.add("v1")
    promotion = propose(api_client, tokens["proposer"]).json()
    api_client.post(
        f"{PROMOTIONS}/{promotion['id']}/judgments", {"verdict": "approve", "comment": "ok"}, token=tokens["rita"]
    )
    seen_by_rob = api_client.get(f"{PROMOTIONS}/{promotion['id']}", token=tokens["rob"]).json()
    # rob may still judge: not even the counts are shown to him (issue 11)
    assert seen_by_rob["judgments"] is None and seen_by_rob["approvals"] is None and not seen_by_rob["counts_visible"]
    seen_by_proposer = api_client.get(f"{PROMOTIONS}/{promotion['id']}", token=tokens["proposer"]).json()
    assert seen_by_proposer["judgments"] is None and seen_by_proposer["approvals"] == 1
    seen_by_rita = api_client.get(f"{PROMOTIONS}/{promotion['id']}", token=tokens["rita"]).json()
    assert seen_by_rita["judgments"][0]["comment"] == "ok" and seen_by_rita["my_verdict"] == "approve"


def test_a_stale_request_answers_409_and_becomes_superseded(fake_kind, api_client, tokens):
    fake_kind.add("v0")
    fake_kind.seed_active("v0")
    fake_kind.add("v1")
    promotion = propose(api_client, tokens["proposer"]).json()
    fake_kind.add("v2")
    fake_kind.seed_active("v2")
    response = api_client.post(
        f"{PROMOTIONS}/{promotion['id']}/judgments", {"verdict": "approve"}, token=tokens["rita"]
    )
    assert_error(response, 409, "stale")
    assert response.json()["details"]["active"] == "v2"
    assert PromotionRequest.objects.get().status == PromotionStatus.SUPERSEDED
    again = api_client.post(f"{PROMOTIONS}/{promotion['id']}/judgments", {"verdict": "approve"}, token=tokens["rob"])
    assert_error(again, 409, "not_open")


def test_a_second_open_request_for_a_candidate_answers_409(fake_kind, api_client, tokens):
    fake_kind.add("v1")
    propose(api_client, tokens["proposer"])
    assert_error(propose(api_client, tokens["rita"]), 409, "already_open")


@pytest.mark.parametrize("size", [2, 12])
def test_the_queue_lists_my_pending_items_first_in_few_queries(
    fake_kind, api_client, tokens, proposer, reviewer, size, django_assert_max_num_queries
):
    for n in range(size):
        fake_kind.add(f"c{n}", parent=f"p{n}")
        request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id=f"c{n}", rationale="go")
        if n % 2:
            services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    services.queue_next(actor=act(reviewer))
    with django_assert_max_num_queries(8):
        response = api_client.get(QUEUE, token=tokens["rita"])
    items = response.json()["items"]
    assert len(items) == size
    flags = [item["pending_for_me"] for item in items]
    assert flags == sorted(flags, reverse=True)
    assert items[0]["lease_holder"] == "rita"
    assert api_client.get(QUEUE + "?kind=other", token=tokens["rita"]).json()["items"] == []


@pytest.mark.parametrize("judges", [0, 2])
def test_a_promotion_is_read_in_few_queries(
    fake_kind, api_client, tokens, proposer, reviewer, second_reviewer, judges, django_assert_max_num_queries
):
    fake_kind.add("v1", passing=False)
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="go")
    for judge in [reviewer, second_reviewer][:judges]:
        services.judgment_submit(actor=act(judge), request=request, verdict="approve")
    with django_assert_max_num_queries(8):
        response = api_client.get(f"{PROMOTIONS}/{request.pk}", token=tokens["rita"])
    assert response.status_code == 200
    assert response.json()["status"] == ("approved" if judges == 2 else "open")


@pytest.mark.parametrize("kind", ["procedure_version", "graph_revision"])
@pytest.mark.parametrize("candidate", ["²", "１２", "99999999999999999999999", "-1", ""])
def test_a_candidate_id_that_is_no_stored_id_answers_404_or_422_never_500(api_client, tokens, kind, candidate):
    response = api_client.post(
        PROMOTIONS, {"kind": kind, "candidate_id": candidate, "rationale": "go"}, token=tokens["rita"]
    )
    assert response.status_code in (404, 422), response.content
    assert not PromotionRequest.objects.exists()
