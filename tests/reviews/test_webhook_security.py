"""Webhook safety: Standard Webhooks signatures (id, timestamp, body), no private/loopback/link-local/multicast/
reserved targets at registration or at delivery (after DNS resolution), no redirects followed, short timeouts."""

import base64
import json
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from reviews import webhooks
from reviews.errors import Invalid
from reviews.models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from tests.conftest import logged_in
from tests.helpers.reviews import post

from .conftest import act

pytestmark = pytest.mark.django_db

REFUSED = [
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:8000/hook",
    "http://127.1.2.3/",
    "http://10.0.0.5/hook",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://0.0.0.0/",
    "http://224.0.0.1/",
    "http://240.0.0.1/",
    "http://[::1]/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://localhost:8000/",
]


class Server:
    """A loopback HTTP server answering every POST with `status` (and a Location), after `delay` seconds."""

    def __init__(self, status: int = 200, location: str = "", delay: float = 0) -> None:
        self.hits: list[tuple[dict, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.hits.append((dict(self.headers), body))
                time.sleep(delay)
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        self.url = f"http://127.0.0.1:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers():
    started: list[Server] = []

    def start(**kwargs) -> Server:
        started.append(Server(**kwargs))
        return started[-1]

    yield start
    for server in started:
        server.close()


def resolving(monkeypatch, address: str) -> None:
    """Every name resolves to `address` (as an attacker's DNS would answer)."""

    def fake(host, port, *args, **kwargs):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (address, port or 80))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)


def delivery_to(url: str, admin_user) -> WebhookDelivery:
    endpoint = WebhookEndpoint.objects.create(
        url=url, secret=webhooks.webhook_secret(), events=["promotion.activated"], created_by=admin_user
    )
    return WebhookDelivery.objects.create(endpoint=endpoint, event="promotion.activated", payload={"promotion": 1})


# --- registration ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url", REFUSED)
def test_registration_refuses_internal_targets(admin_user, url):
    with pytest.raises(Invalid) as refused:
        webhooks.webhook_endpoint_create(actor=act(admin_user), url=url, events=["promotion.activated"])
    assert refused.value.code == "unsafe_url"
    assert not WebhookEndpoint.objects.exists()


def test_registration_refuses_a_name_that_resolves_to_an_internal_address(admin_user, monkeypatch):
    resolving(monkeypatch, "169.254.169.254")
    with pytest.raises(Invalid):
        webhooks.webhook_endpoint_create(
            actor=act(admin_user), url="https://metadata.example.com/", events=["promotion.activated"]
        )


def test_registration_accepts_public_and_not_yet_resolvable_targets(admin_user, monkeypatch):
    webhooks.webhook_endpoint_create(
        actor=act(admin_user), url="https://93.184.216.34/h", events=["promotion.activated"]
    )
    resolving(monkeypatch, "2606:4700::1111")
    webhooks.webhook_endpoint_create(
        actor=act(admin_user), url="https://hooks.example.com/", events=["promotion.activated"]
    )

    def unresolvable(*args, **kwargs):
        raise socket.gaierror("no such name")

    monkeypatch.setattr(socket, "getaddrinfo", unresolvable)
    webhooks.webhook_endpoint_create(
        actor=act(admin_user), url="https://later.example.com/", events=["promotion.activated"]
    )
    assert WebhookEndpoint.objects.count() == 3


def test_the_registration_page_refuses_the_metadata_address(admin_user):
    client = logged_in(admin_user)
    response = post(
        client, reverse("reviews:webhooks"), {"url": "http://169.254.169.254/", "events": ["promotion.activated"]}
    )
    assert response.status_code == 422 and "public addresses only" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_private_targets_are_allowed_only_when_the_setting_says_so(admin_user, settings):
    settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = False
    with pytest.raises(Invalid) as refused:
        webhooks.webhook_endpoint_create(
            actor=act(admin_user), url="http://127.0.0.1:9/", events=["promotion.activated"]
        )
    assert refused.value.code == "unsafe_url" and not WebhookEndpoint.objects.exists()
    settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = True
    endpoint, _ = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url="http://127.0.0.1:9/", events=["promotion.activated"]
    )
    assert WebhookEndpoint.objects.get().pk == endpoint.pk and endpoint.url == "http://127.0.0.1:9/"


# --- delivery ---------------------------------------------------------------------------------------------------------
def test_delivery_refuses_a_name_that_now_resolves_to_loopback(admin_user, servers, monkeypatch):
    server = servers()
    delivery = delivery_to(f"http://hooks.example.com:{server.port}/hook", admin_user)
    resolving(monkeypatch, "127.0.0.1")  # DNS rebinding after registration
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk)
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code is None and "loopback" in attempt.error
    assert server.hits == []


def test_delivery_connects_to_the_address_it_vetted(admin_user, servers, monkeypatch, settings):
    settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = True
    server = servers()
    delivery = delivery_to(f"http://hooks.example.com:{server.port}/hook?x=1", admin_user)
    resolving(monkeypatch, "127.0.0.1")
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SENT and len(server.hits) == 1
    assert server.hits[0][0]["Host"] == f"hooks.example.com:{server.port}"


def test_a_redirect_is_a_failed_attempt_and_is_not_followed(admin_user, servers, settings):
    settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = True
    target = servers()
    redirecting = servers(status=307, location=target.url)
    delivery = delivery_to(redirecting.url, admin_user)
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING and delivery.last_status_code == 307
    assert "redirect" in delivery.last_error
    assert len(redirecting.hits) == 1 and target.hits == []


def test_a_slow_endpoint_times_out_quickly(admin_user, servers, settings, monkeypatch):
    assert webhooks.WEBHOOK_TIMEOUT_SECONDS <= 5
    settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = True
    monkeypatch.setattr(webhooks, "WEBHOOK_TIMEOUT_SECONDS", 0.3)
    slow = servers(delay=2)
    delivery = delivery_to(slow.url, admin_user)
    started = time.monotonic()
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk)
    assert time.monotonic() - started < 1.5
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code is None and "timed out" in attempt.error


# --- signatures ------------------------------------------------------------------------------------------------------
def test_secrets_are_standard_webhooks_secrets(admin_user):
    _, secret = webhooks.webhook_endpoint_create(
        actor=act(admin_user), url="https://93.184.216.34/", events=["promotion.activated"]
    )
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def test_a_delivery_is_signed_over_id_timestamp_and_body_and_keeps_its_id_on_retries(admin_user, servers, settings):
    settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = True
    server = servers(status=500)
    delivery = delivery_to(server.url, admin_user)
    secret = delivery.endpoint.secret
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk)
    webhooks.webhook_delivery_attempt(delivery_id=delivery.pk, now=datetime.now(UTC) + timedelta(minutes=10))
    (first, body), (second, _) = server.hits
    assert first["webhook-id"] == second["webhook-id"] == webhooks.webhook_id(delivery.pk)
    assert first["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(body, first) == json.loads(body)
    with pytest.raises(WebhookVerificationError):  # a replay with a fresh timestamp does not match the signature
        Webhook(secret).verify(body, {**first, "webhook-timestamp": str(int(time.time()) + 1)})
    with pytest.raises(WebhookVerificationError):  # nor does another message id
        Webhook(secret).verify(body, {**first, "webhook-id": "msg_other"})
    with pytest.raises(WebhookVerificationError):  # and a captured delivery goes stale
        Webhook(secret).verify(body, second)  # stamped 10 minutes ahead: outside the tolerance


def test_the_signature_is_the_documented_hmac():
    import hashlib
    import hmac

    key = b"k" * 32
    secret = "whsec_" + base64.b64encode(key).decode()
    stamp = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    headers = webhooks.webhook_headers(secret, message_id="msg_1", timestamp=stamp, body=b'{"a":1}')
    digest = hmac.new(key, f'msg_1.{int(stamp.timestamp())}.{{"a":1}}'.encode(), hashlib.sha256).digest()
    assert headers == {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(stamp.timestamp())),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }
