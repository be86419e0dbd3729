"""Reads in accounts that care about access or query counts: a user's tokens and the audit log."""

from __future__ import annotations

import base64
import binascii
import functools
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from common.fixed_queries import FixedQuery

from .models import ApiToken, AuditEvent, User, actor_label

SYSTEM_ACTOR = "system"
AUDIT_PAGE_SIZE = 50


def tokens_of(user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


def agents() -> QuerySet[User]:
    """The agent identities, by name."""
    return User.objects.filter(is_agent=True).order_by("username")


def agent_token(token_id: str) -> ApiToken:
    """A token of an agent identity (operators manage them); 404 for any other token or a bad id."""
    if not str(token_id).isdigit():
        raise Http404("no such agent token")
    return get_object_or_404(ApiToken.objects.select_related("user"), pk=int(token_id), user__is_agent=True)


def token_of_user(user: User, token_id: int) -> ApiToken:
    """The user's own token; 404 for anyone else's (no one learns which ids exist)."""
    return get_object_or_404(ApiToken, pk=token_id, user=user)


@dataclass
class ListedEvent:
    """An audit event as a list of the newest shows it: without its before/after documents (blinding sets them to
    None when it seals the event, as it does on an AuditEvent)."""

    id: int
    created_at: datetime
    verb: str
    target_type: str
    target_id: str
    target_label: str
    actor_label: str
    before: Any = None
    after: Any = None


_LATEST_COLUMNS = (
    "id", "created_at", "verb", "target_type", "target_id", "target_label",
    "actor_token_id", "actor_token__name", "actor_token__prefix", "actor_user__username",
)  # fmt: skip


def latest_audit_events(limit: int) -> list[ListedEvent]:
    """The newest `limit` audit events with their actors' labels (one query, compiled once per thread: the
    dashboard's); callers blind them for their viewer (accounts.blinding)."""
    events = []
    rows = _latest(limit).rows()
    for pk, created, verb, target_type, target_id, label, token_id, token_name, prefix, username in rows:
        actor = actor_label(token=(token_name, prefix) if token_id else None, username=username)
        events.append(ListedEvent(pk, created, verb, target_type, target_id, label, actor))
    return events


@functools.cache
def _latest(limit: int) -> FixedQuery:
    return FixedQuery(lambda: AuditEvent.objects.values_list(*_LATEST_COLUMNS)[:limit])


@dataclass(frozen=True)
class AuditFilters:
    actor: str = ""  # a username, or "system" for events with no user
    verb: str = ""  # prefix: "auth." matches auth.login, auth.login_failed, …
    target_type: str = ""
    target_id: str = ""
    date_from: date | None = None  # inclusive, UTC days
    date_to: date | None = None  # inclusive


@dataclass(frozen=True)
class AuditCursor:
    """Keyset position: the (created_at, id) of the last event shown; the next page starts strictly after it."""

    created_at: datetime
    id: int

    def encode(self) -> str:
        return base64.urlsafe_b64encode(f"{self.created_at.isoformat()}|{self.id}".encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> AuditCursor:
        """Raises ValueError for anything that is not a cursor this page made."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            stamp, _, ident = raw.partition("|")
            created_at = datetime.fromisoformat(stamp)
            if created_at.tzinfo is None:
                raise ValueError("naive time")
            return cls(created_at=created_at, id=int(ident))
        except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
            raise ValueError("not a valid cursor") from exc


@dataclass(frozen=True)
class AuditPage:
    events: list[AuditEvent]
    next_cursor: str | None


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def audit_events(filters: AuditFilters) -> QuerySet[AuditEvent]:
    events = AuditEvent.objects.select_related("actor_user", "actor_token")
    if filters.actor == SYSTEM_ACTOR:
        events = events.filter(actor_user__isnull=True, actor_token__isnull=True)
    elif filters.actor:
        events = events.filter(actor_user__username=filters.actor)
    if filters.verb:
        events = events.filter(verb__startswith=filters.verb)
    if filters.target_type:
        events = events.filter(target_type=filters.target_type)
    if filters.target_id:
        events = events.filter(target_id=filters.target_id)
    if filters.date_from:
        events = events.filter(created_at__gte=_day_start(filters.date_from))
    if filters.date_to:
        events = events.filter(created_at__lt=_day_start(filters.date_to + timedelta(days=1)))
    return events.order_by("-created_at", "-id")


def audit_page(
    filters: AuditFilters, *, after: AuditCursor | None = None, size: int = AUDIT_PAGE_SIZE, hide: Q | None = None
) -> AuditPage:
    """One page of events, newest first, in one query whatever the page holds; `hide` matches events left out
    (accounts.blinding.sealed_events), so the page is still full."""
    events = audit_events(filters)
    if hide is not None:
        events = events.exclude(hide)
    if after is not None:
        events = events.filter(Q(created_at__lt=after.created_at) | Q(created_at=after.created_at, id__lt=after.id))
    rows = list(events[: size + 1])
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        next_cursor = AuditCursor(created_at=rows[-1].created_at, id=rows[-1].id).encode()
    return AuditPage(events=rows, next_cursor=next_cursor)
