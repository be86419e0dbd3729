"""API rate limits in the cache (Redis in production, the shared file cache in the embedded default).

Fixed windows: a hit counts in the key of the window it falls in (`cache.add` then the atomic `cache.incr`), and the
key expires with its window. Two limits apply under /api/v1/ (config/auth.py):

- per token, on every authenticated call: WAYMARK_API_RATE_PER_TOKEN calls per WAYMARK_API_RATE_WINDOW_SECONDS —
  generous, sized for agents calling once per step;
- per client IP, on failed authentication (a missing, malformed, unknown or revoked token):
  WAYMARK_API_AUTH_FAILURES_PER_IP failures per window — strict; once reached, every call from that IP is refused
  before any token is looked at, valid or not, until the window ends.

Over a limit the API answers 429 with the Error body (code `rate_limited`) and `Retry-After` in seconds.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache

from .errors import ApiError


class RateLimited(ApiError):
    """429 with the Error body and a Retry-After header (config/api.py applies `headers`)."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(429, "rate_limited", message, {"retry_after": retry_after})
        self.retry_after = retry_after
        self.headers = {"Retry-After": str(retry_after)}


def _window(seconds: int) -> tuple[int, int]:
    """(the current window's start, seconds until it ends — at least 1)."""
    now = time.time()
    start = int(now // seconds) * seconds
    return start, max(1, math.ceil(start + seconds - now))


def _key(scope: str, subject: str, start: int) -> str:
    digest = hashlib.sha256(subject.encode()).hexdigest()[:32]
    return f"waymark:rate:{scope}:{digest}:{start}"


def hit(scope: str, subject: str, *, limit: int, window: int) -> int | None:
    """Count one hit; None while within `limit` hits per window, else the seconds until the window ends."""
    start, remaining = _window(window)
    key = _key(scope, subject, start)
    cache.add(key, 0, timeout=window + 1)
    try:
        count = cache.incr(key)
    except ValueError:  # the key expired between add and incr
        cache.set(key, 1, timeout=window + 1)
        count = 1
    return remaining if count > limit else None


def reached(scope: str, subject: str, *, limit: int, window: int) -> int | None:
    """Without counting: the seconds until the window ends if `limit` hits are already counted in it, else None."""
    start, remaining = _window(window)
    return remaining if (cache.get(_key(scope, subject, start)) or 0) >= limit else None


# --- the API's two limits ----------------------------------------------------------------------------------------


def check_token(token_id: int) -> None:
    """Count one authenticated call; RateLimited past the token's limit."""
    retry_after = hit(
        "token",
        str(token_id),
        limit=settings.WAYMARK_API_RATE_PER_TOKEN,
        window=settings.WAYMARK_API_RATE_WINDOW_SECONDS,
    )
    if retry_after is not None:
        raise RateLimited("too many requests for this token; retry after the window ends", retry_after)


def check_auth_failures(ip: str) -> None:
    """RateLimited while this IP has used up its failed authentications for the window (nothing is counted)."""
    retry_after = reached(
        "authfail",
        ip,
        limit=settings.WAYMARK_API_AUTH_FAILURES_PER_IP,
        window=settings.WAYMARK_API_RATE_WINDOW_SECONDS,
    )
    if retry_after is not None:
        raise RateLimited("too many failed authentications from your network address", retry_after)


def count_auth_failure(ip: str) -> None:
    hit(
        "authfail",
        ip,
        limit=settings.WAYMARK_API_AUTH_FAILURES_PER_IP,
        window=settings.WAYMARK_API_RATE_WINDOW_SECONDS,
    )
