"""Every write in accounts, and `audit_record`, the one helper every service uses to write its audit event."""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import login as auth_login
from django.contrib.auth.models import Group
from django.db import models, transaction
from django.utils import timezone

from common.text import plain_identifier_error

from . import throttle, token_cache
from .models import ApiToken, AuditEvent, User
from .request_context import current_request_id
from .roles import RESTRICTED_SCOPES, SCOPES, Role, require_role, scope_requirement, scopes_allowed_for
from .tokens import (
    INACTIVE_USER,
    MALFORMED,
    MAX_EXPIRY_DAYS,
    REVOKED,
    UNKNOWN,
    WRONG_SECRET,
    Refusal,
    digest_secret,
    expired_refusal,
    new_token,
    split_token,
)

log = logging.getLogger("waymark.auth")


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
    """Write one audit event. Must run inside the transaction of the change it records. Inside `audit_batch` the
    event is written with the batch's others at its end (its pk is set then)."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change it records")
    if isinstance(target, tuple):
        target_type, target_id = target
        label = ""
    else:
        target_type, target_id, label = target._meta.label_lower, str(target.pk), str(target)[:200]
    event = AuditEvent(
        actor_user=actor.user,
        actor_token=actor.token,
        verb=verb,
        target_type=target_type,
        target_id=str(target_id)[:120],
        target_label=label,
        before=before,
        after=after,
        request_id=current_request_id.get(),
    )
    batch = _BATCH.get()
    # Batched only at the batch's own savepoint level: an event recorded in a savepoint opened since is written at
    # once, so a rollback to that savepoint takes it with the change it records.
    if batch is not None and batch[1] is connection and _savepoints(connection) == batch[2]:
        batch[0].append(event)
    else:
        event.save(force_insert=True)
    return event


def _savepoints(connection: Any) -> int:
    """How many savepoints the open transaction has (an atomic block without one, savepoint=False, counts none)."""
    return sum(1 for sid in connection.savepoint_ids if sid is not None)


_BATCH: ContextVar[tuple[list[AuditEvent], Any, int] | None] = ContextVar("audit_batch", default=None)


@contextlib.contextmanager
def audit_batch() -> Iterator[None]:
    """The audit events recorded in the block are written in one INSERT at its end, inside the caller's transaction
    (which must be open), rather than one INSERT each (an evolution round's record writes three). Nothing is
    written when the block raises: its transaction is rolled back anyway."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit_batch must run inside the transaction of the changes it records")
    events: list[AuditEvent] = []
    token = _BATCH.set((events, connection, _savepoints(connection)))
    try:
        yield
    finally:
        _BATCH.reset(token)
    if events:
        AuditEvent.objects.bulk_create(events)


def system_audit_record(**event: Any) -> AuditEvent:
    """audit_record by the system actor: the callback common's mechanisms write with (common.leases' take-over of
    dead workers' leases), as common imports no app."""
    return audit_record(actor=Actor.system(), **event)


def api_token_create(
    *, actor: Actor, user: User, name: str, scopes: list[str], expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token for `user`, valid until `expires_at` (None: until it is revoked); returns it with its plaintext,
    which is never stored and shown once."""
    name = name.strip()
    if not name:
        raise ValueError("a token needs a name")
    if len(name) > 100:
        raise ValueError("a token name has at most 100 characters")
    if problem := plain_identifier_error(name):
        raise ValueError(f"a token name {problem}")
    if not scopes:
        raise ValueError("a token needs at least one scope")
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(unknown)}")
    if not user.is_active:
        raise ValueError(f"user {user.username} is inactive and cannot hold tokens")
    refused = sorted(set(scopes) - set(scopes_allowed_for(user)))
    if refused:
        needs = ", ".join(f"{scope} needs {scope_requirement(scope)}" for scope in refused)
        raise ValueError(f"scope(s) not allowed for {user.username}: {needs}")
    _check_expiry(expires_at)
    plaintext, prefix, digest = new_token()
    with transaction.atomic(durable=True):
        token = ApiToken.objects.create(
            user=user, name=name[:100], prefix=prefix, digest=digest, scopes=sorted(scopes), expires_at=expires_at
        )
        audit_record(
            actor=actor,
            verb="api_token.create",
            target=token,
            after={
                "name": token.name,
                "scopes": token.scopes,
                "expires_at": expires_at.isoformat() if expires_at is not None else None,
            },
        )
    return token, plaintext


def _check_expiry(expires_at: datetime | None) -> None:
    """ValueError unless `expires_at` is None or an aware time in the future, at most MAX_EXPIRY_DAYS from now."""
    if expires_at is None:
        return
    if not isinstance(expires_at, datetime):
        raise ValueError("a token's expiry must be a date and time")
    if timezone.is_naive(expires_at):
        raise ValueError("a token's expiry needs a time zone")
    now = timezone.now()
    if expires_at <= now:
        raise ValueError("a token's expiry must be in the future")
    if expires_at > now + timedelta(days=MAX_EXPIRY_DAYS):
        raise ValueError(f"a token expires at most {MAX_EXPIRY_DAYS} days after it is created")


def api_token_revoke(*, actor: Actor, token: ApiToken) -> ApiToken:
    with transaction.atomic(durable=True):
        locked = ApiToken.objects.select_for_update().get(pk=token.pk)
        if locked.revoked_at is None:
            locked.revoked_at = timezone.now()
            locked.save(update_fields=["revoked_at"])
            audit_record(
                actor=actor,
                verb="api_token.revoke",
                target=locked,
                before={"revoked_at": None},
                after={"revoked_at": locked.revoked_at.isoformat()},
            )
    return locked


def api_token_authenticate(plaintext: str) -> ApiToken | None:
    """The active token for a plaintext, or None (api_token_check says why)."""
    checked = api_token_check(plaintext)
    return None if type(checked) is Refusal else checked


def api_token_check(plaintext: str) -> ApiToken | Refusal:
    """The active token for a plaintext, or why it is refused (accounts.tokens.Refusal). Served from the process's
    token cache when it holds the token (accounts.token_cache: no query); its last-used time is written later, in
    batches. A token revoked or expired is refused for good: its prefix is remembered, and later attempts with it are
    answered without an HMAC or a query. A token expires at its `expires_at` (refused from that instant on), checked
    on every call, from the cache too.

    A restricted scope (roles.RESTRICTED_SCOPES: role-bound, or agent-only) works only while its user may still hold
    it: the returned token's `scopes` leave out the ones the user may not hold now (in memory; the stored row is
    unchanged), e.g. a role lost, or an agent-only scope on a token that belongs to a person."""
    parts = split_token(plaintext.strip())
    if parts is None:
        return MALFORMED
    prefix, secret = parts
    refusal = token_cache.tokens.refused(prefix)
    if refusal is not None:
        return refusal
    digest = digest_secret(secret)
    key = f"{prefix}:{digest}"
    version = token_cache.tokens.version()  # read before the row: a later change bumps it (token_cache.put)
    token = token_cache.tokens.get(key, version)
    if token is None:
        token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
        if token is None:
            return UNKNOWN
        if token.revoked_at is not None:
            return _refused_for_good(prefix, REVOKED)
        if token.expires_at is not None and token.expired():
            return _refused_for_good(prefix, expired_refusal(token.expires_at))
        if not hmac.compare_digest(token.digest, digest):
            return WRONG_SECRET
        if not token.user.is_active:
            return INACTIVE_USER
        if any(scope in RESTRICTED_SCOPES for scope in token.scopes):
            allowed = set(scopes_allowed_for(token.user))
            token.scopes = [scope for scope in token.scopes if scope not in RESTRICTED_SCOPES or scope in allowed]
        token_cache.tokens.put(key, token, version)
    elif token.expires_at is not None and token.expired():  # cached while it was still valid
        return _refused_for_good(prefix, expired_refusal(token.expires_at))
    token_cache.tokens.used(token)
    return token


def _refused_for_good(prefix: str, refusal: Refusal) -> Refusal:
    token_cache.tokens.refuse(prefix, refusal)
    return refusal


# --- agent identities -------------------------------------------------------------------------------------------
class AgentRefused(ValueError):
    """The name is taken or invalid (an actor without the operator role: roles.RoleRequired)."""


def agent_create(*, actor: Actor, name: str) -> User:
    """An operator creates an agent identity: a user with `is_agent`, no password (it cannot log in) and no roles,
    whose tokens alone may hold the agent-only scopes (roles.AGENT_SCOPES). Audited `agent.create`; what the
    agent's tokens do is audited with the agent as actor, so it has its own trail. `actor` None user: the system
    (management commands, the demo seed)."""
    from django.contrib.auth.validators import UnicodeUsernameValidator
    from django.core.exceptions import ValidationError

    require_role(actor, Role.OPERATOR, doing="creating agent identities", system=True)
    name = (name or "").strip()
    if not name or len(name) > 150:
        raise AgentRefused("an agent needs a name of 1 to 150 characters")
    try:
        UnicodeUsernameValidator()(name)
    except ValidationError:
        raise AgentRefused("an agent name has only letters, digits and @ . + - _")
    if problem := plain_identifier_error(name):  # a Hangul filler is a letter to the validator above
        raise AgentRefused(f"an agent name {problem}")
    with transaction.atomic(durable=True):
        if User.objects.filter(username__iexact=name).exists():
            raise AgentRefused(f"the name {name!r} is taken")
        agent = User(username=name, is_agent=True)
        agent.set_unusable_password()
        agent.save()
        audit_record(actor=actor, verb="agent.create", target=agent, after={"username": name, "agent": True})
    return agent


WATCH_USER = "waymark-watch"


def system_user(name: str = WATCH_USER) -> User:
    """The service identity Waymark itself acts as where a row needs a user (the watch after activation proposes
    and applies rollbacks): an agent identity without password, roles or tokens, created on first use (inside the
    caller's transaction, audited)."""
    user = User.objects.filter(username=name).first()
    if user is None:
        user = User(username=name, is_agent=True)
        user.set_unusable_password()
        user.save()
        audit_record(actor=Actor.system(), verb="agent.create", target=user, after={"username": name, "system": True})
    return user


def ensure_roles() -> list[str]:
    """Create the role groups that are missing (idempotent; run after every migrate). Returns the names created.

    Bootstrap, like a migration: it writes no audit event (docs/decisions.md, accounts)."""
    created = []
    with transaction.atomic(durable=True):
        for role in Role:
            _, was_created = Group.objects.get_or_create(name=role.value)
            if was_created:
                created.append(role.value)
    return created


def user_create(
    *, actor: Actor, username: str, email: str, password: str, roles: list[Role], superuser: bool = False
) -> User:
    """A person's account with these roles (a superuser is staff too), audited as user.create (seed_demo's users)."""
    require_role(actor, Role.ADMIN, doing="creating a user", system=True)
    with transaction.atomic(durable=True):
        user = User(username=username, email=email, is_superuser=superuser, is_staff=superuser)
        user.set_password(password)
        user.save()
        user.groups.set([Group.objects.get_or_create(name=Role(role).value)[0] for role in roles])
        audit_record(
            actor=actor,
            verb="user.create",
            target=user,
            after={"username": username, "roles": [str(role) for role in roles], "superuser": superuser},
        )
    return user


def session_log_in(*, request, user: User, attempt: throttle.Attempt) -> None:
    """Log `user` in on this request (Django's session and last_login) and record the success."""
    auth_login(request, user)
    login_success_record(user=user, attempt=attempt)


# --- login ------------------------------------------------------------------------------------------------------
# Audit events of login attempts: actor system, target ("auth.username", the username typed), the username, the
# client address and whether the browser had the username's device cookie in `after`. The password is never recorded.
LOGIN_TARGET_TYPE = "auth.username"


def login_success_record(*, user: User, attempt: throttle.Attempt) -> None:
    """A successful login: clear what this browser counted (accounts.throttle) and audit it (the session and the
    device cookie are the view's business)."""
    username = user.get_username()
    throttle.clear_after_success(attempt)
    with transaction.atomic(durable=True):
        audit_record(
            actor=Actor.system(),
            verb="auth.login",
            target=(LOGIN_TARGET_TYPE, username),
            after={"username": username, "ip": attempt.ip, "user_id": user.pk, "known_device": attempt.known_device},
        )


def logout_record(*, user: User, ip: str) -> None:
    """A logout by a signed-in user, audited (the session is the view's business)."""
    with transaction.atomic(durable=True):
        audit_record(
            actor=Actor(user=user),
            verb="auth.logout",
            target=(LOGIN_TARGET_TYPE, user.get_username()),
            after={"username": user.get_username(), "ip": ip},
        )


def login_failure_record(*, attempt: throttle.Attempt) -> list[str]:
    """A failed login: count it (accounts.throttle), audit it, and audit the lockout it may start.
    Returns the kinds of lock this failure has just set."""
    username = attempt.username[:150]
    locked = throttle.count_failure(attempt)
    seen = {"username": username, "ip": attempt.ip, "known_device": attempt.known_device}
    with transaction.atomic(durable=True):
        audit_record(actor=Actor.system(), verb="auth.login_failed", target=(LOGIN_TARGET_TYPE, username), after=seen)
        if locked:
            audit_record(
                actor=Actor.system(),
                verb="auth.locked_out",
                target=(LOGIN_TARGET_TYPE, username),
                after={**seen, "locked": locked, "seconds": settings.WAYMARK_LOGIN_LOCKOUT_SECONDS},
            )
    if locked:
        log.warning(
            "login lockout started",
            extra={"username": username, "ip": attempt.ip, "locked": locked, "known_device": attempt.known_device},
        )
    return locked


def user_roles_set(*, actor: Actor, user: User, roles: list[Role]) -> list[str]:
    """Give `user` exactly these roles (an empty list: read-only). Audited when something changes.
    Returns the role names the user now holds."""
    require_role(actor, Role.ADMIN, doing="setting a user's roles", system=True)
    wanted = sorted({Role(role).value for role in roles})
    if wanted and user.is_agent:
        raise ValueError(f"{user.username} is an agent identity: agents hold no roles")
    with transaction.atomic(durable=True):
        locked = User.objects.select_for_update().get(pk=user.pk)
        role_names = [role.value for role in Role]
        current = sorted(locked.groups.filter(name__in=role_names).values_list("name", flat=True))
        if current != wanted:
            locked.groups.remove(*Group.objects.filter(name__in=current))
            locked.groups.add(*[Group.objects.get_or_create(name=name)[0] for name in wanted])
            audit_record(
                actor=actor, verb="user.roles_set", target=locked, before={"roles": current}, after={"roles": wanted}
            )
    user.__dict__.pop("_role_names", None)
    return wanted
