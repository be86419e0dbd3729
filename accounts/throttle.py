"""Login throttling in the cache (Redis in production, the shared file cache in the embedded default).

Failed attempts are counted per username and per client IP in a window of WAYMARK_LOGIN_LOCKOUT_SECONDS that starts
at the first failure. The failure that reaches WAYMARK_LOGIN_MAX_FAILURES sets a lock for that many seconds; while a
lock stands, attempts are refused before any password is checked. A successful login clears the username's count.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

from config.settings_snapshot import SettingsSnapshot

# Read on every API call: kept as plain attributes (config/settings_snapshot.py).
_settings = SettingsSnapshot("WAYMARK_TRUSTED_PROXY_COUNT")

KINDS = ("username", "ip")


@dataclass(frozen=True)
class Lockout:
    kind: str  # "username" or "ip"
    retry_after: int  # seconds until attempts are accepted again

    @property
    def message(self) -> str:
        minutes = max(1, -(-self.retry_after // 60))
        what = "this username" if self.kind == "username" else "your network address"
        unit = "minute" if minutes == 1 else "minutes"
        return f"Too many failed login attempts for {what}. Try again in {minutes} {unit}."


def _key(purpose: str, kind: str, value: str) -> str:
    digest = hashlib.sha256(value.casefold().encode()).hexdigest()[:32]
    return f"waymark:login:{purpose}:{kind}:{digest}"


def _subjects(username: str, ip: str) -> list[tuple[str, str]]:
    return [(kind, value) for kind, value in zip(KINDS, (username, ip), strict=True) if value]


def lockout_for(*, username: str, ip: str) -> Lockout | None:
    """The lock standing against this username or IP, if any (username first)."""
    subjects = _subjects(username, ip)
    keys = {_key("lock", kind, value): kind for kind, value in subjects}
    found = cache.get_many(list(keys))
    now = time.time()
    for key, kind in keys.items():
        until = found.get(key)
        if until is not None and until > now:
            return Lockout(kind=kind, retry_after=max(1, int(until - now + 0.999)))
    return None


def count_failure(*, username: str, ip: str) -> list[str]:
    """Count one failed attempt; the kinds ("username", "ip") that this failure has just locked."""
    window = settings.WAYMARK_LOGIN_LOCKOUT_SECONDS
    locked = []
    for kind, value in _subjects(username, ip):
        key = _key("failures", kind, value)
        cache.add(key, 0, timeout=window)
        try:
            failures = cache.incr(key)
        except ValueError:  # the window expired between add and incr
            cache.set(key, 1, timeout=window)
            failures = 1
        if failures >= settings.WAYMARK_LOGIN_MAX_FAILURES:
            cache.set(_key("lock", kind, value), time.time() + window, timeout=window)
            cache.delete(key)
            locked.append(kind)
    return locked


def clear_username(username: str) -> None:
    cache.delete_many([_key("failures", "username", username), _key("lock", "username", username)])


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or with WAYMARK_TRUSTED_PROXY_COUNT=n the n-th X-Forwarded-For entry from
    the right (each trusted proxy appends the address it received the request from)."""
    proxies = _settings.WAYMARK_TRUSTED_PROXY_COUNT
    if proxies > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies][:64]
    return request.META.get("REMOTE_ADDR", "")[:64]
