"""Verified API tokens cached in the process, so an agent's per-step call costs no database round trip.

An entry is keyed by the token's prefix and HMAC digest (never the plaintext) and holds what a request needs: the
token's fields, its effective scopes and its user's fields and role names. Entries are dropped everywhere at once
when anything they were built from changes: every change to a token, a user or a user's groups (model signals,
accounts.apps) writes a new value under one key of the shared cache (Redis, or the file cache of the embedded
default), the *auth version*. Each process reads that key at most once per WAYMARK_TOKEN_CACHE_CHECK_SECONDS (below
one second) and forgets its entries when the value changed, so a revoked token or a removed role stops working on
every web process within that time. An entry also expires after WAYMARK_TOKEN_CACHE_SECONDS. When the shared cache
cannot be read, nothing is cached: every call goes to the database, as before.

Tokens that can never work again — revoked or expired — are remembered by their prefix (`refused`), so a client
retrying one is answered without an HMAC or a query; such an entry needs no invalidation, since neither state can be
undone, and is forgotten with the rest (forget()) or when the table is full.

`last_used_at` is not written on the request path: the times are kept in the process and written in one statement
per token at most every WAYMARK_TOKEN_LAST_USED_FLUSH_SECONDS, after a response has been sent (request_finished).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, transaction
from django.db.models import Model
from django.db.models.base import ModelState

from common.local_copies import forgets, new_generation, shared_generation
from common.settings_snapshot import SettingsSnapshot

from .models import ApiToken, User
from .tokens import Refusal

# Read on every API call: kept as plain attributes (common/settings_snapshot.py).
_settings = SettingsSnapshot(
    "WAYMARK_TOKEN_CACHE_SECONDS",
    "WAYMARK_TOKEN_CACHE_CHECK_SECONDS",
    "WAYMARK_TOKEN_LAST_USED_FLUSH_SECONDS",
)

log = logging.getLogger("waymark.auth")
# What accounts.services.api_token_authenticate returns: other apps and config name the type through this alias.
VerifiedToken = ApiToken
VERSION_KEY = "waymark:auth:version"
_USER_FIELDS = tuple(field.attname for field in User._meta.concrete_fields if field.attname != "password")
_TOKEN_FIELDS = tuple(field.attname for field in ApiToken._meta.concrete_fields)


@dataclass(frozen=True)
class _Entry:
    token: ApiToken  # built once from the row's values (_TOKEN_FIELDS); never handed out, only copies of it
    scopes: tuple[str, ...]  # the effective scopes (api_token_authenticate may narrow the stored ones)
    user: User  # as token, from _USER_FIELDS (the password hash is never kept: it stays deferred)
    version: str
    expires: float


class TokenCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._version: str | None = None
        self._checked = float("-inf")
        self._used: dict[int, float] = {}  # token id → time.time() of its last call, written as a datetime
        self._flushed = time.monotonic()
        self._refused: dict[str, Refusal] = {}  # prefix → why: tokens revoked or expired, for good

    # --- the auth version ------------------------------------------------------------------------------------------
    def version(self) -> str | None:
        """The shared auth version, read at most once per check interval; None when the shared cache is down."""
        if not _settings.WAYMARK_TOKEN_CACHE_SECONDS:
            return None
        now = time.monotonic()
        if now - self._checked < _settings.WAYMARK_TOKEN_CACHE_CHECK_SECONDS and self._version is not None:
            return self._version
        try:
            version = shared_generation(VERSION_KEY)
        except Exception:
            log.warning("auth version unreadable: token cache bypassed", exc_info=True)
            version = None
        with self._lock:
            if version != self._version:
                self._entries.clear()
            self._version, self._checked = version, now
        return version

    def forget(self) -> None:
        """Forget this process's entries (tests; and the process's own changes, at once)."""
        with self._lock:
            self._entries.clear()
            self._refused.clear()
            self._version, self._checked = None, float("-inf")

    def drop_unflushed(self) -> None:
        """Drop the last-used times not written yet (tests: their tokens were rolled back)."""
        with self._lock:
            self._used = {}

    # --- entries ---------------------------------------------------------------------------------------------------
    def get(self, key: str, version: str | None) -> ApiToken | None:
        """The cached token under `key` if it was cached at `version` (read with version() before the lookup)."""
        entry = self._entries.get(key)
        if version is None or entry is None or entry.version != version or entry.expires < time.monotonic():
            return None
        return _rebuild(entry)

    def put(self, key: str, token: ApiToken, version: str | None) -> None:
        """Cache a token read from the database after `version` was read: a change committed after that read bumps
        the version, so the entry cannot outlive it."""
        if version is None or not _settings.WAYMARK_TOKEN_CACHE_SECONDS:
            return
        user = User.from_db(DEFAULT_DB_ALIAS, _USER_FIELDS, [getattr(token.user, name) for name in _USER_FIELDS])
        user._role_names = frozenset(token.user.groups.values_list("name", flat=True))
        entry = _Entry(
            token=ApiToken.from_db(DEFAULT_DB_ALIAS, _TOKEN_FIELDS, [getattr(token, name) for name in _TOKEN_FIELDS]),
            scopes=tuple(token.scopes),
            user=user,
            version=version,
            expires=time.monotonic() + _settings.WAYMARK_TOKEN_CACHE_SECONDS,
        )
        with self._lock:
            if len(self._entries) >= settings.WAYMARK_TOKEN_CACHE_SIZE:
                self._entries.clear()
            self._entries[key] = entry

    # --- tokens refused for good ------------------------------------------------------------------------------------
    def refused(self, prefix: str) -> Refusal | None:
        """Why the token with this prefix was refused for good (revoked, expired), if this process has seen it."""
        return self._refused.get(prefix)

    def refuse(self, prefix: str, refusal: Refusal) -> None:
        with self._lock:
            if len(self._refused) >= settings.WAYMARK_TOKEN_CACHE_SIZE:
                self._refused.clear()
            self._refused[prefix] = refusal

    # --- last used -------------------------------------------------------------------------------------------------
    def used(self, token: ApiToken) -> None:
        with self._lock:
            self._used[token.pk] = time.time()

    def flush_used(self, *, force: bool = False) -> int:
        """Write the last-used times seen since the last flush (one UPDATE per token); the number written."""
        now = time.monotonic()
        if not force and now - self._flushed < _settings.WAYMARK_TOKEN_LAST_USED_FLUSH_SECONDS:
            return 0
        with self._lock:
            used, self._used, self._flushed = self._used, {}, now
        try:
            for pk, at in used.items():
                ApiToken.objects.filter(pk=pk).update(last_used_at=datetime.fromtimestamp(at, UTC))
        except DatabaseError:  # busy or down: keep the times for the next flush
            log.warning("last-used times not written; retried at the next flush", exc_info=True)
            with self._lock:
                for pk, at in used.items():
                    self._used.setdefault(pk, at)
            return 0
        return len(used)


def _rebuild(entry: _Entry) -> ApiToken:
    """Fresh model instances per request (requests never share a mutable object): copies of the entry's, each with
    its own attributes and ModelState as `from_db` leaves it (read from the default database, not adding), made
    without __init__ and its model signals, as Django's unpickling makes them: a fraction of the cost of building
    them from the row's values again."""
    user = copy_instance(entry.user)
    token = copy_instance(entry.token)
    ApiToken.user.field.set_cached_value(token, user)  # user_id is set already: only the related object is cached
    token.scopes = list(entry.scopes)  # the only mutable value either holds
    return token


def copy_instance(instance: Model) -> Model:
    """A copy of a model instance read from the default database: its own attributes and ModelState."""
    state = ModelState()
    state.db, state.adding = DEFAULT_DB_ALIAS, False
    clone = object.__new__(type(instance))
    attributes = instance.__dict__.copy()  # (a copy and one store: cheaper than update() into a fresh dict)
    attributes["_state"] = state
    clone.__dict__ = attributes
    return clone


def bump_version(**_kwargs) -> None:
    """Invalidate every process's cached tokens and session users (accounts.session_users) once the change commits (a
    signal receiver: a token, a user or a user's groups changed). After the commit, not before: a request reading
    the row meanwhile would otherwise cache the old row under the new version. This process forgets its own entries
    at once too."""
    _forget_all()
    transaction.on_commit(_bump)


def _bump() -> None:
    try:
        new_generation(VERSION_KEY)
    except Exception:
        log.error("auth version not bumped: cached tokens live until they expire", exc_info=True)
    _forget_all()


def _forget_all() -> None:
    from . import session_users  # (it builds on this module)

    tokens.forget()
    session_users.forget()


def flush_used_on_request_finished(**_kwargs) -> None:
    tokens.flush_used()


tokens = TokenCache()
forgets(tokens.forget)
forgets(tokens.drop_unflushed)
