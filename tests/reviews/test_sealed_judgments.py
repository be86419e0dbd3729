"""A sealed judgment leaves no trace (issue 30, item 7): one rejection closes a request, so anything that tells an
open request holding a judgment from one without any tells that the judgment was an approval, and its time beside
"auth.login rita" names the judge. For a reviewer who may still judge, an open request with a sealed approval and
one with no judgment read the same everywhere: the request page, the queue, the history, the API, the owning apps'
links, the dashboard and the audit page. Once they judge, or the request closes, everything shows."""

from __future__ import annotations

import re

import pytest
from django.db import transaction
from django.urls import reverse

from accounts.blinding import sealed_events
from accounts.roles import Role
from accounts.selectors import AuditFilters, audit_page
from accounts.services import Actor, audit_record
from reviews import selectors, services
from reviews.models import PromotionStatus
from tests.conftest import logged_in
from tests.factories import user_with
from tests.helpers.reviews import propose

from .conftest import act

pytestmark = pytest.mark.django_db

SECRET = "SEKRIT-looks-fine"
# What the API tells of the judgments of a request (everything else names the artifact or the proposal).
JUDGMENT_FIELDS = ("status", "approvals", "rejections", "counts_visible", "outcome", "judgments", "my_verdict")
QUEUE_FIELDS = ("status", "approvals", "rejections", "pending_for_me", "lease_holder")


@pytest.fixture
def pair(fake_kind, proposer, reviewer):
    """Two open requests needing two approvals: `judged` holds rita's approval, `untouched` none."""
    judged = propose(fake_kind, proposer, "v1", parent="p1")
    untouched = propose(fake_kind, proposer, "v2", parent="p2")
    services.judgment_submit(actor=act(reviewer), request=judged, verdict="approve", comment=SECRET)
    return judged, untouched


def log_in_event(username: str) -> None:
    with transaction.atomic():
        audit_record(actor=Actor.system(), verb="auth.login", target=("auth.username", username))


def stable(html: str, pk: int) -> str:
    """`html` without what differs between two renderings of equal content: CSRF tokens, the request's own id."""
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"|"X-CSRFToken": "[^"]*"', "", html)
    return html.replace(f"/{pk}/", "/N/").replace(f"queue-item-{pk}", "queue-item-N")


def outcome_panel(page: str) -> str:
    return page.split('id="outcome"')[1].split("</div>")[0]


def judgments_panel(page: str) -> str:
    return page.split('id="judgments"')[1].split("</section>")[0]


def test_the_api_tells_a_sealed_approval_from_no_judgment_in_nothing(pair, second_reviewer, make_token, api_client):
    judged, untouched = pair
    token = make_token(second_reviewer, "reviews:judge")
    detail = {r.pk: api_client.get(f"/api/v1/promotions/{r.pk}", token=token).json() for r in pair}
    assert {f: detail[judged.pk][f] for f in JUDGMENT_FIELDS} == {f: detail[untouched.pk][f] for f in JUDGMENT_FIELDS}
    items = {item["id"]: item for item in api_client.get("/api/v1/reviews/queue", token=token).json()["items"]}
    assert {f: items[judged.pk][f] for f in QUEUE_FIELDS} == {f: items[untouched.pk][f] for f in QUEUE_FIELDS}


def test_the_pages_tell_a_sealed_approval_from_no_judgment_in_nothing(pair, second_reviewer):
    judged, untouched = pair
    client = logged_in(second_reviewer)
    pages = [client.get(reverse("reviews:item", args=[r.pk])).content.decode() for r in pair]
    assert outcome_panel(pages[0]) == outcome_panel(pages[1])
    assert stable(judgments_panel(pages[0]), judged.pk) == stable(judgments_panel(pages[1]), untouched.pk)
    whole = []  # the whole page, but for the artifact's own names
    for page, request in zip(pages, pair, strict=True):
        whole.append(stable(page, request.pk).replace(request.candidate_id, "vN").replace(request.parent_key, "pN"))
    assert whole[0] == whole[1]
    histories = [client.get(reverse("reviews:history", args=["fake", p])).content.decode() for p in ("p1", "p2")]
    assert "rita" not in histories[0] and SECRET not in histories[0]
    assert histories[0].count("needs 2 approvals") == histories[1].count("needs 2 approvals") == 1


def test_enough_sealed_approvals_read_as_open_to_a_reviewer_who_may_still_judge(
    fake_kind, proposer, reviewer, second_reviewer, third_reviewer, make_token, api_client
):
    request = propose(fake_kind, proposer, "v1", passing=False)  # two approvals, then it waits for an override
    for judge in (reviewer, second_reviewer):
        services.judgment_submit(actor=act(judge), request=request, verdict="approve")
    request.refresh_from_db()
    assert request.status == PromotionStatus.APPROVED
    token = make_token(third_reviewer, "reviews:judge")
    body = api_client.get(f"/api/v1/promotions/{request.pk}", token=token).json()
    assert body["status"] == "open" and body["outcome"] is None and body["approvals"] is None
    (item,) = api_client.get("/api/v1/reviews/queue", token=token).json()["items"]
    assert item["status"] == "open"
    client = logged_in(third_reviewer)
    page = client.get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert "badge-approved" not in page and "Approved" not in page and "Open: needs 2 approvals" in page
    history = client.get(reverse("reviews:history", args=["fake", "p1"])).content.decode()
    assert "badge-approved" not in history and "Approved" not in history
    # the owning apps' pages link the request without knowing their viewer: "open" for every pending request
    assert selectors.pending_requests_for(kind="fake", parent_key="p1")["v1"].status == "open"
    # those who may see counts see the status as it is
    for user in (reviewer, proposer):
        assert "badge-approved" in logged_in(user).get(reverse("reviews:item", args=[request.pk])).content.decode()
    body = api_client.get(f"/api/v1/promotions/{request.pk}", token=make_token(reviewer, "reviews:judge")).json()
    assert body["status"] == "approved" and body["outcome"]["status"] == "approved"


def test_the_dashboard_leaves_a_sealed_judgment_out_and_keeps_its_list_full(
    fake_kind, proposer, reviewer, second_reviewer, django_assert_max_num_queries
):
    for number in range(12):
        with transaction.atomic():
            audit_record(actor=Actor(user=proposer), verb="demo.touch", target=("demo.thing", str(number)))
    request = propose(fake_kind, proposer, "v1")
    log_in_event("rita")
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve", comment=SECRET)
    client = logged_in(second_reviewer)
    client.get("/")  # the closed days' totals, read once per process
    with django_assert_max_num_queries(10):  # the dashboard's 8, the sealer's and the list read again without it
        response = client.get("/")
    events = response.context["recent_events"]
    assert len(events) == 10 and [e.verb for e in events[:2]] == ["auth.login", "promotion.propose"]
    page = response.content.decode()
    assert "judgment.submit" not in page and "a reviewer" not in page and SECRET not in page
    # rita sees her own judgment; once the request closes everyone does
    assert "judgment.submit" in logged_in(reviewer).get("/").content.decode()
    services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
    assert "judgment.submit" in logged_in(user_with(username="vera")).get("/").content.decode()


def test_the_audit_page_leaves_sealed_judgments_out_and_stays_full(pair, reviewer):
    ada = user_with(Role.ADMIN, username="ada")
    filters = AuditFilters(target_type="reviews.promotionrequest")
    page = audit_page(filters, size=2, hide=sealed_events(ada))
    assert [e.verb for e in page.events] == ["promotion.propose", "promotion.propose"] and page.next_cursor is None
    # rita sees hers: the judgment and the two proposals, two to a page
    first = audit_page(filters, size=2, hide=sealed_events(reviewer))
    assert [e.verb for e in first.events] == ["judgment.submit", "promotion.propose"] and first.next_cursor
    html = logged_in(ada).get("/accounts/audit/?verb=judgment.").content.decode()
    assert "<code>judgment.submit</code>" not in html and SECRET not in html


def test_enough_approvals_is_sealed_like_the_approvals(fake_kind, proposer, reviewer, second_reviewer):
    """`promotion.approve` (enough approvals, waiting for the gate) is acted by the last approver."""
    request = propose(fake_kind, proposer, "v1", passing=False)
    for judge in (reviewer, second_reviewer):
        services.judgment_submit(actor=act(judge), request=request, verdict="approve")
    alan = user_with(Role.ADMIN, username="alan")
    html = logged_in(alan).get("/accounts/audit/?target_type=reviews.promotionrequest").content.decode()
    assert "<code>promotion.propose</code>" in html
    assert "<code>promotion.approve</code>" not in html and "<code>judgment.submit</code>" not in html
    html = logged_in(alan).get("/").content.decode()
    assert "promotion.approve" not in html
    services.promotion_override(actor=act(alan), request=request, reason="measured by hand")
    html = logged_in(alan).get("/accounts/audit/?target_type=reviews.promotionrequest").content.decode()
    assert "<code>promotion.approve</code>" in html and "<td>rob</td>" in html  # applied: closed, all shown


def test_a_lease_ends_when_it_runs_out_whatever_its_holder_did(fake_kind, proposer, reviewer, second_reviewer):
    """The approver's lease is not dropped at the approval: a lease ending early on a request still open would say
    its holder approved it."""
    request = propose(fake_kind, proposer, "v1")
    assert services.queue_next(actor=act(reviewer)) == request
    queue = reverse("reviews:queue")

    def row() -> str:
        page = logged_in(second_reviewer).get(queue).content.decode()
        return stable(page.split(f'id="queue-item-{request.pk}"')[1].split("</tr>")[0], request.pk)

    before = row()
    assert "rita until" in before
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    assert row() == before
