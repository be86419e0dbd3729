"""Worker liveness: a dead worker's leases are taken over in seconds instead of when they run out.

Every process that runs tasks keeps a liveness stamp in the cache, `waymark:alive:<hostname>:<pid>` holding the time
it was last written, refreshed every WAYMARK_LIVENESS_STAMP_SECONDS by a daemon thread: each prefork pool process
(worker_process_init, after the fork), the solo pool's process (it sends worker_process_init too) and the main
process of a thread pool (worker_ready). A prefork worker's main process runs no task and starts no thread (it forks
new pool processes later, and a fork beside a running thread can deadlock the child).

Lease owners are `<hostname>:<pid>:<task id>`. Celery beat runs `release_dead_leases` every few seconds: it asks each
kind of leased work registered here (`register_leases`; apps call common.leases.register_lease_takeover from their
AppConfig.ready(), which registers its generic pair) for the owners of its live leases, and hands the owners whose
process is dead to its `release(owners=..., now=...)`, which ends those leases now (a conditional update, audited
"<model>.lease_released" by the system actor) and starts the app's usual take-over (its reaper); the claim's
check-and-set (common.leases.lease_claim) still guards against double work.

Conservative by construction: a process is dead only when its stamp exists and is older than
WAYMARK_LIVENESS_STALE_SECONDS. No stamp (an owner from before this mechanism, a process on a machine that writes to
another cache, a stamp the cache dropped, an owner that does not look like `host:pid:...`) means "unknown", and that
lease runs out as it always did. A pid reused by a new process on the same host keeps the key fresh: again the lease
simply runs out. Stamps are compared with this machine's clock, so machines must keep their clocks in sync (NTP)
to well within the stale limit, as the leases themselves already require.

Why the cache and not a table: a stamp is written every few seconds by every pool process; on the embedded default
that would be a write transaction on SQLite's one writer lock every few seconds per process, and on PostgreSQL a
steady stream of dead tuples. The cache is Redis in production (shared by every machine) and a file cache under
var/ on the embedded default (shared by the processes of the one machine), its own alias (`liveness`) so that
culling other entries never drops a stamp.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime

from celery import shared_task
from celery.signals import worker_process_init, worker_ready, worker_shutdown
from django.conf import settings
from django.core.cache import caches
from django.utils import timezone

log = logging.getLogger("waymark.liveness")

STAMP_PREFIX = "waymark:alive:"
KEEP_SECONDS = 24 * 3600  # a dead process's stamp stays readable (as stale) far longer than any lease


# --- stamps ----------------------------------------------------------------------------------------------------------
def process_name(host: str | None = None, pid: int | None = None) -> str:
    return f"{host or socket.gethostname()}:{pid or os.getpid()}"


def lease_owner(work: str | None = None) -> str:
    """A lease owner as `owner_process` reads it: `<host>:<pid>:<work>` (the task id, a command's name; a fresh id
    when none is given), at most 200 characters."""
    return f"{process_name()}:{work or uuid.uuid4().hex[:12]}"[:200]


def owner_process(owner: str) -> str | None:
    """The `host:pid` of a lease owner `host:pid:rest`; None when the owner does not have that shape."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"{host}:{pid}" if host and pid.isdigit() else None


def _cache():
    return caches[getattr(settings, "WAYMARK_LIVENESS_CACHE", "default")]


def stamp(name: str | None = None, at: float | None = None) -> None:
    """Write the liveness stamp of `name` (this process by default)."""
    _cache().set(STAMP_PREFIX + (name or process_name()), at if at is not None else time.time(), KEEP_SECONDS)


def stamp_seconds() -> float:
    return float(getattr(settings, "WAYMARK_LIVENESS_STAMP_SECONDS", 5))


def stale_seconds() -> float:
    return float(getattr(settings, "WAYMARK_LIVENESS_STALE_SECONDS", 30))


class _Stamper(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="waymark-liveness", daemon=True)
        self.pid = os.getpid()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(stamp_seconds()):
            try:
                stamp()
            except Exception:  # the cache is down: try again at the next tick; never end the thread
                log.warning("liveness stamp of %s not written", process_name(), exc_info=True)


_stamper: _Stamper | None = None


def start_stamping() -> None:
    """Stamp this process now and keep stamping it from a daemon thread (once per process)."""
    global _stamper
    if _stamper is not None and _stamper.pid == os.getpid() and _stamper.is_alive():
        return
    try:
        stamp()
    except Exception:
        log.warning("liveness stamp of %s not written", process_name(), exc_info=True)
    _stamper = _Stamper()
    _stamper.start()


def stop_stamping() -> None:
    """Stop the thread (the stamp is left to go stale)."""
    global _stamper
    if _stamper is not None:
        _stamper.stopped.set()
        _stamper = None


@worker_process_init.connect
def _on_pool_process(**_kwargs) -> None:  # a prefork pool process after the fork, or the solo pool's process
    start_stamping()


@worker_ready.connect
def _on_worker_ready(sender=None, **_kwargs) -> None:
    from celery.concurrency.prefork import TaskPool as PreforkPool
    from celery.concurrency.solo import TaskPool as SoloPool

    pool = getattr(sender, "pool", None)
    if pool is not None and not isinstance(pool, PreforkPool | SoloPool):  # threads (or green threads): tasks run here
        start_stamping()


@worker_shutdown.connect
def _on_worker_shutdown(**_kwargs) -> None:
    stop_stamping()


def dead_processes(names: Iterable[str], *, now: float | None = None) -> set[str]:
    """The `host:pid` names whose stamp exists and is older than the stale limit (absent stamps are unknown)."""
    names = set(names)
    if not names:
        return set()
    now = now if now is not None else time.time()
    stamps = _cache().get_many([STAMP_PREFIX + name for name in names])
    limit = stale_seconds()
    return {name for name in names if (at := stamps.get(STAMP_PREFIX + name)) is not None and now - float(at) > limit}


def dead_owners(owners: Iterable[str], *, now: float | None = None) -> list[str]:
    """The lease owners among `owners` whose process is known to be dead, sorted."""
    processes = {owner: owner_process(owner) for owner in set(owners)}
    dead = dead_processes({name for name in processes.values() if name}, now=now)
    return sorted(owner for owner, name in processes.items() if name in dead)


# --- the registry of leased work --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LeasedWork:
    holders: Callable[[], Collection[str]]  # holders() -> the owners of the leases still live
    release: Callable[..., int]  # release(*, owners, now) -> how many leases it ended


_registry: dict[str, LeasedWork] = {}


def register_leases(label: str, *, holders: Callable[[], Collection[str]], release: Callable[..., int]) -> None:
    """Declare the leased work of `label` ("app.model"): `holders()` lists the owners of its live leases;
    `release(owners=[...], now=...)` ends the leases of those (dead) owners and starts the app's take-over.
    Registering again replaces."""
    if not (callable(holders) and callable(release)):
        raise TypeError(f"the leases of {label} need callable holders and release")
    _registry[label] = LeasedWork(holders=holders, release=release)


def registered_leases() -> dict[str, LeasedWork]:
    return dict(_registry)


def dead_leases_release(*, now: datetime | None = None) -> dict[str, int]:
    """For each registered kind: release the leases whose owner's process is dead. Returns the count per label; a
    kind that fails is logged and counted -1, and the others go on."""
    now = now or timezone.now()
    released: dict[str, int] = {}
    for label, work in registered_leases().items():
        try:
            owners = dead_owners(work.holders(), now=now.timestamp())
            released[label] = work.release(owners=owners, now=now) if owners else 0
        except Exception:
            log.exception("releasing the dead workers' leases of %s failed", label)
            released[label] = -1
        if released[label] > 0:
            log.warning("released %d lease(s) of %s held by dead worker processes", released[label], label)
    return released


@shared_task(name="common.liveness.release_dead_leases", ignore_result=True)
def release_dead_leases() -> dict[str, int]:
    """Celery beat, every WAYMARK_LIVENESS_CHECK_SECONDS: the leases of dead worker processes end now."""
    return dead_leases_release()
