"""Webhooks of reviews: the endpoints admins register, the outbox rows an activation writes, and their delivery.

An activation or rollback (reviews.services) calls `webhook_outbox` inside its own transaction: one delivery row per
active endpoint subscribed to the event, and a Celery task enqueued on commit for each. `webhook_delivery_attempt`
takes the lease of a due delivery (common.leases, for WEBHOOK_CLAIM), POSTs it signed as Standard Webhooks (pinned
to the address that was checked: public addresses only) and records the attempt, releasing the lease; failures back
off exponentially (`due_at`) up to WEBHOOK_MAX_ATTEMPTS. A worker that dies during an attempt leaves its lease to run
out, or to be ended at once when its process is known dead (reviews.apps registers the take-over). Endpoint changes
need the admin role and are audited.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import json
import secrets
import socket
import ssl
import time
from datetime import datetime, timedelta
from functools import partial
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common.leases import lease_claim, lease_clear, lease_free, owner_name
from common.liveness import lease_owner

from .errors import Invalid
from .models import DeliveryStatus, PromotionRequest, WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent

WEBHOOK_MAX_ATTEMPTS = 6
WEBHOOK_BASE_DELAY = timedelta(seconds=30)
WEBHOOK_MAX_DELAY = timedelta(hours=1)
WEBHOOK_TIMEOUT_SECONDS = 5  # for the connection and for each read: a slow endpoint is a failed attempt
WEBHOOK_CLAIM = timedelta(minutes=2)  # an attempt's lease: not recorded by then, the attempt may be tried again
LOST_ATTEMPT = "no result: the worker stopped during this attempt"


# --- the outbox ------------------------------------------------------------------------------------------------------
def webhook_outbox(request: PromotionRequest, actor: Actor) -> list[int]:
    """Inside the activation's transaction (reviews.services): one delivery row per active endpoint subscribed to the
    event."""
    event = WebhookEvent.ROLLED_BACK if request.is_rollback else WebhookEvent.ACTIVATED
    payload = {
        "event": event.value,
        "promotion": request.pk,
        "kind": request.kind,
        "candidate_id": request.candidate_id,
        "parent_key": request.parent_key,
        "replaced_id": request.replaces_id,
        "is_rollback": request.is_rollback,
        "applied_at": request.applied_at.isoformat() if request.applied_at else None,
        "actor": actor.label,
    }
    endpoints = [e for e in WebhookEndpoint.objects.filter(active=True) if event.value in e.events]
    deliveries = WebhookDelivery.objects.bulk_create(
        [WebhookDelivery(endpoint=endpoint, event=event, payload=payload) for endpoint in endpoints]
    )
    ids = [delivery.pk for delivery in deliveries]
    if ids:
        transaction.on_commit(partial(_enqueue_deliveries, ids))
    return ids


def _enqueue_deliveries(ids: list[int], countdown: float = 0) -> None:
    from .tasks import deliver_webhook

    for delivery_id in ids:
        if countdown:
            deliver_webhook.apply_async(args=[delivery_id], countdown=countdown)
        else:
            deliver_webhook.delay(delivery_id)


def webhook_body(payload: dict) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def webhook_secret() -> str:
    """A Standard Webhooks secret: `whsec_` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def webhook_id(delivery_id: int) -> str:
    """The `webhook-id` of a delivery: the same on every retry, so receivers can drop duplicates."""
    return f"msg_waymark_{delivery_id}"


def webhook_headers(secret: str, *, message_id: str, timestamp: datetime, body: bytes) -> dict[str, str]:
    """Standard Webhooks headers (https://www.standardwebhooks.com): `webhook-signature` is `v1,<base64 HMAC-SHA256
    of "<webhook-id>.<webhook-timestamp>.<body>">` keyed with the endpoint's secret, so a captured delivery cannot be
    replayed once receivers reject old timestamps (the standard library's verify allows 5 minutes)."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id=message_id, timestamp=timestamp, data=body.decode()),
    }


def webhook_backoff(attempts: int) -> timedelta:
    """The wait after the `attempts`-th failed attempt: 30 s, 1 min, 2 min, … capped at an hour."""
    return min(WEBHOOK_BASE_DELAY * (2 ** max(attempts - 1, 0)), WEBHOOK_MAX_DELAY)


class UnsafeTarget(Exception):
    """A webhook URL whose host is (or resolves to) an address Waymark must not call."""


def _allow_private() -> bool:
    return bool(getattr(settings, "WAYMARK_WEBHOOKS_ALLOW_PRIVATE", False))


def _unsafe_reason(address: str) -> str:
    """Why an address may not be called ("" when it may): private, loopback, link-local, multicast, reserved,
    unspecified or otherwise not globally routable (IPv4-mapped IPv6 judged as its IPv4 address)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for what in ("loopback", "link_local", "multicast", "reserved", "unspecified", "private"):
        if getattr(ip, f"is_{what}"):
            return f"{ip} is a {what.replace('_', '-')} address"
    if not ip.is_global:
        return f"{ip} is not a public address"
    return ""


def _literal_ip(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def resolve_webhook_target(host: str, port: int) -> list[str]:
    """The addresses to connect to for `host`, every one of them public (unless WAYMARK_WEBHOOKS_ALLOW_PRIVATE).
    Raises UnsafeTarget when any is not, OSError when the name does not resolve."""
    literal = _literal_ip(host)
    if literal is not None:
        addresses = [literal]
    else:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not _allow_private():
        for address in addresses:
            reason = _unsafe_reason(address)
            if reason:
                raise UnsafeTarget(f"{host} is refused: {reason}")
    return addresses


def _port(parts) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def _clean_url(url: str) -> str:
    url = (url or "").strip()
    try:
        parts = urlsplit(url)
        port = _port(parts)
    except ValueError:
        raise Invalid("the endpoint URL must be an http:// or https:// URL", code="invalid_url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid("the endpoint URL must be an http:// or https:// URL", code="invalid_url")
    if len(url) > 500:
        raise Invalid("the endpoint URL has at most 500 characters", code="too_long")
    try:
        resolve_webhook_target(parts.hostname, port)
    except UnsafeTarget as exc:
        raise Invalid(f"{exc}; webhooks go to public addresses only", code="unsafe_url") from None
    except (OSError, UnicodeError):
        pass  # a name that does not resolve yet is checked again at every delivery
    return url


def webhook_endpoint_create(*, actor: Actor, url: str, events: list[str]) -> tuple[WebhookEndpoint, str]:
    """Admins register an endpoint; returns it and its signing secret (shown to the admin once)."""
    user = require_role(actor, Role.ADMIN, doing="registering a webhook endpoint", code="admin_required")
    url = _clean_url(url)
    events = sorted(set(events or []))
    unknown = sorted(set(events) - set(WebhookEvent.values))
    if not events or unknown:
        raise Invalid(f"choose events among {', '.join(WebhookEvent.values)}", code="invalid_events")
    secret = webhook_secret()
    with transaction.atomic(durable=True):
        endpoint = WebhookEndpoint.objects.create(url=url, secret=secret, events=events, created_by=user)
        audit_record(actor=actor, verb="webhook_endpoint.create", target=endpoint, after={"url": url, "events": events})
    return endpoint, secret


def webhook_endpoint_set_active(*, actor: Actor, endpoint: WebhookEndpoint, active: bool) -> WebhookEndpoint:
    require_role(actor, Role.ADMIN, doing="changing a webhook endpoint", code="admin_required")
    with transaction.atomic(durable=True):
        locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        if locked.active != active:
            locked.active = active
            locked.save(update_fields=["active"])
            audit_record(
                actor=actor,
                verb="webhook_endpoint.set_active",
                target=locked,
                before={"active": not active},
                after={"active": active},
            )
    return locked


def _due(now: datetime):
    """Pending deliveries due at `now` that no attempt holds (a lease ending exactly now has run out)."""
    return WebhookDelivery.objects.filter(
        lease_free(now, ended_at_expiry=True), status=DeliveryStatus.PENDING, due_at__lte=now
    )


def _claim(delivery_id: int, now: datetime, worker: str | None = None) -> WebhookDelivery | None:
    """Take the lease of a due delivery for its next attempt (WEBHOOK_CLAIM). A claim that finds more attempts
    counted than logged first logs the attempts whose worker stopped before recording them (LOST_ATTEMPT, at the time
    their lease began); a delivery that has used WEBHOOK_MAX_ATTEMPTS attempts ends `failed` with the reason instead
    (None: nothing to send)."""
    worker = worker or lease_owner()
    with transaction.atomic(durable=True):
        delivery = (
            _due(now).select_for_update(skip_locked=True).select_related("endpoint").filter(pk=delivery_id).first()
        )
        if delivery is None:
            return None
        logged = set(WebhookAttempt.objects.filter(delivery=delivery).values_list("number", flat=True))
        lost = [number for number in range(1, delivery.attempts + 1) if number not in logged]
        if lost:
            ended = delivery.lease_expires_at or now
            claimed_at = min(ended - WEBHOOK_CLAIM, now)  # its lease's start (earlier, when a take-over ended it early)
            WebhookAttempt.objects.bulk_create(
                [
                    WebhookAttempt(delivery=delivery, number=number, attempted_at=claimed_at, error=LOST_ATTEMPT)
                    for number in lost
                ]
            )
            delivery.last_status_code, delivery.last_error = None, LOST_ATTEMPT
        if delivery.attempts >= WEBHOOK_MAX_ATTEMPTS:
            delivery.status = DeliveryStatus.FAILED
            delivery.last_error = f"gave up after {delivery.attempts} attempts: {delivery.last_error or LOST_ATTEMPT}"
            lease_clear(delivery)
            delivery.save(update_fields=["status", "last_status_code", "last_error", "lease_owner", "lease_expires_at"])
            return None
        delivery.attempts += 1
        if not lease_claim(
            WebhookDelivery.objects.filter(pk=delivery.pk),
            owner=worker,
            seconds=WEBHOOK_CLAIM,
            now=now,
            ended_at_expiry=True,
            attempts=delivery.attempts,
            last_status_code=delivery.last_status_code,
            last_error=delivery.last_error,
        ):
            return None  # not reached: the row is locked and its lease free
    return delivery


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to an address resolved and vetted beforehand (no second lookup an attacker's DNS could change)."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """POST once to the vetted address of `url`; redirects are never followed (a 3xx is a failed attempt)."""
    parts = urlsplit(url)
    try:
        host, port = parts.hostname or "", _port(parts)
        addresses = resolve_webhook_target(host, port)
    except UnsafeTarget as exc:
        return None, str(exc)[:500]
    except (OSError, UnicodeError, ValueError) as exc:
        return None, f"cannot resolve {parts.hostname}: {exc}"[:500]
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection_class = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
    connection = connection_class(host, port, address=addresses[0], timeout=WEBHOOK_TIMEOUT_SECONDS)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read(64 * 1024)
        status = response.status
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return None, (str(exc) or type(exc).__name__)[:500]
    finally:
        connection.close()
    if 200 <= status < 300:
        return status, ""
    if 300 <= status < 400:
        return status, f"HTTP {status}: redirects are not followed"
    return status, f"HTTP {status}"


def webhook_delivery_attempt(
    *, delivery_id: int, now: datetime | None = None, worker: str | None = None
) -> WebhookDelivery | None:
    """Send one due delivery (outside any transaction) under its lease, log the attempt, release the lease and
    schedule a retry with backoff on failure. None when the delivery is not due (sent, failed, held by another
    attempt or waiting for its next one). `worker`: the lease's owner (`common.liveness.lease_owner`; a fresh one by
    default).

    At least once: a worker that dies after the receiver got the request but before the attempt is recorded leaves
    its lease to run out (WEBHOOK_CLAIM), or to be ended when its process is known dead; the next claim logs the
    attempt as lost and sends again with the same `webhook-id` (receivers drop duplicates by it). Claims are bounded
    by WEBHOOK_MAX_ATTEMPTS (see _claim).

    Delivery bookkeeping (attempt rows, statuses) writes no audit event: the attempt log is its record."""
    now = now or timezone.now()
    worker = worker or lease_owner()
    delivery = _claim(delivery_id, now, worker)
    if delivery is None:
        return None
    body = webhook_body(delivery.payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Waymark-Webhooks/1",
        "X-Waymark-Event": delivery.event,
        "X-Waymark-Delivery": str(delivery.pk),
        **webhook_headers(delivery.endpoint.secret, message_id=webhook_id(delivery.pk), timestamp=now, body=body),
    }
    started = time.monotonic()
    status_code, error = _post(delivery.endpoint.url, body, headers)
    duration_ms = int((time.monotonic() - started) * 1000)
    ok = status_code is not None and 200 <= status_code < 300
    finished = timezone.now()
    retry_in: timedelta | None = None
    number = delivery.attempts
    with transaction.atomic(durable=True):
        current = WebhookDelivery.objects.select_for_update().get(pk=delivery.pk)
        # A later claim may have logged this attempt as lost (our lease ran out): give it its result.
        WebhookAttempt.objects.update_or_create(
            delivery=current,
            number=number,
            defaults={"attempted_at": now, "status_code": status_code, "error": error, "duration_ms": duration_ms},
        )
        held = current.lease_owner == owner_name(worker) and current.attempts == number
        if ok:
            if current.status != DeliveryStatus.SENT:
                current.status, current.sent_at = DeliveryStatus.SENT, finished
        elif current.status != DeliveryStatus.PENDING or not held:
            return current  # another attempt holds it since, or the delivery ended: it decides what comes next
        elif number >= WEBHOOK_MAX_ATTEMPTS:
            current.status = DeliveryStatus.FAILED
        else:
            retry_in = webhook_backoff(number)
            current.due_at = now + retry_in
        if held:
            lease_clear(current)  # a newer attempt's lease is its own to release
        current.last_status_code = status_code
        current.last_error = error
        current.save(
            update_fields=[
                "last_status_code", "last_error", "status", "sent_at", "due_at", "lease_owner", "lease_expires_at"
            ]
        )  # fmt: skip
        if retry_in is not None:
            transaction.on_commit(partial(_enqueue_deliveries, [current.pk], retry_in.total_seconds()))
    return current


def webhook_deliveries_due(now: datetime | None = None, limit: int = 100) -> list[int]:
    """Pending deliveries due and not held by an attempt (for the periodic sweep that recovers lost retries and the
    attempts of dead workers)."""
    return list(_due(now or timezone.now()).order_by("due_at").values_list("pk", flat=True)[:limit])


def webhook_deliveries_take_over(delivery_ids: list[int]) -> None:
    """common.leases' take-over of deliveries whose worker process died (their leases just ended): try them now."""
    _enqueue_deliveries(list(delivery_ids))
