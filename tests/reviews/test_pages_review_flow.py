"""The review pages without a browser (issue 24): the queue's Approve leads to the item, the item approves with a
plain form under the evidence, a verdict leads to the next item waiting, "take the next item" names the item another
reviewer holds, and the rubric request page says what it still needs, offers the admin the override (four eyes) and
shows the agreement to check. Query counts are bounded on each page."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import time_format

from accounts.roles import Role
from reviews import services
from reviews.models import Judgment, PromotionStatus, QueueLease
from rubrics import selectors as rubric_selectors
from tests.conftest import logged_in
from tests.factories import user_with
from tests.helpers.reviews import post, propose
from tests.helpers.rubrics import committed, make_run, make_version  # noqa: F401 (committed: a fixture)

from .conftest import act

pytestmark = pytest.mark.django_db


def said(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


# --- the queue and the item page --------------------------------------------------------------------------------------
def test_the_queues_approve_opens_the_item_and_judges_nothing_itself(
    fake_kind, proposer, reviewer, django_assert_max_num_queries
):
    request = propose(fake_kind, proposer)
    client = logged_in(reviewer)
    with django_assert_max_num_queries(10):
        page = client.get(reverse("reviews:queue")).content.decode()
    item = reverse("reviews:item", args=[request.pk])
    assert re.search(rf'<a class="btn" data-approve href="{item}#approve"', page)
    assert reverse("reviews:judge", args=[request.pk]) not in page  # no form on the queue posts a verdict


def test_without_javascript_the_item_approves_with_a_plain_form_under_the_evidence(fake_kind, proposer, reviewer):
    request = propose(fake_kind, proposer)
    client = logged_in(reviewer)
    page = client.get(reverse("reviews:item", args=[request.pk])).content.decode()
    form = page.index(f'action="{reverse("reviews:judge", args=[request.pk])}"')
    assert page.index("Gate evidence") < page.index("What changes") < form
    assert 'id="approve" data-confirm-dialog="approve"' in page
    response = post(client, reverse("reviews:judge", args=[request.pk]), {"verdict": "approve", "comment": "fine"})
    assert response.status_code == 302
    assert Judgment.objects.get().comment == "fine"


def test_a_verdict_leads_to_the_next_item_waiting_then_says_none_is_left(
    fake_kind, proposer, reviewer, django_assert_max_num_queries
):
    first = propose(fake_kind, proposer, "v1", parent="p1")
    second = propose(fake_kind, proposer, "v2", parent="p2")
    client = logged_in(reviewer)
    client.get(reverse("reviews:queue"))
    token = client.cookies["csrftoken"].value
    with django_assert_max_num_queries(24):
        response = client.post(
            reverse("reviews:judge", args=[first.pk]), {"verdict": "approve", "csrfmiddlewaretoken": token}
        )
    assert response["Location"] == reverse("reviews:item", args=[second.pk])
    assert said(response) == ["Approved fake v1. Next: fake v2, waiting for your judgment."]
    response = post(client, reverse("reviews:judge", args=[second.pk]), {"verdict": "reject", "comment": "no"})
    assert response["Location"] == reverse("reviews:item", args=[second.pk])
    assert said(response) == [
        "Rejected fake v2: a rejection closes the request. Nothing else is waiting for your judgment."
    ]


def test_take_the_next_item_names_the_item_another_reviewer_holds_and_until_when(
    fake_kind, proposer, reviewer, second_reviewer, django_assert_max_num_queries
):
    request = propose(fake_kind, proposer)
    assert services.queue_next(actor=act(reviewer)) == request  # rita holds it now
    until = time_format(timezone.localtime(QueueLease.objects.get().expires_at), "H:i")
    client = logged_in(second_reviewer)
    client.get(reverse("reviews:queue"))
    token = client.cookies["csrftoken"].value
    with django_assert_max_num_queries(6):
        response = client.post(reverse("reviews:next"), {"csrfmiddlewaretoken": token})
    assert response["Location"] == reverse("reviews:queue")
    assert said(response) == [
        "Nothing is free for you now: 1 item waits for your judgment, but another reviewer holds it: "
        f"“fake v1” by rita until {until}."
    ]
    # rita herself, and a request rob proposed, are not "held by another" for them
    assert services.queue_next(actor=act(reviewer)) == request
    response = post(logged_in(proposer), reverse("reviews:next"))
    assert said(response) == ["Nothing is waiting for your judgment."]


# --- the rubric request page ------------------------------------------------------------------------------------------
@pytest.fixture
def ada(db):
    """An admin (admins hold every role, so she is a reviewer too)."""
    return user_with(Role.ADMIN, username="ada")


def rubric_request(operator, committed):  # noqa: F811
    """A rubric version proposed for activation, two model judges having scored a run under it."""
    from rubrics import services as rubric_services

    version = make_version(operator, committed)
    committed(
        rubric_services.rubric_judge_start, actor=act(operator), run_id=make_run(), version_id=version.pk, judges=2
    )
    request = services.promotion_propose(
        actor=act(operator), kind="rubric_version", candidate_id=str(version.pk), rationale="see agreement"
    )
    return version, request


def item_page(user, request) -> str:
    response = logged_in(user).get(reverse("reviews:item", args=[request.pk]))
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def test_an_approved_rubric_request_says_it_has_its_approvals_and_waits_for_the_override(
    operator,
    reviewer,
    second_reviewer,
    committed,  # noqa: F811
):
    _, request = rubric_request(operator, committed)
    for judge in (reviewer, second_reviewer):
        request = services.judgment_submit(actor=act(judge), request=request, verdict="approve")
    assert request.status == PromotionStatus.APPROVED
    page = item_page(operator, request)  # the proposer sees counts
    assert '<span class="badge badge-approved">approved</span>' in page
    assert (
        "It has its 2 approvals and waits for an admin's override with a written reason, as it has no measured gate."
        in page
    )
    assert "needs 2 approvals" not in page


def test_the_rubric_request_page_offers_the_admin_the_override_and_judging_only_instead(
    operator,
    ada,
    committed,  # noqa: F811
    django_assert_max_num_queries,
):
    _, request = rubric_request(operator, committed)
    client = logged_in(ada)
    with django_assert_max_num_queries(12):
        page = html.unescape(client.get(reverse("reviews:item", args=[request.pk])).content.decode())
    assert "Open: needs 2 approvals from reviewers other than the proposer, and an admin's override" in page
    note = page.index("data-four-eyes")
    assert "As an admin you may override this request's gate (below) or judge it, not both" in page
    assert note < page.index("<summary>Judge it instead</summary>") < page.index('id="approve"')
    assert 'data-confirm-dialog="override"' in page and "data-confirm=" not in page  # no bare browser confirm
    services.promotion_override(actor=act(ada), request=request, reason="agreement checked")
    page = item_page(ada, request)
    assert "data-approve" not in page and 'id="reject"' not in page
    assert "You overrode the gate of this request, so you cannot judge it" in page


def test_the_rubric_request_page_shows_the_agreement_to_check(operator, viewer, committed):  # noqa: F811
    version, request = rubric_request(operator, committed)
    report = rubric_selectors.agreement_for(viewer, version.rubric, version)  # (a rater sees it over their own runs)
    page = item_page(viewer, request)
    panel = page[page.index('id="agreement"') : page.index('id="changes"')]
    assert "Agreement between raters" in panel
    agreement_url = reverse("rubrics:agreement", args=[version.rubric_id]) + f"?version={version.pk}"
    assert f'href="{agreement_url}"' in panel
    assert report.dimensions
    for dim in report.dimensions:
        shown = f"{dim.alpha:.3f}" if dim.alpha is not None else dim.note
        muted = r'(?:<span class="muted">)?'  # a dimension without an alpha shows its note, muted
        assert re.search(rf"<code>{dim.dimension_id}</code></th>\s*<td class=\"num\">{muted}{re.escape(shown)}", panel)
    assert 'id="review-confirm"' not in page  # the viewer has nothing to confirm
