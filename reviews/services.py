"""Every write in reviews: proposals, overrides, judgments, activation, rollback, queue leases and webhooks.

The promotion policy (DESIGN.md §5) lives here; the owning app's activation runs through the promotable registry
inside this module's transactions. Each public function is one durable transaction writing its audit event inside;
webhook deliveries are outbox rows of the same transaction, sent by a Celery task enqueued on commit.
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
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from accounts.models import User
from accounts.services import Actor, audit_record

from . import activations
from .errors import Conflict, Invalid, NotAllowed, NotFound
from .models import (
    PENDING_STATUSES,
    Activation,
    DeliveryStatus,
    Judgment,
    PromotionRequest,
    PromotionStatus,
    QueueLease,
    Verdict,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from .registry import PromotableKind, StaleActivation, UnknownCandidate, UnknownKind, get_kind

LEASE_DURATION = timedelta(minutes=5)
MAX_TEXT = 5000
WEBHOOK_MAX_ATTEMPTS = 6
WEBHOOK_BASE_DELAY = timedelta(seconds=30)
WEBHOOK_MAX_DELAY = timedelta(hours=1)
WEBHOOK_TIMEOUT_SECONDS = 5  # for the connection and for each read: a slow endpoint is a failed attempt
WEBHOOK_CLAIM = timedelta(minutes=2)  # a claimed attempt not recorded by then may be tried again
LOST_ATTEMPT = "no result: the worker stopped during this attempt"


def _after_expected_read(request: PromotionRequest) -> None:
    """Runs between reading the expected active version and the owning app's locked check (a seam for race tests)."""


# --- helpers ---------------------------------------------------------------------------------------------------------
def _text(value: str | None, *, what: str, code: str, required: bool = True) -> str:
    text = (value or "").strip()
    if required and not text:
        raise Invalid(f"{what} is required", code=code)
    if len(text) > MAX_TEXT:
        raise Invalid(f"{what} has at most {MAX_TEXT} characters", code="too_long")
    return text


def _promotable(key: str) -> PromotableKind:
    try:
        return get_kind(key)
    except UnknownKind as exc:
        raise Invalid(str(exc), code="unknown_kind") from None


def _user_of(actor: Actor) -> User | None:
    user = actor.user
    return user if user is not None and user.is_active else None


def _require_admin(actor: Actor, what: str) -> User:
    user = _user_of(actor)
    if user is None or not user.may_administer:
        raise NotAllowed(f"{what} needs the admin role", code="admin_required")
    return user


def _lock(request: PromotionRequest) -> PromotionRequest:
    return PromotionRequest.objects.select_for_update(of=("self",)).get(pk=request.pk)


def _close(request: PromotionRequest, status: PromotionStatus) -> None:
    request.status = status
    request.closed_at = timezone.now()
    request.save(update_fields=["status", "closed_at"])
    QueueLease.objects.filter(request=request).delete()


def gate_satisfied(request: PromotionRequest) -> bool:
    return request.gate_passing is True or request.is_overridden


def _mark_superseded(*, actor: Actor, locked: PromotionRequest, active_id: str | None) -> None:
    """Inside a transaction, with the request locked and pending: close it as superseded, audited."""
    before = locked.status
    _close(locked, PromotionStatus.SUPERSEDED)
    audit_record(
        actor=actor,
        verb="promotion.supersede",
        target=locked,
        before={"status": before, "replaces": locked.replaces_id},
        after={"status": locked.status, "active": active_id},
    )


def _supersede(*, actor: Actor, request_id: int, active_id: str | None) -> None:
    with transaction.atomic(durable=True):
        locked = PromotionRequest.objects.select_for_update().get(pk=request_id)
        if locked.is_pending:
            _mark_superseded(actor=actor, locked=locked, active_id=active_id)


def _label(kind: str, candidate_id: str | None, *, none: str = "no active version") -> str:
    """The kind's label of a candidate (`v3`, `#2 · 3fa9c1d`) for messages and audit payloads."""
    try:
        return get_kind(kind).label_of(candidate_id, none=none)
    except UnknownKind:
        return candidate_id or none


def _stale_conflict(request: PromotionRequest, active_id: str | None) -> Conflict:
    return Conflict(
        f"request #{request.pk} is stale: it replaces {_label(request.kind, request.replaces_id, none='nothing')} "
        f"but the active version is {_label(request.kind, active_id, none='none')}; propose again against the new "
        "active version",
        code="stale",
        details={"request": request.pk, "replaces": request.replaces_id, "active": active_id},
    )


def _supersede_if_stale(*, actor: Actor, request: PromotionRequest) -> None:
    """Before judging or overriding: a request whose replaced version is no longer active is superseded (409)."""
    if not request.is_pending:
        return
    active = _promotable(request.kind).current_active(request.parent_key)
    if active != request.replaces_id:
        _supersede(actor=actor, request_id=request.pk, active_id=active)
        raise _stale_conflict(request, active)


def promotion_supersede_stale(*, actor: Actor, kind: str, parent_key: str) -> int:
    """Supersede the pending requests of a parent whose replaced version is no longer active. Rows locked by
    another transaction are skipped: that transaction finds the staleness itself. Returns how many."""
    active = _promotable(kind).current_active(parent_key)
    with transaction.atomic(durable=True):
        stale = list(
            PromotionRequest.objects.select_for_update(skip_locked=True)
            .filter(kind=kind, parent_key=parent_key, status__in=PENDING_STATUSES)
            .exclude(replaces_id=active)
        )
        for request in stale:
            _mark_superseded(actor=actor, locked=request, active_id=active)
    return len(stale)


# --- propose ---------------------------------------------------------------------------------------------------------
def promotion_propose(
    *, actor: Actor, kind: str, candidate_id: str, rationale: str, is_rollback: bool = False
) -> PromotionRequest:
    """A reviewer or operator proposes a candidate; the request records the version it replaces and the gate."""
    user = _user_of(actor)
    if user is None or not user.may_propose:
        raise NotAllowed("proposing a promotion needs the reviewer or operator role", code="not_a_reviewer")
    rationale = _text(rationale, what="a rationale", code="rationale_required")
    promotable = _promotable(kind)
    candidate_id = str(candidate_id).strip()
    try:
        description = promotable.describe(candidate_id)
        gate = promotable.gate_evidence(candidate_id)
    except UnknownCandidate as exc:
        raise NotFound(str(exc) or f"no {kind} {candidate_id}", code="unknown_candidate") from None
    active = promotable.current_active(description.parent_key)
    if active == candidate_id:
        raise Conflict(f"{description.title} is already the active version", code="already_active")
    if is_rollback and activations.rollback_target(kind, description.parent_key, active) != candidate_id:
        raise Invalid(f"{description.title} is not the previously active version", code="not_rollback_target")
    try:
        with transaction.atomic(durable=True):
            request = PromotionRequest.objects.create(
                kind=kind,
                candidate_id=candidate_id,
                parent_key=description.parent_key,
                title=description.title[:200],
                parent_label=description.parent_label[:200],
                replaces_id=active,
                is_rollback=is_rollback,
                proposer=user,
                rationale=rationale,
                gate_snapshot=gate.as_json(),
                required_approvals=promotable.approvals_required,
            )
            audit_record(
                actor=actor,
                verb="promotion.propose",
                target=request,
                after={
                    "kind": kind,
                    "candidate": candidate_id,
                    "candidate_label": description.label or candidate_id,
                    "replaces": active,
                    "replaces_label": _label(kind, active, none="") or None,
                    "is_rollback": is_rollback,
                    "gate_passing": gate.passing,
                },
            )
    except IntegrityError:
        raise Conflict(f"{description.title} already has an open promotion request", code="already_open") from None
    return request


def promotion_withdraw(*, actor: Actor, request: PromotionRequest) -> PromotionRequest:
    user = _user_of(actor)
    if user is None or not user.may_withdraw(request):
        raise NotAllowed("only the proposer or an admin may withdraw a request", code="not_the_proposer")
    with transaction.atomic(durable=True):
        locked = _lock(request)
        if not locked.is_pending:
            raise Conflict(f"request #{locked.pk} is {locked.status}", code="not_open")
        _close(locked, PromotionStatus.WITHDRAWN)
        audit_record(actor=actor, verb="promotion.withdraw", target=locked, after={"status": locked.status})
    return locked


# --- judge, override, apply ------------------------------------------------------------------------------------------
def judgment_submit(*, actor: Actor, request: PromotionRequest, verdict: str, comment: str = "") -> PromotionRequest:
    """One reviewer's independent verdict. A rejection (with a reason) rejects the request; the approval that meets
    the policy applies the promotion in the same transaction. Stale requests become superseded (Conflict)."""
    user = _user_of(actor)
    if user is None or not user.may_judge:
        raise NotAllowed("judging needs the reviewer role", code="not_a_reviewer")
    if verdict not in Verdict.values:
        raise Invalid(f"verdict must be one of {', '.join(Verdict.values)}", code="invalid_verdict")
    comment = _text(comment, what="a reason for the rejection", code="reason_required", required=verdict == "reject")
    if request.proposer_id == user.pk:
        raise NotAllowed("the proposer of a request cannot judge it", code="proposer_cannot_judge")
    _supersede_if_stale(actor=actor, request=request)
    try:
        with transaction.atomic(durable=True):
            locked = _lock(request)
            if not locked.is_pending:
                raise Conflict(f"request #{locked.pk} is {locked.status}", code="not_open")
            try:
                with transaction.atomic():  # a savepoint: the database's one-judgment-per-reviewer constraint
                    Judgment.objects.create(request=locked, reviewer=user, verdict=verdict, comment=comment)
            except IntegrityError:
                raise Conflict("you have already judged this request", code="already_judged") from None
            audit_record(
                actor=actor,
                verb="judgment.submit",
                target=locked,
                after={"reviewer": user.username, "verdict": verdict, "comment": comment},
            )
            if verdict == Verdict.REJECT:
                before = locked.status
                _close(locked, PromotionStatus.REJECTED)
                audit_record(
                    actor=actor,
                    verb="promotion.reject",
                    target=locked,
                    before={"status": before},
                    after={"status": locked.status},
                )
            else:
                QueueLease.objects.filter(request=locked, holder=user).delete()
                _advance(actor=actor, request=locked)
    except StaleActivation as stale:
        _supersede(actor=actor, request_id=request.pk, active_id=stale.actual_active_id)
        raise _stale_conflict(request, stale.actual_active_id) from None
    return locked


def promotion_override(*, actor: Actor, request: PromotionRequest, reason: str) -> PromotionRequest:
    """An admin accepts a failing or missing gate with a written reason (shown wherever the request is)."""
    _require_admin(actor, "overriding a gate")
    reason = _text(reason, what="a reason for the override", code="reason_required")
    _supersede_if_stale(actor=actor, request=request)
    try:
        with transaction.atomic(durable=True):
            locked = _lock(request)
            if not locked.is_pending:
                raise Conflict(f"request #{locked.pk} is {locked.status}", code="not_open")
            if locked.gate_passing is True:
                raise Invalid("the gate passes; there is nothing to override", code="gate_passing")
            if locked.is_overridden:
                raise Conflict("the gate of this request is already overridden", code="already_overridden")
            locked.override_by = actor.user
            locked.override_reason = reason
            locked.overridden_at = timezone.now()
            locked.save(update_fields=["override_by", "override_reason", "overridden_at"])
            audit_record(
                actor=actor,
                verb="promotion.override",
                target=locked,
                before={"gate_passing": locked.gate_passing},
                after={"override_by": actor.user.username, "reason": reason},
            )
            _advance(actor=actor, request=locked)
    except StaleActivation as stale:
        _supersede(actor=actor, request_id=request.pk, active_id=stale.actual_active_id)
        raise _stale_conflict(request, stale.actual_active_id) from None
    return locked


def _advance(*, actor: Actor, request: PromotionRequest) -> None:
    """Inside the caller's transaction, with the request locked: apply when the policy is met."""
    approvals = request.judgments.filter(verdict=Verdict.APPROVE).count()
    if approvals < request.required_approvals:
        return
    if gate_satisfied(request):
        _apply(actor=actor, request=request)
    elif request.status == PromotionStatus.OPEN:
        request.status = PromotionStatus.APPROVED
        request.save(update_fields=["status"])
        audit_record(
            actor=actor,
            verb="promotion.approve",
            target=request,
            before={"status": PromotionStatus.OPEN},
            after={"status": request.status, "waiting_for": "a passing gate or an admin override"},
        )


def _record_activation(request: PromotionRequest) -> None:
    """The activation history row of an applied request, in the activation's transaction."""
    Activation.objects.create(
        kind=request.kind,
        parent_key=request.parent_key,
        version_id=request.candidate_id,
        replaced_id=request.replaces_id or "",
        request=request,
        activated_by=request.applied_by,
        activated_at=request.applied_at,
    )


def _apply(*, actor: Actor, request: PromotionRequest) -> None:
    """Inside the caller's transaction: the owning app moves its pointer (or raises StaleActivation), then the
    request is applied, audited and announced through the outbox."""
    expected = request.replaces_id
    _after_expected_read(request)
    _promotable(request.kind).activate(actor=actor, candidate_id=request.candidate_id, expected_active_id=expected)
    now = timezone.now()
    request.status = PromotionStatus.APPLIED
    request.applied_at = request.closed_at = now
    request.applied_by = actor.user
    request.save(update_fields=["status", "applied_at", "closed_at", "applied_by"])
    _record_activation(request)
    QueueLease.objects.filter(request=request).delete()
    audit_record(
        actor=actor,
        verb="promotion.apply",
        target=request,
        before={"active": expected, "label": _label(request.kind, expected, none="") or None},
        after={
            "active": request.candidate_id,
            "label": _label(request.kind, request.candidate_id),
            "is_rollback": request.is_rollback,
        },
    )
    _announce(actor=actor, request=request)


def _announce(*, actor: Actor, request: PromotionRequest) -> None:
    _outbox(request, actor)
    transaction.on_commit(
        partial(_supersede_after_commit, actor=actor, kind=request.kind, parent_key=request.parent_key)
    )


def _supersede_after_commit(*, actor: Actor, kind: str, parent_key: str) -> None:
    promotion_supersede_stale(actor=actor, kind=kind, parent_key=parent_key)


def rollback_emergency(*, actor: Actor, kind: str, parent_key: str, reason: str) -> PromotionRequest:
    """An admin alone puts the previously active version back, with a written reason; audited and announced."""
    user = _require_admin(actor, "an emergency rollback")
    reason = _text(reason, what="a reason for the rollback", code="reason_required")
    promotable = _promotable(kind)
    target = activations.rollback_target(kind, parent_key, promotable.current_active(parent_key))
    if target is None:
        raise Conflict(f"{parent_key} has no previously active version to roll back to", code="no_rollback_target")
    try:
        description = promotable.describe(target)
        gate = promotable.gate_evidence(target)
    except UnknownCandidate as exc:
        raise NotFound(str(exc), code="unknown_candidate") from None
    active = promotable.current_active(parent_key)
    now = timezone.now()
    try:
        with transaction.atomic(durable=True):
            request = PromotionRequest.objects.create(
                kind=kind,
                candidate_id=target,
                parent_key=parent_key,
                title=description.title[:200],
                parent_label=description.parent_label[:200],
                replaces_id=active,
                is_rollback=True,
                proposer=user,
                rationale=reason,
                gate_snapshot=gate.as_json(),
                override_by=user,
                override_reason=reason,
                overridden_at=now,
                required_approvals=0,
                status=PromotionStatus.APPLIED,
                applied_by=user,
                applied_at=now,
                closed_at=now,
            )
            _after_expected_read(request)
            promotable.activate(actor=actor, candidate_id=target, expected_active_id=active)
            _record_activation(request)
            audit_record(
                actor=actor,
                verb="promotion.rollback_emergency",
                target=request,
                before={"active": active, "label": _label(kind, active, none="") or None},
                after={"active": target, "label": description.label or target, "reason": reason},
            )
            _announce(actor=actor, request=request)
    except StaleActivation as stale:
        raise Conflict(
            f"{parent_key} changed meanwhile (active is now {_label(kind, stale.actual_active_id, none='none')}); "
            "reload and retry",
            code="stale",
            details={"active": stale.actual_active_id},
        ) from None
    return request


# --- queue leases ----------------------------------------------------------------------------------------------------
def queue_next(*, actor: Actor, kind: str = "") -> PromotionRequest | None:
    """Lease the next item for this reviewer: the one they already hold, else the oldest pending item they have not
    judged, did not propose and nobody else holds. Leases last LEASE_DURATION. None when nothing is left.

    Leases are queue bookkeeping, not a change of any reviewed state: they write no audit event."""
    user = _user_of(actor)
    if user is None or not user.may_judge:
        raise NotAllowed("the review queue needs the reviewer role", code="not_a_reviewer")
    now = timezone.now()
    with transaction.atomic(durable=True):
        mine = (
            QueueLease.objects.select_for_update()
            .filter(holder=user, expires_at__gt=now, request__status__in=PENDING_STATUSES)
            .select_related("request")
        )
        if kind:
            mine = mine.filter(request__kind=kind)
        held = mine.order_by("request__created_at").first()
        if held is not None:
            held.expires_at = now + LEASE_DURATION
            held.save(update_fields=["expires_at"])
            return held.request
        free = (
            PromotionRequest.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status__in=PENDING_STATUSES)
            .filter(Q(lease__isnull=True) | Q(lease__expires_at__lte=now))
            .exclude(proposer=user)
            .exclude(judgments__reviewer=user)
            .order_by("created_at", "id")
        )
        if kind:
            free = free.filter(kind=kind)
        taken: list[int] = []
        for _ in range(20):
            request = free.exclude(pk__in=taken).first()  # locks this one row only (LIMIT 1, SKIP LOCKED)
            if request is None:
                return None
            # Re-read under the row lock: a lease committed after this statement's snapshot still counts.
            if QueueLease.objects.filter(request=request, expires_at__gt=now).exclude(holder=user).exists():
                taken.append(request.pk)
                continue
            QueueLease.objects.update_or_create(
                request=request, defaults={"holder": user, "expires_at": now + LEASE_DURATION}
            )
            return request
    return None


def queue_release(*, actor: Actor, request: PromotionRequest) -> None:
    user = _user_of(actor)
    if user is None:
        raise NotAllowed("releasing a lease needs a user", code="not_a_reviewer")
    with transaction.atomic(durable=True):
        QueueLease.objects.filter(request=request, holder=user).delete()


# --- webhooks --------------------------------------------------------------------------------------------------------
def _outbox(request: PromotionRequest, actor: Actor) -> list[int]:
    """Inside the change's transaction: one delivery row per active endpoint subscribed to the event."""
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
    user = _require_admin(actor, "registering a webhook endpoint")
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
    _require_admin(actor, "changing a webhook endpoint")
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


def _claim(delivery_id: int, now: datetime) -> WebhookDelivery | None:
    """Take the next attempt of a due delivery (its claim window: WEBHOOK_CLAIM). A claim that finds more claims
    than attempt rows first logs the attempts whose worker stopped before recording them (LOST_ATTEMPT); a delivery
    that has used WEBHOOK_MAX_ATTEMPTS claims ends `failed` with the reason instead (None: nothing to send)."""
    with transaction.atomic(durable=True):
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .select_related("endpoint")
            .filter(pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
            .first()
        )
        if delivery is None:
            return None
        logged = set(WebhookAttempt.objects.filter(delivery=delivery).values_list("number", flat=True))
        lost = [number for number in range(1, delivery.attempts + 1) if number not in logged]
        if lost:
            claimed_at = min(delivery.next_attempt_at - WEBHOOK_CLAIM, now)  # when the lost attempt's claim began
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
            delivery.save(update_fields=["status", "last_status_code", "last_error"])
            return None
        delivery.attempts += 1
        delivery.next_attempt_at = now + WEBHOOK_CLAIM
        delivery.save(update_fields=["attempts", "next_attempt_at", "last_status_code", "last_error"])
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


def webhook_delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> WebhookDelivery | None:
    """Send one due delivery (outside any transaction), log the attempt, schedule a retry with backoff on failure.
    None when the delivery is not due (sent, failed, claimed or waiting for its next attempt).

    At least once: a worker that dies after the receiver got the request but before the attempt is recorded leaves
    the claim to run out (WEBHOOK_CLAIM); the next claim logs the attempt as lost and sends again with the same
    `webhook-id` (receivers drop duplicates by it). Claims are bounded by WEBHOOK_MAX_ATTEMPTS (see _claim).

    Delivery bookkeeping (attempt rows, statuses) writes no audit event: the attempt log is its record."""
    now = now or timezone.now()
    delivery = _claim(delivery_id, now)
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
        # A later claim may have logged this attempt as lost (we outlived the claim window): give it its result.
        WebhookAttempt.objects.update_or_create(
            delivery=current,
            number=number,
            defaults={"attempted_at": now, "status_code": status_code, "error": error, "duration_ms": duration_ms},
        )
        if ok:
            if current.status != DeliveryStatus.SENT:
                current.status, current.sent_at = DeliveryStatus.SENT, finished
        elif current.status != DeliveryStatus.PENDING or current.attempts != number:
            return current  # another attempt was claimed since, or the delivery ended: it decides what comes next
        elif number >= WEBHOOK_MAX_ATTEMPTS:
            current.status = DeliveryStatus.FAILED
        else:
            retry_in = webhook_backoff(number)
            current.next_attempt_at = now + retry_in
        current.last_status_code = status_code
        current.last_error = error
        current.save(update_fields=["last_status_code", "last_error", "status", "sent_at", "next_attempt_at"])
        if retry_in is not None:
            transaction.on_commit(partial(_enqueue_deliveries, [current.pk], retry_in.total_seconds()))
    return current


def webhook_deliveries_due(now: datetime | None = None, limit: int = 100) -> list[int]:
    """Pending deliveries whose next attempt is due (for the periodic sweep that recovers lost retries)."""
    now = now or timezone.now()
    return list(
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
