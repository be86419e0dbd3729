"""Webhooks: outbox rows in the activation's transaction, Standard Webhooks signatures, retries with backoff,
attempt log.

The receiving endpoint is a real HTTP server on 127.0.0.1 in a thread (loopback only)."""

import base64
import hashlib
import hmac
import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from accounts.roles import RoleRequired
from reviews import services, webhooks
from reviews.errors import Invalid
from reviews.models import DeliveryStatus, PromotionStatus, WebhookAttempt, WebhookDelivery

from .conftest import act, v0_then_v1_through_a_review


class Receiver:
    def __init__(self) -> None:
        self.received: list[tuple[dict, bytes]] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append((dict(self.headers), body))
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def _allow_loopback_endpoints(settings):
    """The receiver listens on 127.0.0.1, which production refuses (tests/reviews/test_webhook_security.py)."""
    settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = True


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def approve_twice(request, first, second):
    services.judgment_submit(actor=act(first), request=request, verdict="approve")
    return services.judgment_submit(actor=act(second), request=request, verdict="approve")


@pytest.mark.django_db
def test_only_an_admin_registers_an_endpoint_for_known_events(admin_user, reviewer):
    with pytest.raises(RoleRequired):
        webhooks.webhook_endpoint_create(actor=act(reviewer), url="http://127.0.0.1:9/", events=["promotion.activated"])
    with pytest.raises(Invalid):
        webhooks.webhook_endpoint_create(actor=act(admin_user), url="ftp://x/", events=["promotion.activated"])
    with pytest.raises(Invalid):
        webhooks.webhook_endpoint_create(actor=act(admin_user), url="http://127.0.0.1:9/", events=["nope"])
    endpoint, secret = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url="http://127.0.0.1:9/", events=["promotion.activated"]
    )
    assert secret.startswith("whsec_") and endpoint.secret == secret


@pytest.mark.django_db
def test_an_activation_is_delivered_with_a_signature_that_verifies_with_the_shared_secret(
    fake_kind, proposer, reviewer, second_reviewer, admin_user, receiver, django_capture_on_commit_callbacks
):
    _, secret = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url=receiver.url, events=["promotion.activated", "promotion.rolled_back"]
    )
    fake_kind.add("v1")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="go")
    with django_capture_on_commit_callbacks(execute=True):
        request = approve_twice(request, reviewer, second_reviewer)
    assert request.status == PromotionStatus.APPLIED
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    assert Webhook(secret).verify(body, headers) == json.loads(body)  # Standard Webhooks: id, timestamp and body
    assert headers["X-Waymark-Event"] == "promotion.activated"
    # The signature, computed here from the spec (standardwebhooks.com): v1,base64(HMAC-SHA256(base64-decoded secret
    # after "whsec_", "<webhook-id>.<webhook-timestamp>.<body>")).
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert headers["webhook-signature"].split(" ") == [expected]
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
    # Changing the id, the timestamp or one byte of the body breaks it.
    tampered = [
        ({**headers, "webhook-id": headers["webhook-id"] + "0"}, body),
        ({**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 1)}, body),
        (headers, body.replace(b'"v1"', b'"v2"')),
    ]
    for changed_headers, changed_body in tampered:
        assert changed_body != body or changed_headers != headers
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(changed_body, changed_headers)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.SENT and delivery.attempts == 1
    assert delivery.payload["candidate_id"] == "v1" and delivery.payload["promotion"] == request.pk


@pytest.mark.django_db
def test_an_endpoint_not_subscribed_to_the_event_gets_nothing(
    fake_kind, proposer, reviewer, second_reviewer, admin_user, receiver, django_capture_on_commit_callbacks
):
    webhooks.webhook_endpoint_create(actor=act(admin_user), url=receiver.url, events=["promotion.rolled_back"])
    fake_kind.add("v1")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="go")
    with django_capture_on_commit_callbacks(execute=True):
        approve_twice(request, reviewer, second_reviewer)
    assert receiver.received == []
    assert not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_a_failing_endpoint_is_retried_with_backoff_and_every_attempt_is_logged(
    fake_kind, proposer, reviewer, second_reviewer, admin_user, receiver, django_capture_on_commit_callbacks
):
    receiver.status = 500
    webhooks.webhook_endpoint_create(actor=act(admin_user), url=receiver.url, events=["promotion.activated"])
    fake_kind.add("v1")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="go")
    with django_capture_on_commit_callbacks(execute=True):
        approve_twice(request, reviewer, second_reviewer)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.PENDING and delivery.attempts == 1
    assert delivery.last_status_code == 500
    first_wait = delivery.due_at - delivery.attempt_log.get().attempted_at
    assert first_wait == webhooks.webhook_backoff(1) == timedelta(seconds=30)

    # Not due yet: nothing is sent.
    assert webhooks.webhook_delivery_attempt(delivery_id=delivery.pk) is None
    assert len(receiver.received) == 1

    with django_capture_on_commit_callbacks(execute=True):
        webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=delivery.due_at)
    delivery.refresh_from_db()
    assert delivery.attempts == 2 and len(receiver.received) == 2
    second = WebhookAttempt.objects.get(delivery=delivery, number=2)
    assert delivery.due_at - second.attempted_at == timedelta(seconds=60)

    receiver.status = 204
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=delivery.due_at)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SENT and delivery.attempts == 3
    assert list(delivery.attempt_log.values_list("number", "status_code")) == [(1, 500), (2, 500), (3, 204)]


@pytest.mark.django_db
def test_a_delivery_gives_up_after_the_last_attempt(admin_user, receiver):
    receiver.status = 503
    endpoint, _ = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url=receiver.url, events=["promotion.activated"]
    )
    delivery = WebhookDelivery.objects.create(endpoint=endpoint, event="promotion.activated", payload={"x": 1})
    for _ in range(webhooks.WEBHOOK_MAX_ATTEMPTS):
        delivery.refresh_from_db()
        webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=delivery.due_at)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.attempt_log.count() == webhooks.WEBHOOK_MAX_ATTEMPTS
    assert webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=delivery.due_at) is None


@pytest.mark.django_db
def test_an_unreachable_endpoint_is_logged_as_an_error(admin_user):
    endpoint, _ = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url="http://127.0.0.1:9/closed", events=["promotion.activated"]
    )
    delivery = WebhookDelivery.objects.create(endpoint=endpoint, event="promotion.activated", payload={})
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk)
    attempt = WebhookAttempt.objects.get(delivery=delivery)
    assert attempt.status_code is None and attempt.error


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_sends_nothing(
    fake_kind, proposer, reviewer, second_reviewer, admin_user, receiver, monkeypatch
):
    webhooks.webhook_endpoint_create(actor=act(admin_user), url=receiver.url, events=["promotion.activated"])
    fake_kind.add("v1")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="go")
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    real_outbox = webhooks.webhook_outbox

    def outbox_then_fail(*args, **kwargs):
        assert real_outbox(*args, **kwargs)  # the delivery row is written …
        raise RuntimeError("failure after the outbox row, inside the transaction")

    monkeypatch.setattr(webhooks, "webhook_outbox", outbox_then_fail)
    with pytest.raises(RuntimeError):
        services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
    assert not WebhookDelivery.objects.exists()  # … and rolled back with everything else
    assert receiver.received == []
    request.refresh_from_db()
    assert request.status == PromotionStatus.OPEN
    assert fake_kind.current_active("p1") is None


@pytest.mark.django_db(transaction=True)
def test_a_committed_activation_is_delivered_after_commit(
    fake_kind, proposer, reviewer, second_reviewer, admin_user, receiver
):
    webhooks.webhook_endpoint_create(actor=act(admin_user), url=receiver.url, events=["promotion.rolled_back"])
    v0_then_v1_through_a_review(fake_kind, proposer, reviewer, second_reviewer)
    services.rollback_emergency(actor=act(admin_user), kind="fake", parent_key="p1", reason="v1 loops")
    assert len(receiver.received) == 1
    assert receiver.received[0][0]["X-Waymark-Event"] == "promotion.rolled_back"


@pytest.mark.django_db
def test_the_periodic_sweep_resends_due_deliveries_only(admin_user, receiver):
    from django.utils import timezone

    from reviews.tasks import deliver_due_webhooks

    endpoint, _ = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url=receiver.url, events=["promotion.activated"]
    )
    due = WebhookDelivery.objects.create(endpoint=endpoint, event="promotion.activated", payload={"due": True})
    WebhookDelivery.objects.create(
        endpoint=endpoint,
        event="promotion.activated",
        payload={"due": False},
        due_at=timezone.now() + timedelta(minutes=5),
    )
    assert deliver_due_webhooks() == 1
    due.refresh_from_db()
    assert due.status == DeliveryStatus.SENT
    assert len(receiver.received) == 1


# --- a worker that dies during an attempt --------------------------------------------------------------------------
class WorkerDied(BaseException):
    """Stands for SIGKILL: nothing after the raise runs, no handler catches it (tests/reviews/
    test_delivery_worker_faults.py does the same with a real worker process)."""


def a_delivery(admin_user, url: str) -> WebhookDelivery:
    endpoint, _ = webhooks.webhook_endpoint_create(actor=act(admin_user), url=url, events=["promotion.activated"])
    return WebhookDelivery.objects.create(endpoint=endpoint, event="promotion.activated", payload={"promotion": 7})


def dying_post(monkeypatch, receiver=None):
    """_post reaches the receiver (when given), then the worker dies before the attempt is recorded."""
    real = webhooks._post

    def post(url, body, headers):
        if receiver is not None:
            real(url, body, headers)
        raise WorkerDied

    monkeypatch.setattr(webhooks, "_post", post)
    return real


@pytest.mark.django_db
def test_an_attempt_whose_worker_died_is_logged_as_lost_by_the_next_claim(admin_user, receiver, monkeypatch):
    delivery = a_delivery(admin_user, receiver.url)
    real = dying_post(monkeypatch, receiver)
    claimed = timezone.now()
    with pytest.raises(WorkerDied):
        webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=claimed)
    assert not WebhookAttempt.objects.exists()  # the dead worker recorded nothing

    monkeypatch.setattr(webhooks, "_post", real)
    # Within the claim window nobody sends again (the worker might still be alive) …
    assert webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=claimed + timedelta(seconds=30)) is None
    assert webhooks.webhook_deliveries_due(now=claimed + timedelta(seconds=30)) == []
    # … after it, the sweep finds the delivery due and the next claim logs the lost attempt before sending again.
    later = claimed + webhooks.WEBHOOK_CLAIM
    assert webhooks.webhook_deliveries_due(now=later) == [delivery.pk]
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=later)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SENT and delivery.attempts == 2
    log = list(delivery.attempt_log.values_list("number", "status_code", "error", "attempted_at"))
    assert log == [(1, None, webhooks.LOST_ATTEMPT, claimed), (2, 200, "", later)]
    ids = [headers["webhook-id"] for headers, _ in receiver.received]
    assert ids == [webhooks.webhook_id(delivery.pk)] * 2  # at least once, with one id to drop duplicates by


@pytest.mark.django_db
def test_the_deliveries_page_shows_a_lost_attempt(admin_user, receiver, monkeypatch, client):
    delivery = a_delivery(admin_user, receiver.url)
    dying_post(monkeypatch)
    with pytest.raises(WorkerDied):
        webhooks.webhook_delivery_attempt(delivery_id=delivery.pk)
    webhooks._claim(delivery.pk, timezone.now() + webhooks.WEBHOOK_CLAIM)  # the next claim (its worker dies too)
    client.force_login(admin_user)
    page = client.get(reverse("reviews:deliveries")).content.decode()
    assert "no result: the worker stopped during this attempt" in page


@pytest.mark.django_db
def test_a_delivery_whose_claims_keep_dying_fails_with_the_reason_after_the_last_attempt(
    admin_user, receiver, monkeypatch
):
    delivery = a_delivery(admin_user, receiver.url)
    dying_post(monkeypatch, receiver)
    now = timezone.now()
    for _ in range(webhooks.WEBHOOK_MAX_ATTEMPTS):
        with pytest.raises(WorkerDied):
            webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=now)
        now += webhooks.WEBHOOK_CLAIM
    assert len(receiver.received) == webhooks.WEBHOOK_MAX_ATTEMPTS

    assert webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=now) is None  # no seventh attempt
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == webhooks.WEBHOOK_MAX_ATTEMPTS
    assert delivery.last_error == f"gave up after {webhooks.WEBHOOK_MAX_ATTEMPTS} attempts: {webhooks.LOST_ATTEMPT}"
    assert list(delivery.attempt_log.values_list("number", "error")) == [
        (number, webhooks.LOST_ATTEMPT) for number in range(1, webhooks.WEBHOOK_MAX_ATTEMPTS + 1)
    ]
    assert len(receiver.received) == webhooks.WEBHOOK_MAX_ATTEMPTS
    assert webhooks.webhook_deliveries_due(now=now + timedelta(days=1)) == []  # the sweep leaves it alone


@pytest.mark.django_db
def test_the_last_failed_attempt_names_its_error_when_giving_up(admin_user, receiver, monkeypatch):
    receiver.status = 503
    delivery = a_delivery(admin_user, receiver.url)
    now = timezone.now()
    for _ in range(webhooks.WEBHOOK_MAX_ATTEMPTS - 1):
        webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=now)
        delivery.refresh_from_db()
        now = delivery.due_at
    dying_post(monkeypatch)
    with pytest.raises(WorkerDied):  # the last attempt's worker dies
        webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=now)
    assert webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=now + webhooks.WEBHOOK_CLAIM) is None
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.attempt_log.count() == webhooks.WEBHOOK_MAX_ATTEMPTS
    assert delivery.last_error.startswith(f"gave up after {webhooks.WEBHOOK_MAX_ATTEMPTS} attempts: no result")


@pytest.mark.django_db
def test_an_attempt_recorded_after_its_claim_ran_out_fills_in_its_row_and_leaves_the_newer_claim_alone(
    admin_user, receiver, monkeypatch
):
    receiver.status = 500
    delivery = a_delivery(admin_user, receiver.url)
    real = webhooks._post
    claimed = timezone.now()
    newer = claimed + webhooks.WEBHOOK_CLAIM

    def slow_post(url, body, headers):
        result = real(url, body, headers)
        assert webhooks._claim(delivery.pk, newer) is not None  # meanwhile the claim ran out and was taken again
        return result

    monkeypatch.setattr(webhooks, "_post", slow_post)
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=claimed)
    delivery.refresh_from_db()
    assert list(delivery.attempt_log.values_list("number", "status_code")) == [(1, 500)]  # one row, its result
    assert delivery.status == DeliveryStatus.PENDING and delivery.attempts == 2
    # the newer attempt keeps its lease (no backoff, no release): it decides what comes next
    assert delivery.lease_expires_at == newer + webhooks.WEBHOOK_CLAIM and delivery.due_at <= claimed


@pytest.mark.django_db
def test_an_attempt_whose_worker_process_died_is_taken_over_before_its_lease_runs_out(
    admin_user, receiver, monkeypatch, django_capture_on_commit_callbacks
):
    """common.leases' take-over: the liveness check ends the dead worker's lease now (audited) and the delivery is
    tried again at once, its lost attempt logged; a live worker's attempt is left alone."""
    from django.conf import settings

    from accounts.models import AuditEvent
    from common import liveness

    delivery = a_delivery(admin_user, receiver.url)
    other = a_delivery(admin_user, receiver.url)
    real = dying_post(monkeypatch, receiver)
    with pytest.raises(WorkerDied):
        webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, worker="hooks-dead:101:task-a")
    with pytest.raises(WorkerDied):
        webhooks.webhook_delivery_attempt(delivery_id=other.pk, worker="hooks-live:202:task-b")
    monkeypatch.setattr(webhooks, "_post", real)
    assert webhooks.webhook_deliveries_due() == []  # both leases live for WEBHOOK_CLAIM
    liveness.stamp("hooks-dead:101", at=time.time() - settings.WAYMARK_LIVENESS_STALE_SECONDS - 1)  # dead
    liveness.stamp("hooks-live:202")  # alive

    with django_capture_on_commit_callbacks(execute=True):  # eager: the take-over sends at once
        released = liveness.dead_leases_release()

    assert released["reviews.webhookdelivery"] == 1
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SENT and delivery.attempts == 2 and not delivery.lease_lives()
    assert list(delivery.attempt_log.values_list("number", "error")) == [(1, webhooks.LOST_ATTEMPT), (2, "")]
    event = AuditEvent.objects.get(verb="webhookdelivery.lease_released")
    assert (event.actor_label, event.target_id, event.before["lease_owner"]) == (
        "system",
        str(delivery.pk),
        "hooks-dead:101:task-a",
    )
    other.refresh_from_db()
    assert (other.status, other.lease_owner, other.attempts) == (DeliveryStatus.PENDING, "hooks-live:202:task-b", 1)
    assert other.lease_lives()
