"""Every write in accounts, and `audit_record`, the one helper every service uses to write its audit event."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import models, transaction
from django.utils import timezone

from .models import ApiToken, AuditEvent, User
from .request_context import current_request_id
from .roles import SCOPES
from .tokens import digest_secret, new_token, split_token


@dataclass(frozen=True)
class Actor:
    """Who does something: a person, a person's API token, or the system (both None)."""

    user: User | None = None
    token: ApiToken | None = None

    @classmethod
    def system(cls) -> Actor:
        return cls()

    @classmethod
    def of_request(cls, request) -> Actor:
        token = getattr(request, "api_token", None)
        if token is not None:
            return cls(user=token.user, token=token)
        user = request.user if request.user.is_authenticated else None
        return cls(user=user)

    @property
    def label(self) -> str:
        if self.token is not None:
            return f"token {self.token.name}"
        return self.user.username if self.user is not None else "system"


def audit_record(
    *,
    actor: Actor,
    verb: str,
    target: models.Model | tuple[str, str],
    before: Any = None,
    after: Any = None,
) -> AuditEvent:
    """Write one audit event. Must run inside the transaction of the change it records."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change it records")
    if isinstance(target, tuple):
        target_type, target_id = target
        label = ""
    else:
        target_type, target_id, label = target._meta.label_lower, str(target.pk), str(target)[:200]
    return AuditEvent.objects.create(
        actor_user=actor.user,
        actor_token=actor.token,
        verb=verb,
        target_type=target_type,
        target_id=str(target_id),
        target_label=label,
        before=before,
        after=after,
        request_id=current_request_id.get(),
    )


def api_token_create(*, actor: Actor, user: User, name: str, scopes: list[str]) -> tuple[ApiToken, str]:
    """Create a token for `user`; returns it with its plaintext, which is never stored and shown once."""
    name = name.strip()
    if not name:
        raise ValueError("a token needs a name")
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(unknown)}")
    if not scopes:
        raise ValueError("a token needs at least one scope")
    plaintext, prefix, digest = new_token()
    with transaction.atomic(durable=True):
        token = ApiToken.objects.create(user=user, name=name[:100], prefix=prefix, digest=digest, scopes=sorted(scopes))
        audit_record(
            actor=actor,
            verb="api_token.create",
            target=token,
            after={"name": token.name, "scopes": token.scopes},
        )
    return token, plaintext


def api_token_revoke(*, actor: Actor, token: ApiToken) -> ApiToken:
    with transaction.atomic(durable=True):
        locked = ApiToken.objects.select_for_update().get(pk=token.pk)
        if locked.revoked_at is None:
            locked.revoked_at = timezone.now()
            locked.save(update_fields=["revoked_at"])
            audit_record(actor=actor, verb="api_token.revoke", target=locked)
    return locked


LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_token_authenticate(plaintext: str) -> ApiToken | None:
    """The active token for a plaintext, or None. Records the last-used time (at most once a minute)."""
    parts = split_token(plaintext.strip())
    if parts is None:
        return None
    prefix, secret = parts
    token = ApiToken.objects.select_related("user").filter(prefix=prefix, revoked_at__isnull=True).first()
    if token is None or not token.user.is_active or not hmac.compare_digest(token.digest, digest_secret(secret)):
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
