"""API rate limits in the cache (Redis in production, the shared file cache in the embedded default).

Fixed windows: a hit counts in the key of the window it falls in (`cache.add` then the atomic `cache.incr`), and the
key expires with its window. Two limits apply under /api/v1/ (accounts/api_auth.py):

- per token, on every authenticated call: WAYMARK_API_RATE_PER_TOKEN calls per WAYMARK_API_RATE_WINDOW_SECONDS —
  generous, sized for agents calling once per step;
- per client IP, on failed authentication that could be a guess (a missing, malformed or unknown token, or a wrong
  secret): WAYMARK_API_AUTH_FAILURES_PER_IP failures per window — strict; once reached, such attempts from that IP
  are refused until the window ends. A valid token from that IP is still served (only failing attempts are refused,
  so a broken or hostile client cannot get its neighbours behind the same address refused), and a revoked or expired
  token is answered 401 without counting (issue 30).

Over a limit the API answers 429 with the Error body (code `rate_limited`) and `Retry-After` in seconds.

So that an agent's per-step call makes no shared-cache round trip, each process keeps what it knows in memory
(`Counter`, one per scope and subject):

- Token calls are counted in the process and added to the shared count in one `incr` (a *flush*) on a subject's
  first call in a window, once a batch of calls is unflushed, once the last flush is older than
  WAYMARK_API_RATE_FLUSH_SECONDS, and on every call once the count is within a batch of the limit. The batch is
  WAYMARK_API_RATE_BATCH calls or a hundredth of the limit, whichever is larger (20 for the default 1,200 a minute;
  a limit raised a thousandfold flushes on time alone rather than every 20 calls). A call is refused when the shared
  count last read plus the process's unflushed calls pass the limit. Precision: one process alone is exact; with
  several, each process may accept the calls it has not flushed yet on a shared count that other processes have
  moved since it read it, so a token can exceed its limit by fewer than a batch per web process (at most
  P × (batch − 1) with P processes), never more.
- Failed authentications are written to the shared count at once (batch of one), every one of them. Whether an IP
  has reached its limit is read from the shared cache at most once per WAYMARK_API_RATE_CHECK_SECONDS per process
  and is known at once in the process that counted the failure: an IP blocked through another process is refused
  here within that time, and each process lets at most one more failed attempt through than the limit. Only a
  failing attempt reads or writes these counts: a valid token's call never touches them.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass, field

from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.cache.backends.redis import RedisCache

from .errors import ApiError
from .local_copies import forgets
from .settings_snapshot import SettingsSnapshot

# Read on every API call: kept as plain attributes (common/settings_snapshot.py).
_settings = SettingsSnapshot(
    "WAYMARK_API_RATE_FLUSH_SECONDS",
    "WAYMARK_API_RATE_CHECK_SECONDS",
    "WAYMARK_API_RATE_BATCH",
    "WAYMARK_API_RATE_PER_TOKEN",
    "WAYMARK_API_RATE_WINDOW_SECONDS",
    "WAYMARK_API_AUTH_FAILURES_PER_IP",
)

MAX_COUNTERS = 10_000  # subjects kept per process; past it, counters of ended windows are dropped
BATCH_SHARE_OF_LIMIT = 100  # a token's batch is at least a hundredth of its limit (token_batch)


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


@dataclass
class Counter:
    """What this process knows of one subject's count in one window."""

    start: int  # the window's start
    shared: int = 0  # the shared count as last read (this process's flushed hits included)
    unflushed: int = 0  # hits counted here and not yet added to the shared count
    read_at: float | None = None  # monotonic time of the last read or flush; None: never in this window
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def known(self) -> int:
        return self.shared + self.unflushed


class Counters:
    """The process's counters, one per (scope, subject), for the current window only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, str], Counter] = {}

    def get(self, scope: str, subject: str, start: int) -> Counter:
        counter = self._counters.get((scope, subject))
        if counter is not None and counter.start == start:
            return counter
        with self._lock:
            counter = self._counters.get((scope, subject))
            if counter is None or counter.start != start:
                if len(self._counters) >= MAX_COUNTERS:
                    self._counters = {key: c for key, c in self._counters.items() if c.start >= start}
                    if len(self._counters) >= MAX_COUNTERS:
                        self._counters.clear()
                counter = self._counters[(scope, subject)] = Counter(start)
            return counter

    def clear(self) -> None:
        """Forget everything counted here and not flushed (tests)."""
        with self._lock:
            self._counters.clear()


counters = Counters()
forgets(counters.clear)


def _flush(counter: Counter, key: str, window: int) -> None:
    """Add the unflushed hits to the shared count and read it back (the caller holds counter.lock)."""
    counter.shared = _add_to_shared(key, counter.unflushed, timeout=window + 1)
    counter.unflushed = 0
    counter.read_at = time.monotonic()


def _add_to_shared(key: str, amount: int, *, timeout: int) -> int:
    """Add `amount` to the shared count under `key` (created with `timeout`); the count after. On Redis one round trip
    (INCRBY and EXPIRE NX in one pipeline); elsewhere the cache API (add, then the atomic incr)."""
    backend = caches[DEFAULT_CACHE_ALIAS]
    if isinstance(backend, RedisCache):
        full_key = backend.make_and_validate_key(key)
        pipeline = _redis_client(backend).pipeline(transaction=False)
        pipeline.incrby(full_key, amount)
        pipeline.expire(full_key, timeout, nx=True)
        return int(pipeline.execute()[0])
    if cache.add(key, amount, timeout=timeout):
        return amount
    try:
        return cache.incr(key, amount)
    except ValueError:  # the key expired between add and incr
        cache.set(key, amount, timeout=timeout)
        return amount


def _redis_client(backend: RedisCache):
    """The redis-py client on Django's connection pool for this backend (one per thread, as Django's cache backends
    are), made once: Django makes a new one per cache call, which copies redis-py's ~170 response callbacks."""
    client = backend.__dict__.get("_waymark_rate_client")
    if client is None:
        client = backend.__dict__["_waymark_rate_client"] = backend._cache.get_client(write=True)
    return client


def hit(scope: str, subject: str, *, limit: int, window: int, batch: int = 1) -> int | None:
    """Count one hit; None while within `limit` hits per window, else the seconds until the window ends.

    With `batch` > 1 hits are added to the shared count in batches (see the module docstring); 1 writes each one."""
    start, remaining = _window(window)
    counter = counters.get(scope, subject, start)
    with counter.lock:
        counter.unflushed += 1
        due = (
            counter.read_at is None
            or counter.unflushed >= batch
            or counter.known + batch > limit
            or time.monotonic() - counter.read_at >= _settings.WAYMARK_API_RATE_FLUSH_SECONDS
        )
        if due:
            _flush(counter, _key(scope, subject, start), window)
        return remaining if counter.known > limit else None


def reached(scope: str, subject: str, *, limit: int, window: int) -> int | None:
    """Without counting: the seconds until the window ends if `limit` hits are already counted in it, else None.

    The shared count is read at most once per WAYMARK_API_RATE_CHECK_SECONDS; this process's own hits count at once."""
    start, remaining = _window(window)
    counter = counters.get(scope, subject, start)
    with counter.lock:
        stale = counter.read_at is None or (
            time.monotonic() - counter.read_at >= _settings.WAYMARK_API_RATE_CHECK_SECONDS
        )
        if stale:
            counter.shared = max(counter.shared, cache.get(_key(scope, subject, start)) or 0)
            counter.read_at = time.monotonic()
        return remaining if counter.known >= limit else None


# --- the API's two limits ----------------------------------------------------------------------------------------


def token_batch(limit: int) -> int:
    """The calls a process counts for a token before flushing: WAYMARK_API_RATE_BATCH, or 1% of a larger limit."""
    return max(_settings.WAYMARK_API_RATE_BATCH, limit // BATCH_SHARE_OF_LIMIT)


def check_token(token_id: int) -> None:
    """Count one authenticated call; RateLimited past the token's limit."""
    limit = _settings.WAYMARK_API_RATE_PER_TOKEN
    retry_after = hit(
        "token", str(token_id), limit=limit, window=_settings.WAYMARK_API_RATE_WINDOW_SECONDS, batch=token_batch(limit)
    )
    if retry_after is not None:
        raise RateLimited("too many requests for this token; retry after the window ends", retry_after)


def check_auth_failures(ip: str) -> None:
    """RateLimited while this IP has used up its failed authentications for the window (nothing is counted). Called
    for a failing attempt only (accounts.api_auth), before it is counted."""
    retry_after = reached(
        "authfail",
        ip,
        limit=_settings.WAYMARK_API_AUTH_FAILURES_PER_IP,
        window=_settings.WAYMARK_API_RATE_WINDOW_SECONDS,
    )
    if retry_after is not None:
        raise RateLimited("too many failed authentications from your network address", retry_after)


def count_auth_failure(ip: str) -> None:
    hit(
        "authfail",
        ip,
        limit=_settings.WAYMARK_API_AUTH_FAILURES_PER_IP,
        window=_settings.WAYMARK_API_RATE_WINDOW_SECONDS,
    )
