"""Per-process copies of shared state, and the shared generation values that tell every process to drop them.

`Recent`: values a process read from somewhere shared (the database, the shared cache) and reuses for at most a
few seconds — a workspace card (graphs.cache), the procedures list's stamps (procedures.active_body).
`shared_generation`: a value in the shared cache that writers replace when what processes keep may have changed —
the auth version (accounts.token_cache), the closed days' generation (trajectories.closed_days).
`forgets` / `forget_all`: every per-process copy registers how to drop it (each `Recent` by itself), so one call
forgets them all — what a test does before it starts (tests/conftest.py), with no list of caches kept by hand.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

from django.core.cache import cache

_forgetters: list[Callable[[], None]] = []


def forgets[F: Callable[[], None]](clear: F) -> F:
    """Register `clear` as what drops one of this process's copies (usable as a decorator); see forget_all."""
    _forgetters.append(clear)
    return clear


def forget_all() -> None:
    """Drop every per-process copy that registered itself: the process then reads as a fresh one would."""
    for clear in tuple(_forgetters):
        clear()


class Recent[K, V]:
    """Key → the value last read for it, reused for at most `max_age` seconds; past `size` keys, all are dropped."""

    def __init__(self, max_age: float, size: int = 1024) -> None:
        self.max_age = max_age
        self.size = size
        self._items: dict[K, tuple[V, float]] = {}
        self._lock = threading.Lock()
        forgets(self.clear)

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is None or time.monotonic() - found[1] > self.max_age:
            return None
        return found[0]

    def put(self, key: K, value: V, *, read_at: float | None = None) -> None:
        """Keep `value`, read at `read_at` (time.monotonic(); now by default: pass when the read began)."""
        with self._lock:
            if len(self._items) >= self.size:
                self._items.clear()
            self._items[key] = (value, time.monotonic() if read_at is None else read_at)

    def forget(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def shared_generation(key: str) -> str:
    """The generation under `key` in the shared cache, made (at random) when there is none yet; whatever the cache
    raises is the caller's to handle."""
    found = cache.get(key)
    if found is None:
        found = secrets.token_hex(8)
        if not cache.add(key, found, timeout=None):
            found = cache.get(key)
    return found


def new_generation(key: str) -> None:
    """Replace the generation under `key`: every process holding copies made under the old one drops them."""
    cache.set(key, secrets.token_hex(8), timeout=None)
