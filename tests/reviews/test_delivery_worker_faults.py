"""Webhook delivery on a real Celery worker (Redis broker, PostgreSQL) to a real HTTP receiver on 127.0.0.1, whose
pool process is SIGKILLed once while the receiver holds the request and once after the receiver answered but before
the attempt was recorded. The beat sweep (deliver_due_webhooks) resends after the claim window; the delivery ends
`sent` once, each dead attempt is logged as lost, and every request the receiver saw carries the same `webhook-id`
(at least once: Standard Webhooks receivers drop duplicates by it) with a signature that verifies."""

import json
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

from reviews import services, tasks, webhooks
from reviews.models import DeliveryStatus, PromotionStatus, WebhookDelivery
from tests.faults import fault_worker, wait_for

from .conftest import act

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


class HoldingReceiver:
    """Answers 200, except the first request: it is held while the worker's pool process is SIGKILLed."""

    def __init__(self, directory: Path) -> None:
        self.received: list[tuple[dict, bytes]] = []
        self.killed_while_holding: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append((dict(self.headers), body))
                if not receiver.killed_while_holding:
                    pid = int((directory / "attempt.pid").read_text())
                    os.kill(pid, signal.SIGKILL)
                    receiver.killed_while_holding.append(pid)
                    time.sleep(0.5)  # the answer below goes to a connection nobody reads any more
                try:
                    self.send_response(200)
                    self.end_headers()
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_delivery_whose_worker_is_killed_mid_request_and_before_recording_is_sent_once(
    transactional_db, fake_kind, proposer, reviewer, second_reviewer, admin_user, settings, tmp_path
):
    settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = True  # the receiver is on loopback
    receiver = HoldingReceiver(tmp_path)
    _, secret = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url=receiver.url, events=["promotion.activated"]
    )
    fake_kind.add("v1")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="go")
    try:
        with fault_worker("tests.reviews.delivery_fault_worker", tmp_path, redis_db=4, points=["answered"]) as worker:
            services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
            request = services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
            assert request.status == PromotionStatus.APPLIED  # the outbox row's message went to the worker on commit
            delivery = WebhookDelivery.objects.get()

            def sent() -> bool:
                delivery.refresh_from_db()
                return delivery.status != DeliveryStatus.PENDING

            done = wait_for(sent, 45, tick=tasks.deliver_due_webhooks.delay)
            assert done, "the delivery did not end:\n" + worker.log_tail()
    finally:
        receiver.close()

    assert receiver.killed_while_holding, "the receiver never held a request"
    assert worker.killed() == ["answered"], worker.log_tail()
    assert delivery.status == DeliveryStatus.SENT and delivery.attempts == 3
    assert list(delivery.attempt_log.values_list("number", "status_code", "error")) == [
        (1, None, webhooks.LOST_ATTEMPT),  # killed while the receiver held the request
        (2, None, webhooks.LOST_ATTEMPT),  # the receiver answered 200, the worker died before recording it
        (3, 200, ""),
    ]
    ids = [headers["webhook-id"] for headers, _ in receiver.received]
    assert ids == [webhooks.webhook_id(delivery.pk)] * 3  # the same id every time: receivers dedupe on it
    for headers, body in receiver.received:
        assert Webhook(secret).verify(body, headers) == json.loads(body)
