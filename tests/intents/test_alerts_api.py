"""/api/v1/intents/alerts: novelty alerts read with intents:read, decided (dismiss / promote) by reviewers and
operators with intents:write; a promoted candidate heads the reviewers' judging queue."""

from __future__ import annotations

import pytest

from accounts.models import AuditEvent
from accounts.services import Actor
from intents.models import IntentCandidateRecord, NoveltyAlert
from intents.taxonomy.selectors import review_queue_for
from intents.windows.services import novelty_alert_decide, window_analyze
from tests.intents.taxonomy_fixtures import judge
from tests.intents.windows_helpers import (
    DAY,
    T0,
    activate_taxonomy,
    chosen_embedder,  # noqa: F401 (fixture)
    window_of,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("chosen_embedder")]

BASE = "/api/v1/intents/alerts"


def is_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code is not None:
        assert body["code"] == code, body
    return body


@pytest.fixture
def alerts(operator) -> dict[str, NoveltyAlert]:
    """Two open alerts (book a hotel, cancel a subscription) against a taxonomy of refunds and flights; the window
    also holds "refund my order", close to a reviewed intent (no alert)."""
    reviewed = window_of("refund an order", "change a flight", at=T0 - 3 * DAY, run_prefix="demo:rev")
    activate_taxonomy(
        [
            ("intent-refund", "refund an order", [reviewed[0].candidate_id]),
            ("intent-flight", "change a flight", [reviewed[1].candidate_id]),
        ]
    )
    window_of("refund my order", "cancel a subscription", "book a hotel")
    window_analyze(actor=Actor(user=operator), start=T0, end=T0 + DAY)
    return {alert.label: alert for alert in NoveltyAlert.objects.all()}


def test_a_reader_lists_alerts_newest_first_with_a_status_filter(api_client, make_token, viewer, alerts):
    token = make_token(viewer, "intents:read")
    listed = api_client.get(BASE, token=token)
    assert listed.status_code == 200, listed.content
    items = listed.json()["items"]
    assert [item["id"] for item in items] == sorted((a.pk for a in alerts.values()), reverse=True)
    hotel = next(item for item in items if item["label"] == "book a hotel")
    assert hotel["status"] == "open" and hotel["decided_by"] is None and hotel["decided_at"] is None
    assert hotel["candidate_id"] == alerts["book a hotel"].candidate_id
    assert hotel["nearest_intent_id"] in {"intent-refund", "intent-flight"} and hotel["similarity"] < 0.75
    assert api_client.get(f"{BASE}?status=dismissed", token=token).json()["items"] == []
    assert len(api_client.get(f"{BASE}?status=open", token=token).json()["items"]) == 2
    one = api_client.get(f"{BASE}/{alerts['book a hotel'].pk}", token=token)
    assert one.status_code == 200 and one.json() == hotel


def test_alerts_are_cursor_paginated(api_client, make_token, viewer, alerts):
    token = make_token(viewer, "intents:read")
    first = api_client.get(f"{BASE}?limit=1", token=token).json()
    assert len(first["items"]) == 1 and first["next_cursor"]
    second = api_client.get(f"{BASE}?limit=1&cursor={first['next_cursor']}", token=token).json()
    assert len(second["items"]) == 1 and second["next_cursor"] is None
    assert first["items"][0]["id"] > second["items"][0]["id"]
    is_error(api_client.get(f"{BASE}?cursor=nonsense", token=token), 400, "bad_cursor")
    is_error(api_client.get(f"{BASE}?status=closed", token=token), 422, "invalid")


def test_a_reviewer_dismisses_and_an_operator_promotes(api_client, make_token, reviewer, operator, alerts):
    hotel, subscription = alerts["book a hotel"], alerts["cancel a subscription"]
    dismissed = api_client.post(
        f"{BASE}/{hotel.pk}/decision",
        {"decision": "dismiss", "note": "a one-off"},
        token=make_token(reviewer, "intents:write"),
    )
    assert dismissed.status_code == 200, dismissed.content
    body = dismissed.json()
    assert body["status"] == "dismissed" and body["note"] == "a one-off" and body["decided_by"] == "rita"
    assert body["decided_at"] is not None

    promoted = api_client.post(
        f"{BASE}/{subscription.pk}/decision", {"decision": "promote"}, token=make_token(operator, "intents:write")
    )
    assert promoted.status_code == 200 and promoted.json()["status"] == "promoted"
    assert AuditEvent.objects.filter(verb="intent_novelty_alert.promote").count() == 1
    token = make_token(reviewer, "intents:read")
    assert [a["label"] for a in api_client.get(f"{BASE}?status=open", token=token).json()["items"]] == []


def test_decision_refusals_answer_with_the_error_schema_and_change_nothing(
    api_client, make_token, viewer, agent, reviewer, alerts
):
    hotel = alerts["book a hotel"]
    path = f"{BASE}/{hotel.pk}/decision"
    body = {"decision": "dismiss"}
    write = make_token(reviewer, "intents:write")
    is_error(api_client.post(path, body), 401, "unauthorized")
    is_error(api_client.post(path, body, token=make_token(reviewer, "intents:read")), 403, "missing_scope")
    is_error(api_client.post(path, body, token=make_token(agent, "intents:write")), 403, "not_a_reviewer")
    is_error(api_client.post(f"{BASE}/999999/decision", body, token=write), 404, "not_found")
    is_error(api_client.post(path, {"decision": "promoted"}, token=write), 422, "invalid")
    is_error(api_client.post(path, {**body, "surprise": 1}, token=write), 422, "invalid")
    is_error(api_client.post(path, {**body, "note": "x" * 2001}, token=write), 422, "invalid")
    is_error(api_client.post(path, raw="{not json", token=write), 400)
    hotel.refresh_from_db()
    assert hotel.status == "open" and hotel.decided_by is None

    assert api_client.post(path, body, token=write).status_code == 200
    is_error(api_client.post(path, {"decision": "promote"}, token=write), 409, "alert_decided")
    hotel.refresh_from_db()
    assert hotel.status == "dismissed"


def test_reads_refuse_missing_tokens_and_scopes(api_client, make_token, viewer, alerts):
    for path in (BASE, f"{BASE}/{alerts['book a hotel'].pk}"):
        is_error(api_client.get(path), 401, "unauthorized")
        is_error(api_client.get(path, token=make_token(viewer, "graphs:read")), 403, "missing_scope")
    is_error(api_client.get(f"{BASE}/999999", token=make_token(viewer, "intents:read")), 404, "not_found")


def test_the_list_takes_a_fixed_number_of_queries(
    api_client, make_token, viewer, operator, alerts, django_assert_num_queries
):
    token = make_token(viewer, "intents:read")
    api_client.get(BASE, token=token)  # the token is verified once, then served from the token cache
    with django_assert_num_queries(1):
        assert len(api_client.get(BASE, token=token).json()["items"]) == 2
    window_of("plan a wedding", "adopt a cat", "learn the tuba", at=T0 + DAY, run_prefix="demo:more")
    window_analyze(actor=Actor(user=operator), start=T0 + DAY, end=T0 + 2 * DAY)
    for alert in NoveltyAlert.objects.all():
        if alert.status == "open":
            novelty_alert_decide(actor=Actor(user=operator), alert=alert, status="dismissed")
    with django_assert_num_queries(1):
        items = api_client.get(BASE, token=token).json()["items"]
    assert len(items) > 2 and all(item["decided_by"] == "otto" for item in items)


# --- promotion puts the candidate at the head of the judging queue ---------------------------------------------------
def test_a_promoted_candidate_heads_the_judging_queue(api_client, make_token, reviewer, operator, alerts):
    hotel = alerts["book a hotel"]
    token = make_token(reviewer, "intents:read", "intents:write")
    before = api_client.get("/api/v1/intents/taxonomy/queue", token=token).json()["items"]
    assert [item["intent"] for item in before] == ["refund my order", "cancel a subscription", "book a hotel"]
    assert not any(item["promoted_alert"] for item in before)

    api_client.post(f"{BASE}/{hotel.pk}/decision", {"decision": "promote"}, token=token)
    after = api_client.get("/api/v1/intents/taxonomy/queue", token=token).json()["items"]
    assert [item["intent"] for item in after] == ["book a hotel", "refund my order", "cancel a subscription"]
    assert [item["promoted_alert"] for item in after] == [True, False, False]
    assert after[0]["candidate_id"] == hotel.candidate_id

    # Once judged by this reviewer it leaves their queue; it still heads the queue of a reviewer who has not.
    record = IntentCandidateRecord.objects.filter(candidate_id=hotel.candidate_id).order_by("id").first()
    judge(record, "valid", reviewer)
    mine = review_queue_for(reviewer)
    assert [row.intent for row in mine.rows] == ["refund my order", "cancel a subscription"]
    theirs = review_queue_for(operator)
    assert theirs.rows[0].intent == "book a hotel"
