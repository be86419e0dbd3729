"""Fair shares of ingest: at most so many ingest requests in flight per token and per agent, across every web process.

POST /api/v1/trajectories and the OTLP export each hold one *slot* of their token and one of their agent (the token's
user) while they read, validate and write a batch: WAYMARK_INGEST_CONCURRENT_PER_TOKEN and
WAYMARK_INGEST_CONCURRENT_PER_AGENT slots (0 turns a cap off). A request that finds either full answers 429 at once
(code `too_many_in_flight`, `Retry-After`), before its body is read, so a writer sending many big batches at a time
holds at most its share of the web threads and of their memory while every other writer goes on. Slots are counted
in the cache, so the caps hold across processes and machines:

- Redis (production): one sorted set per token and per agent, members the requests in flight, scored by when their
  slot expires. One Lua script drops expired members, checks both counts and takes both slots (all or none, atomic
  on the server, timed by the server's clock); releasing is one ZREM per set.
- The file cache (embedded default: web and worker on one machine): the same sets as dicts in the cache, changed
  under an exclusive lock on a file in the cache's directory (django.core.files.locks), so processes take turns.
- Any other cache (the tests' local memory): the same, under a lock of this process only.

A slot expires WAYMARK_INGEST_SLOT_SECONDS after it was taken, so a process that dies mid-request (kill -9, an OOM
kill) frees its writer's slots by then at the latest: a request is never counted forever. A request that outlives its
lease loses the slot early (its writer may then have one more batch in flight than the cap): the lease is set above
the longest ingest. The file cache culls entries past its MAX_ENTRIES, so there a set may vanish early too (its writer
then gets fresh slots: fail open). When the cache cannot be reached at all the request goes ahead uncounted (logged):
the shares protect writers from each other, not the server from its cache.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.redis import RedisCache
from django.core.files import locks
from django.http import HttpRequest

from .errors import ApiError
from .settings_snapshot import SettingsSnapshot

_settings = SettingsSnapshot(
    "WAYMARK_INGEST_CONCURRENT_PER_TOKEN", "WAYMARK_INGEST_CONCURRENT_PER_AGENT", "WAYMARK_INGEST_SLOT_SECONDS"
)
logger = logging.getLogger("waymark.fairshare")
RETRY_AFTER_SECONDS = 1  # a slot frees when a batch is written: typically within a second or two
KEY_PREFIX = "waymark:inflight"


class TooManyInFlight(ApiError):
    """429 with the Error body and Retry-After (config/api.py applies `headers`)."""

    def __init__(self, scope: str, limit: int) -> None:
        who = "this token" if scope == "token" else "this agent"
        super().__init__(
            429,
            "too_many_in_flight",
            f"{who} already has {limit} ingest request(s) in flight, its share; retry after Retry-After seconds",
            {"scope": scope, "limit": limit, "retry_after": RETRY_AFTER_SECONDS},
        )
        self.headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}


@dataclass(frozen=True)
class Share:
    key: str  # the cache key of the subject's set of slots
    scope: str  # "token" or "agent"
    limit: int


class Slots(Protocol):
    def take(self, shares: Sequence[Share], member: str, lease: float) -> Share | None:
        """Take one slot of every share for `member`, or none: the first full share (None: taken)."""

    def release(self, shares: Sequence[Share], member: str) -> None: ...


# --- Redis -----------------------------------------------------------------------------------------------------------

# KEYS: the sets. ARGV: lease (ms), member, then each set's limit. Returns 0 when taken, else the 1-based full set.
_TAKE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local lease = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) >= tonumber(ARGV[i + 2]) then
    return i
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + lease, ARGV[2])
  redis.call('PEXPIRE', key, lease)
end
return 0
"""


class RedisSlots:
    def __init__(self, backend: RedisCache) -> None:
        self._backend = backend
        self._client = backend._cache.get_client(write=True)  # redis-py on Django's pool (as common/ratelimit.py)
        self._take = self._client.register_script(_TAKE)

    def _keys(self, shares: Sequence[Share]) -> list[str]:
        return [self._backend.make_and_validate_key(share.key) for share in shares]

    def take(self, shares: Sequence[Share], member: str, lease: float) -> Share | None:
        lease_ms = max(1, math.ceil(lease * 1000))
        full = int(self._take(keys=self._keys(shares), args=[lease_ms, member, *(s.limit for s in shares)]))
        return shares[full - 1] if full else None

    def release(self, shares: Sequence[Share], member: str) -> None:
        pipeline = self._client.pipeline(transaction=False)
        for key in self._keys(shares):
            pipeline.zrem(key, member)
        pipeline.execute()


# --- any other cache: the sets as dicts, changed under a lock --------------------------------------------------------

_process_lock = threading.Lock()
_lock_files: dict[str, object] = {}


@contextlib.contextmanager
def _file_lock(directory: str) -> Iterator[None]:
    """An exclusive lock shared by every process using the file cache in `directory` (the caller holds
    _process_lock: threads of one process share the open file, which flock does not tell apart)."""
    handle = _lock_files.get(directory)
    if handle is None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        handle = _lock_files[directory] = open(Path(directory) / "waymark-inflight.lock", "ab")  # noqa: SIM115
    locks.lock(handle, locks.LOCK_EX)
    try:
        yield
    finally:
        locks.unlock(handle)


class CacheSlots:
    def __init__(self, backend: BaseCache) -> None:
        self._cache = backend
        self._directory = backend._dir if isinstance(backend, FileBasedCache) else None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _process_lock, _file_lock(self._directory) if self._directory else contextlib.nullcontext():
            yield

    def take(self, shares: Sequence[Share], member: str, lease: float) -> Share | None:
        now = time.time()
        with self._locked():
            held = {share.key: self._live(share.key, now) for share in shares}
            for share in shares:
                if len(held[share.key]) >= share.limit:
                    return share
            for share in shares:
                held[share.key][member] = now + lease
                self._cache.set(share.key, held[share.key], timeout=math.ceil(lease) + 1)
        return None

    def release(self, shares: Sequence[Share], member: str) -> None:
        now = time.time()
        with self._locked():
            for share in shares:
                held = self._live(share.key, now)
                if held.pop(member, None) is not None:
                    expires = max(held.values(), default=now)
                    self._cache.set(share.key, held, timeout=max(1, math.ceil(expires - now) + 1))

    def _live(self, key: str, now: float) -> dict[str, float]:
        return {member: expires for member, expires in (self._cache.get(key) or {}).items() if expires > now}


def slots_for(backend: BaseCache) -> Slots:
    """The slot store over `backend`, made once per backend instance (Django makes one per thread)."""
    store = backend.__dict__.get("_waymark_slots")
    if store is None:
        store = RedisSlots(backend) if isinstance(backend, RedisCache) else CacheSlots(backend)
        backend.__dict__["_waymark_slots"] = store
    return store


# --- ingest ----------------------------------------------------------------------------------------------------------


def ingest_shares(token_id: int, agent_id: int) -> list[Share]:
    shares = [
        Share(f"{KEY_PREFIX}:token:{token_id}", "token", _settings.WAYMARK_INGEST_CONCURRENT_PER_TOKEN),
        Share(f"{KEY_PREFIX}:agent:{agent_id}", "agent", _settings.WAYMARK_INGEST_CONCURRENT_PER_AGENT),
    ]
    return [share for share in shares if share.limit > 0]


@contextlib.contextmanager
def held(shares: Sequence[Share], *, slots: Slots | None = None) -> Iterator[None]:
    """One slot of every share for the duration of the block, or TooManyInFlight when one is full."""
    if not shares:
        yield
        return
    member = uuid.uuid4().hex
    try:
        store = slots or slots_for(caches[DEFAULT_CACHE_ALIAS])
        full = store.take(shares, member, float(_settings.WAYMARK_INGEST_SLOT_SECONDS))
    except Exception:  # the cache is down: ingest goes on without its shares rather than fail
        logger.warning("ingest shares unavailable: the request goes ahead uncounted", exc_info=True)
        yield
        return
    if full is not None:
        raise TooManyInFlight(full.scope, full.limit)
    try:
        yield
    finally:
        try:
            store.release(shares, member)
        except Exception:  # the slot expires with its lease
            logger.warning("ingest slot not released (it expires with its lease)", exc_info=True)


def ingest_slot(request: HttpRequest) -> contextlib.AbstractContextManager[None]:
    """The authenticated ingest request's slots (its token's and its agent's): `with ingest_slot(request): …`."""
    token = request.api_token  # set by accounts.api_auth.authenticate
    return held(ingest_shares(token.pk, token.user_id))
