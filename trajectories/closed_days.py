"""The production day totals of closed days, kept per process so the dashboard reads only the open days' rows.

A day row (RunDay) changes when ingest records a run received that day (`rollup.record`: the run's `created_at`,
set when it is stored) or when every row is recounted (`rollup.rebuild`). So a day before yesterday (local days,
settings.TIME_ZONE) is *closed*: ingest no longer writes to it — yesterday stays open, for a run stored just before
midnight whose transaction commits after it — and only a rebuild changes it. The totals of a window's closed days are
read once per process and kept under the *generation*, a value in the shared cache that every rebuild replaces when
it commits (`bump`); each request reads the generation (one cache read) and the open days' rows (one small query).
When the shared cache cannot be read nothing is kept: every request reads every day, as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from common.local_copies import forgets, new_generation, shared_generation

log = logging.getLogger("waymark.trajectories")
GENERATION_KEY = "waymark:trajectories:closed-days"
OPEN_DAYS = 2  # today and yesterday
KEPT = 8  # windows kept per process (one per name, window start and generation in practice)

_lock = threading.Lock()
_kept: dict[tuple[str, str, date, date], Any] = {}


def first_open_day(today: date | None = None) -> date:
    return (today or timezone.localdate()) - timedelta(days=OPEN_DAYS - 1)


def generation() -> str | None:
    """The current generation, created when missing; None when the shared cache cannot be read."""
    try:
        return shared_generation(GENERATION_KEY)
    except Exception:
        log.warning("closed-day generation unreadable: every day read from the database", exc_info=True)
        return None


def closed[T](first_day: date, open_from: date, read: Callable[[date, date], T], *, name: str) -> T:
    """What `read(first_day, open_from)` makes of the days from `first_day` up to (not including) `open_from` (a
    summary of their totals, kept under `name`; it must never be changed once made): this process's copy for the
    current generation, else read and kept."""
    current = generation()
    if current is None:
        return read(first_day, open_from)
    key = (current, name, first_day, open_from)
    found = _kept.get(key)
    if found is None:
        found = read(first_day, open_from)
        with _lock:
            if len(_kept) >= KEPT:
                _kept.clear()
            _kept[key] = found
    return found


def bump() -> None:
    """Every closed day may have changed (a rebuild): this process forgets its copies at once, and every process
    when the transaction commits (a new generation). A copy read meanwhile is kept under the old generation, where
    no one looks once the new one is set."""
    forget()
    transaction.on_commit(_bump)


def _bump() -> None:
    try:
        new_generation(GENERATION_KEY)
    except Exception:
        log.error("closed-day generation not replaced: processes keep their closed days", exc_info=True)
    forget()


@forgets
def forget() -> None:
    """Forget this process's copies (tests; and at once after this process's own rebuild)."""
    with _lock:
        _kept.clear()
