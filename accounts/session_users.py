"""The user of a browser session, served from a per-process cache, so a page costs no query for who is asking.

Django's authentication middleware loads the session's user on every request, and the navigation and every
permission check then read that user's roles: two queries on every page before its own. The authentication backend
(accounts.backends.SessionUserBackend) asks here first. An entry holds what a request needs — the user's fields
without the password hash, its role names, and its *session auth hash* (the HMAC of the password hash that Django
compares with the one the session holds, so a changed password still ends the other sessions; the hash itself is
never kept) — under the auth version of accounts.token_cache, which every change to a user or a user's groups
replaces (model signals, accounts.apps). A deactivated user, a removed role or a changed password is seen at once
by this process and within WAYMARK_TOKEN_CACHE_CHECK_SECONDS by every other, as for API tokens; an entry also
expires after WAYMARK_TOKEN_CACHE_SECONDS. When the shared cache cannot be read nothing is kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS

from common.local_copies import forgets

from .models import User
from .token_cache import copy_instance, tokens

_FIELDS = tuple(field.attname for field in User._meta.concrete_fields if field.attname != "password")


@dataclass(frozen=True)
class _Entry:
    user: User  # never handed out: each request gets a copy
    version: str
    expires: float


_lock = threading.Lock()
_entries: dict[int, _Entry] = {}


def get(user_id: int, load: Callable[[int], User | None]) -> User | None:
    """The session's user: a copy of this process's entry when it was kept under the current auth version, else
    `load(user_id)` (the database; None for no such user or one that may not log in), then kept."""
    version = tokens.version()  # read before the row: a change committed after it replaces it
    entry = _entries.get(user_id)
    if version is not None and entry is not None and entry.version == version and entry.expires > time.monotonic():
        return copy_instance(entry.user)
    user = load(user_id)
    if user is None:
        return None
    user._role_names = frozenset(user.groups.values_list("name", flat=True))
    if version is not None and settings.WAYMARK_TOKEN_CACHE_SECONDS:
        kept = User.from_db(DEFAULT_DB_ALIAS, _FIELDS, [getattr(user, name) for name in _FIELDS])
        kept._role_names = user._role_names
        kept._session_auth_hash = user.get_session_auth_hash()
        with _lock:
            if len(_entries) >= settings.WAYMARK_TOKEN_CACHE_SIZE:
                _entries.clear()
            _entries[user_id] = _Entry(kept, version, time.monotonic() + settings.WAYMARK_TOKEN_CACHE_SECONDS)
    return user


@forgets
def forget() -> None:
    """Forget this process's entries (tests; and this process's own changes, at once: token_cache.bump_version)."""
    with _lock:
        _entries.clear()
