"""Issue 11: one identity per revision. Graph revisions are `#seq · digest7` and versions `vN` on every page, form,
message, API answer and audit line of the review workflow; the Propose form lists what can be proposed."""

from dataclasses import replace

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from accounts.models import AuditEvent
from accounts.services import Actor
from graphs import services as graph_services
from graphs.core import Node
from graphs.selectors import graph_of
from reviews import services
from reviews.models import PromotionRequest, PromotionStatus
from tests.conftest import logged_in
from tests.helpers.reviews import post, workspace_with_two_revisions
from tests.promote import promote_graph_revision

from .conftest import act

SYSTEM = Actor.system()
pytestmark = pytest.mark.django_db


def test_revision_and_version_labels():
    _workspace, first, _ = workspace_with_two_revisions()
    assert first.label == f"#1 · {first.digest[:7]}"
    from procedures.models import Procedure
    from tests.procedures.factories import stored_version

    version = stored_version(Procedure.objects.create(intent="refund_request"), "lookup_policy", number=3)
    assert version.label == "v3"


def test_a_request_for_2_while_1_is_active_says_replacing_1_everywhere(proposer, reviewer):
    _, first, second = workspace_with_two_revisions()
    client = logged_in(proposer)
    response = post(
        client, reverse("reviews:propose"), {"candidate": f"graph_revision:{second.pk}", "rationale": "a check step"}
    )
    assert response.status_code == 302
    request = PromotionRequest.objects.get(status=PromotionStatus.OPEN)
    message = [str(m) for m in get_messages(response.wsgi_request)][-1]
    assert f"replacing {first.label}" in message and f"ws graph {second.label}" in message

    page = logged_in(reviewer).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert second.label in page and first.label in page
    assert f'replacing <strong class="label">{first.label}</strong>' in page
    queue = logged_in(reviewer).get(reverse("reviews:queue")).content.decode()
    assert f"<td>{first.label}</td>" in queue
    assert f"<td>{first.pk}</td>" not in queue

    history = logged_in(reviewer).get(reverse("reviews:history", args=["graph_revision", "ws"])).content.decode()
    assert f'active now: <strong class="label">{first.label}</strong>' in history


def test_history_offers_the_rollback_to_the_revision_it_restores(proposer, admin_user):
    _, first, second = workspace_with_two_revisions()
    promote_graph_revision(second)
    page = logged_in(admin_user).get(reverse("reviews:history", args=["graph_revision", "ws"])).content.decode()
    assert f"Propose a rollback to {first.label}" in page
    assert f'name="candidate_id" value="{first.pk}"' in page
    response = post(
        logged_in(admin_user),
        reverse("reviews:rollback"),
        {"kind": "graph_revision", "parent_key": "ws", "reason": "the check step loops"},
    )
    assert response.status_code == 302
    message = [str(m) for m in get_messages(response.wsgi_request)][-1]
    assert message.startswith(f"Rolled back: {first.label}") and f"replacing {second.label}" in message


def test_the_propose_form_lists_the_candidates_with_labels_and_gate_state(proposer):
    _, first, second = workspace_with_two_revisions()
    page = logged_in(proposer).get(reverse("reviews:propose")).content.decode()
    assert 'name="candidate_id"' not in page and 'type="text"' not in page  # nothing typed
    assert f'value="graph_revision:{second.pk}"' in page
    option = page.split(f'value="graph_revision:{second.pk}"', 1)[1].split("</option>", 1)[0]
    assert second.label in option and "gate" in option
    assert f'value="graph_revision:{first.pk}"' not in page  # the active revision is not offered


def test_proposing_from_the_list_proposes_exactly_that_candidate(proposer):
    _workspace, first, second = workspace_with_two_revisions()
    response = post(
        logged_in(proposer),
        reverse("reviews:propose"),
        {"candidate": f"graph_revision:{second.pk}", "rationale": "go"},
    )
    assert response.status_code == 302
    request = PromotionRequest.objects.get(status=PromotionStatus.OPEN)
    assert request.candidate_id == str(second.pk) and request.replaces_id == str(first.pk)
    # now listed as already proposed, not pickable
    page = logged_in(proposer).get(reverse("reviews:propose")).content.decode()
    option = page.split(f'value="graph_revision:{second.pk}"', 1)[1].split(">", 1)[0]
    assert "disabled" in option


@pytest.mark.parametrize(
    ("data", "status", "text"),
    [
        ({"rationale": "go"}, 422, "choose a candidate"),
        ({"candidate": "graph_revision:999999999", "rationale": "go"}, 404, "no graph revision"),
        ({"candidate": "nothing:1", "rationale": "go"}, 422, "no promotable kind"),
        ({"candidate": "graph_revision:abc", "rationale": "go"}, 404, "no graph revision"),
    ],
)
def test_a_bad_pick_is_refused_with_a_message_and_writes_nothing(proposer, data, status, text):
    workspace_with_two_revisions()
    before = PromotionRequest.objects.count()
    response = post(logged_in(proposer), reverse("reviews:propose"), data)
    assert response.status_code == status and text in response.content.decode()
    assert PromotionRequest.objects.count() == before


def test_api_answers_carry_labels_beside_ids(proposer, reviewer, make_token, api_client):
    _, first, second = workspace_with_two_revisions()
    token = make_token(proposer, "reviews:judge")
    response = api_client.post(
        "/api/v1/promotions",
        {"kind": "graph_revision", "candidate_id": str(second.pk), "rationale": "go"},
        token=token,
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["candidate_id"] == str(second.pk) and body["candidate_label"] == second.label
    assert body["replaces_id"] == str(first.pk) and body["replaces_label"] == first.label
    queue = api_client.get("/api/v1/reviews/queue", token=make_token(reviewer, "reviews:judge")).json()
    (item,) = queue["items"]
    assert (item["candidate_label"], item["replaces_label"]) == (second.label, first.label)


def test_audit_events_name_the_labels(
    proposer, reviewer, second_reviewer, admin_user, django_capture_on_commit_callbacks
):
    _, first, second = workspace_with_two_revisions()
    request = services.promotion_propose(
        actor=act(proposer), kind="graph_revision", candidate_id=str(second.pk), rationale="go"
    )
    event = AuditEvent.objects.filter(verb="promotion.propose").latest("id")
    assert event.after["candidate_label"] == second.label and event.after["replaces_label"] == first.label
    request = services.promotion_override(actor=act(admin_user), request=request, reason="hand-written graph")
    with django_capture_on_commit_callbacks(execute=True):
        for judge in (reviewer, second_reviewer):
            request = services.judgment_submit(actor=act(judge), request=request, verdict="approve")
    assert request.status == PromotionStatus.APPLIED
    moved = AuditEvent.objects.filter(verb="workspace.set_active_revision").latest("id")
    assert moved.after["label"] == second.label
    applied = AuditEvent.objects.filter(verb="promotion.apply").latest("id")
    assert applied.after["label"] == second.label and applied.before["label"] == first.label


def test_a_stale_request_names_the_labels_in_its_message(proposer, reviewer):
    workspace, first, second = workspace_with_two_revisions()
    request = services.promotion_propose(
        actor=act(proposer), kind="graph_revision", candidate_id=str(second.pk), rationale="go"
    )
    graph = graph_of(second)
    third = graph_services.graph_append_accepted(
        actor=SYSTEM,
        workspace=workspace,
        graph=replace(graph, nodes={**graph.nodes, "audit": Node("audit", "REASONING", "Audit")}),
        expected_head=second.digest,
        meta={},
    )
    promote_graph_revision(third, on_commit=False)  # our request stays open but stale
    response = post(logged_in(reviewer), reverse("reviews:judge", args=[request.pk]), {"verdict": "approve"})
    assert response.status_code == 409
    text = response.content.decode()
    assert f"it replaces {first.label}" in text and f"the active version is {third.label}" in text
