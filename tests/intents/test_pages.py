"""Intent pages with the three actors: operators start and cancel, everyone logged in reads; fixed query counts."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.services import Actor
from intents import services
from intents.models import IntentProposalRun
from tests.conftest import logged_in
from tests.intents.helpers import failed_run, intent_row, reply, stored_runs, use_model

pytestmark = pytest.mark.django_db

LIST = reverse("intents:list")
CANDIDATES = reverse("intents:candidates")


def post(client, url, data=None):
    client.get(LIST)
    return client.post(url, {**(data or {}), "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def finished_run(operator, monkeypatch, *, malformed: bool = False) -> IntentProposalRun:
    (stored,) = stored_runs(1)
    first = "not json at all" if malformed else reply(intent_row(stored, "refund an order"))
    use_model(monkeypatch, first, reply(intent_row(stored, "refund an order")))
    run = services.intent_proposal_start(actor=Actor(user=operator), enqueue=False)
    while (result := services.intent_proposal_step(run_id=run.pk, worker="w")) and result.next_step:
        pass
    run.refresh_from_db()
    return run


def test_anonymous_visitors_are_sent_to_log_in(client):
    for url in (LIST, CANDIDATES, reverse("intents:run", args=[1])):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login" in response["Location"]


def test_the_outsider_cannot_log_in_to_read(outsider):
    client = logged_in(outsider)
    assert client.get(LIST).status_code == 302


def test_an_operator_starts_a_run_from_the_form(operator, settings):
    settings.ANTHROPIC_API_KEY = ""
    stored_runs(3)
    client = logged_in(operator)
    page = client.get(LIST)
    assert page.status_code == 200 and b"Start a proposal run" in page.content and b"stand-in" in page.content
    response = post(client, LIST, {"batch_size": "2", "intent": "", "window_from": "", "window_to": ""})
    run = IntentProposalRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("intents:run", args=[run.pk])
    assert (run.started_by, run.batches_total, run.runs_total) == (operator, 2, 3)


def test_a_refused_start_re_renders_the_form_with_the_reason(operator):
    stored_runs(1)
    client = logged_in(operator)
    response = post(client, LIST, {"batch_size": "5", "failed_only": "on"})
    assert response.status_code == 422 and b"no stored run matches" in response.content
    response = post(client, LIST, {"batch_size": "500"})
    assert response.status_code == 422
    response = post(
        client, LIST, {"batch_size": "5", "window_from": "2026-01-02T00:00", "window_to": "2026-01-01T00:00"}
    )
    assert response.status_code == 422 and b"must end after it starts" in response.content
    assert not IntentProposalRun.objects.exists()


def test_a_reader_sees_the_runs_but_may_not_start_one(viewer, reviewer):
    stored_runs(1)
    for user in (viewer, reviewer):
        client = logged_in(user)
        page = client.get(LIST)
        assert page.status_code == 200 and b"Start a proposal run" not in page.content
        response = post(client, LIST, {"batch_size": "5"})
        assert response.status_code == 403 and b"needs the operator role" in response.content
    assert not IntentProposalRun.objects.exists()


def test_the_list_polls_while_a_run_is_open_and_serves_the_fragment(operator, viewer):
    stored_runs(1)
    services.intent_proposal_start(actor=Actor(user=operator), enqueue=False)
    client = logged_in(viewer)
    page = client.get(LIST)
    assert b'hx-trigger="every 2s"' in page.content
    fragment = client.get(LIST, headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and b"<html" not in fragment.content and b"proposal-" in fragment.content


def test_the_run_page_shows_batches_malformed_replies_and_candidates(operator, viewer, monkeypatch):
    run = finished_run(operator, monkeypatch, malformed=True)
    client = logged_in(viewer)
    page = client.get(reverse("intents:run", args=[run.pk]))
    body = page.content.decode()
    assert page.status_code == 200
    assert "Malformed replies" in body and "not json at all" in body and "must return a JSON object" in body
    assert "refund an order" in body and 'id="batch-1"' in body
    assert "hx-trigger" not in body  # finished: no polling
    assert "Cancel the run" not in body


def test_an_open_run_page_polls_and_operators_may_cancel(operator, viewer):
    stored_runs(1)
    run = services.intent_proposal_start(actor=Actor(user=operator), enqueue=False)
    url = reverse("intents:run", args=[run.pk])
    assert b"Cancel the run" in logged_in(operator).get(url).content
    viewer_page = logged_in(viewer).get(url)
    assert b'hx-trigger="every 2s"' in viewer_page.content and b"Cancel the run" not in viewer_page.content
    fragment = logged_in(viewer).get(url, headers={"HX-Request": "true"})
    assert b'id="run-live"' in fragment.content and b"<html" not in fragment.content
    cancel = reverse("intents:cancel", args=[run.pk])
    assert post(logged_in(viewer), cancel).status_code == 403
    response = post(logged_in(operator), cancel)
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert post(logged_in(operator), cancel).status_code == 409


def test_an_unknown_run_is_404(viewer):
    assert logged_in(viewer).get(reverse("intents:run", args=[999])).status_code == 404


def test_the_candidates_page_links_evidence_and_filters(operator, viewer, settings, monkeypatch):
    settings.ANTHROPIC_API_KEY = ""
    (success,) = stored_runs(1, intent="refund_request")
    failed = failed_run()
    run = services.intent_proposal_start(actor=Actor(user=operator), enqueue=False, batch_size=2)
    services.intent_proposal_step(run_id=run.pk, worker="w")
    client = logged_in(viewer)
    body = client.get(CANDIDATES).content.decode()
    assert f"{reverse('trajectories:detail', args=[success.pk])}#step-0" in body
    assert f"{reverse('trajectories:detail', args=[failed.pk])}#step-0" in body
    hindsight = client.get(CANDIDATES, {"kind": "hindsight"}).content.decode()
    assert "change_flight" in hindsight and "refund_request" not in hindsight
    labelled = client.get(CANDIDATES, {"label": "Refund Request"}).content.decode()
    assert "refund_request" in labelled and "change_flight" not in labelled
    assert client.get(CANDIDATES, {"cursor": "nonsense"}).status_code == 400
    assert client.get(CANDIDATES, {"kind": "bogus"}).status_code == 200


def test_pages_read_in_a_fixed_number_of_queries(operator, viewer, monkeypatch, django_assert_max_num_queries):
    runs = [finished_run(operator, monkeypatch, malformed=True) for _ in range(3)]
    client = logged_in(viewer)
    with django_assert_max_num_queries(8):
        assert client.get(LIST).status_code == 200
    with django_assert_max_num_queries(8):
        assert client.get(reverse("intents:run", args=[runs[0].pk])).status_code == 200
    with django_assert_max_num_queries(8):
        assert client.get(CANDIDATES).status_code == 200
    for _ in range(3):
        finished_run(operator, monkeypatch)
    with django_assert_max_num_queries(8):
        assert client.get(LIST).status_code == 200
    with django_assert_max_num_queries(8):
        assert client.get(CANDIDATES).status_code == 200


def test_the_nav_links_to_intents(viewer):
    assert f'href="{LIST}"'.encode() in logged_in(viewer).get(LIST).content
