"""Webhook deliveries moved onto the one lease mechanism (reviews 0007; issue 28, item 2) with no row or value lost: a
database holding deliveries in every state (sent, failed, backing off, in the middle of an attempt, never tried),
written through the historical models before the move, reads each one after it with the same values, its old
`next_attempt_at` as its due time or, for an attempt under way, as its lease's end; and the deliveries go on as they
would have: the one backing off is due at its old time, the attempt under way is not tried again before its old
claim ran out and is then logged as lost at the time it began. Run with the migration executor itself."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from reviews import webhooks
from reviews.models import DeliveryStatus, WebhookDelivery
from tests.helpers.migrations import leaves, migrate

BEFORE = [("reviews", "0006_rubrics_leave_for_their_app")]


@pytest.fixture
def before_the_move(transactional_db):
    """The database as it was before the move, as its historical state; migrated forward again afterwards."""
    executor = migrate(BEFORE)
    try:
        others = [node for node in executor.loader.graph.leaf_nodes() if node[0] != "reviews"]
        yield executor.loader.project_state([*others, *BEFORE]).apps
    finally:
        migrate(leaves())


def test_deliveries_in_every_state_keep_their_values_and_go_on_after_the_move(before_the_move):
    old = before_the_move
    admin = get_user_model().objects.create_user("hooks-admin")
    Endpoint = old.get_model("reviews", "WebhookEndpoint")
    Delivery = old.get_model("reviews", "WebhookDelivery")
    Attempt = old.get_model("reviews", "WebhookAttempt")
    endpoint = Endpoint.objects.create(
        url="https://hooks.example.test/w", secret="whsec_x", events=["promotion.activated"], created_by_id=admin.pk
    )
    now = timezone.now().replace(microsecond=0)
    claim = timedelta(minutes=2)

    def delivery(status, attempts, next_attempt_at, logged, **fields):
        row = Delivery.objects.create(
            endpoint=endpoint,
            event="promotion.activated",
            payload={"promotion": attempts, "status": status},
            status=status,
            attempts=attempts,
            next_attempt_at=next_attempt_at,
            created_at=now - timedelta(hours=1),
            **fields,
        )
        for number in range(1, logged + 1):
            Attempt.objects.create(
                delivery=row, number=number, attempted_at=now - timedelta(minutes=10), status_code=500
            )
        return row.pk

    sent = delivery(
        "sent", 1, now - timedelta(minutes=30), 1, last_status_code=204, sent_at=now - timedelta(minutes=29)
    )
    failed = delivery("failed", 6, now - timedelta(minutes=20), 6, last_status_code=503, last_error="HTTP 503")
    backing_off = delivery("pending", 2, now + timedelta(minutes=1), 2, last_status_code=500, last_error="HTTP 500")
    under_way = delivery("pending", 3, now + timedelta(seconds=90), 2, last_status_code=500, last_error="HTTP 500")
    fresh = delivery("pending", 0, now - timedelta(seconds=5), 0)
    before = {row["id"]: row for row in Delivery.objects.values()}

    migrate(leaves())

    after = {row["id"]: row for row in WebhookDelivery.objects.values()}
    assert set(after) == set(before)
    for pk, row in before.items():
        moved = after[pk]
        kept = {key: value for key, value in row.items() if key != "next_attempt_at"}
        assert {key: moved[key] for key in kept} == kept, pk
        if pk == under_way:  # the attempt under way: its claim's end is its lease's end, due since the claim began
            assert (moved["lease_owner"], moved["lease_expires_at"]) == ("", row["next_attempt_at"])
            assert moved["due_at"] == row["next_attempt_at"] - claim
        else:
            assert (moved["lease_owner"], moved["lease_expires_at"], moved["due_at"]) == (
                "",
                None,
                row["next_attempt_at"],
            )

    assert webhooks.webhook_deliveries_due(now=now) == [fresh]
    assert webhooks.webhook_deliveries_due(now=now + timedelta(minutes=1)) == [fresh, backing_off]
    assert webhooks._claim(under_way, now + timedelta(seconds=89)) is None  # its claim has not run out yet
    taken = webhooks._claim(under_way, now + timedelta(seconds=90))
    assert taken is not None and taken.attempts == 4
    lost = taken.attempt_log.get(number=3)
    assert (lost.error, lost.attempted_at) == (webhooks.LOST_ATTEMPT, now + timedelta(seconds=90) - claim)
    assert WebhookDelivery.objects.get(pk=sent).status == DeliveryStatus.SENT
    assert WebhookDelivery.objects.get(pk=failed).status == DeliveryStatus.FAILED
