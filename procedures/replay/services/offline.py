"""Offline replay of a version on its held-out recorded runs, claimed with a lease so a dead worker's replay is
taken over.

An offline replay is claimed with a lease (a conditional update: queued, or running with a lease that ran out) and
renews it at every stage. A worker that dies leaves the lease to run out: the redelivered message (or the beat's
`replays_to_requeue`) takes the replay over and finishes it once (`finish_replay` writes the cases, the gate report
and the status in one transaction, only for the lease holder). After `WAYMARK_REPLAY_MAX_ATTEMPTS` claims the replay
fails with "gave up after N attempts: <the last error, or the worker died>". A failed replay is run again by an
operator (version_services.replay_rerun) or by mining the same content again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from itertools import islice
from operator import lt
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import F, Q, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.services import Actor, audit_record
from common.leases import LeaseLost, lease_claim, lease_heartbeat, lease_release, lease_wait
from common.liveness import lease_owner
from procedures import core
from procedures.core.columns import OfflineReplay
from trajectories.selectors import run_columns

from ...mining import decode_arguments
from ...models import Procedure, ProcedureVersion, ReplayMode, ReplayRun, ReplayStatus, VersionStatus
from ..certification import CasePairs
from ..spooled_cases import SpooledCases
from .lifecycle import fail_replay, finish_replay, procedure_steps

logger = logging.getLogger("waymark.procedures")


class _HeldOut:
    """The held-out runs of an offline replay as columns, in the order of `run_ids` (None for a run that no longer
    exists), streamed in flat memory when the ids are in ascending order (as mining stores them); other orders are
    read into memory once, after the repeated-case check of `replay_procedure`."""

    def __init__(self, run_ids: Sequence[int]) -> None:
        self.run_ids = run_ids
        self._ascending = all(map(lt, run_ids, islice(run_ids, 1, None)))
        self._runs: dict[int, tuple] | None = None
        if not self._ascending:
            seen: set[int] = set()
            for pk in self.run_ids:
                if pk in seen:
                    raise ValueError(f"replay case {str(pk)!r} is repeated")
                seen.add(pk)
            self._runs = {row[0]: row[1:] for row in run_columns(self.run_ids)}

    def __iter__(self) -> Iterator[tuple[int, tuple | None]]:
        if self._runs is not None:
            for pk in self.run_ids:
                yield pk, self._runs.get(pk)
            return
        rows = run_columns(self.run_ids)
        row = next(rows, None)
        for pk in self.run_ids:
            while row is not None and row[0] < pk:
                row = next(rows, None)
            if row is not None and row[0] == pk:
                yield pk, row[1:]
            else:
                yield pk, None


def _case_runs(replay: ReplayRun) -> Iterable[tuple[int, tuple | None]]:
    """An offline replay's recorded cases, in the order of its held-out list (see _HeldOut). On PostgreSQL a list in
    ascending order (as mining stores it) stays in the replay row: one streamed query reads each id with its run's
    columns, so not even the ids are held in memory at once; otherwise the list is read whole."""
    if connections[ReplayRun.objects.db].vendor == "postgresql" and _held_out_ascending(replay.pk):
        return _streamed_cases(replay.pk)
    return _HeldOut(ReplayRun.objects.values_list("held_out_run_ids", flat=True).get(pk=replay.pk))


def _streamed_cases(replay_id: int) -> Iterator[tuple[int, tuple | None]]:
    """The held-out ids of the replay row (strictly ascending: their order is the ids' order), each with its run's
    columns (None: the run no longer exists), by one query whose ids stay a subquery of that row."""
    ids_sql = f"SELECT id FROM ({_HELD_OUT_IDS.format(table=ReplayRun._meta.db_table)}) ids"
    for pk, *run in run_columns(RawSQL(ids_sql, [replay_id]), with_missing=True):
        yield pk, (None if run[0] is None else tuple(run))


_HELD_OUT_IDS = (
    "SELECT e.value::bigint AS id, e.position FROM {table} r,"
    " jsonb_array_elements_text(r.held_out_run_ids) WITH ORDINALITY AS e(value, position) WHERE r.id = %s"
)


def _held_out_ascending(replay_id: int) -> bool:
    """Whether the replay's stored held-out ids are in strictly ascending order (one query, in the database)."""
    ids = _HELD_OUT_IDS.format(table=ReplayRun._meta.db_table)
    with connections[ReplayRun.objects.db].cursor() as cursor:
        cursor.execute(
            f"SELECT coalesce(bool_and(id > previous), true) FROM (SELECT id, lag(id) OVER (ORDER BY position)"
            f" AS previous FROM ({ids}) ids) pairs WHERE previous IS NOT NULL",
            [replay_id],
        )
        return cursor.fetchone()[0]


def _offline_replay(replay: ReplayRun) -> OfflineReplay:
    return OfflineReplay(
        procedure_steps(replay.version), active=procedure_steps(replay.compared_with), decode=decode_arguments
    )


def _judged(offline: OfflineReplay, recorded: Iterable[tuple[int, tuple | None]]) -> Iterator[core.CaseResult]:
    for pk, run in recorded:
        if run is None:
            yield offline.case(str(pk), None)
        else:
            outcome, tokens, cost, tools, arguments = run
            yield offline.case(str(pk), (outcome, tools, arguments, tokens, cost))


# --- replay --------------------------------------------------------------------------------------------------------
def replay_lease_seconds() -> int:
    """An offline replay's lease; by default the task time limit, so a replay slower than its heartbeats is killed
    by Celery before another worker could take it over."""
    default = getattr(settings, "CELERY_TASK_TIME_LIMIT", None) or 15 * 60
    return int(getattr(settings, "WAYMARK_REPLAY_LEASE_SECONDS", default))


def replay_max_attempts() -> int:
    return int(getattr(settings, "WAYMARK_REPLAY_MAX_ATTEMPTS", 3))


_VERSION_RUN_LISTS = tuple(
    f"{version}__{field}"
    for version in ("version", "compared_with")
    for field in ("source_run_ids", "training_run_ids", "held_out_run_ids", "skipped_run_ids")
)


def _claim(replay_id: int, worker: str, *, actor: Actor, now: datetime | None = None) -> ReplayRun | None:
    """Take an offline replay that is queued, or running with a lease that ran out (its worker died), with a lease;
    the version moves to replaying. None when it is finished or another worker holds it."""
    now = now or timezone.now()
    with transaction.atomic(durable=True):
        before = ReplayRun.objects.filter(pk=replay_id).values("status", "lease_owner").first()
        taken = lease_claim(
            ReplayRun.objects.filter(
                pk=replay_id, mode=ReplayMode.OFFLINE, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING)
            ),
            owner=worker,
            seconds=replay_lease_seconds(),
            now=now,
            status=ReplayStatus.RUNNING,
            attempts=F("attempts") + 1,
            started_at=Coalesce(F("started_at"), Value(now)),
        )
        if not taken:
            return None
        replay = (
            ReplayRun.objects.select_related("version__procedure", "compared_with")
            # the replay needs the versions' steps, not their run ids; its own held-out ids are streamed (flat memory)
            .defer("held_out_run_ids", *_VERSION_RUN_LISTS)
            .get(pk=replay_id)
        )
        ProcedureVersion.objects.filter(pk=replay.version_id, status=VersionStatus.CANDIDATE).update(
            status=VersionStatus.REPLAYING
        )
        takeover = replay.attempts > 1
        audit_record(
            actor=actor,
            verb="replay.takeover" if takeover else "replay.start",
            target=replay,
            before={"status": before["status"], **({"lease_owner": before["lease_owner"]} if takeover else {})},
            after={"status": "running", "attempt": replay.attempts},
        )
    return replay


def replay_heartbeat(replay: ReplayRun, worker: str, stage: str) -> None:
    """Renew the lease of an offline replay we hold (at every stage); LeaseLost when another worker took it."""
    held = ReplayRun.objects.filter(pk=replay.pk, status=ReplayStatus.RUNNING)
    lease_heartbeat(held, owner=worker, seconds=replay_lease_seconds(), what=f"replay {replay.pk} ({stage})")


def _release(replay: ReplayRun, worker: str, error: str) -> None:
    """A transient error: give the lease back (keeping the error) so Celery's retry can claim the replay again."""
    lease_release(ReplayRun.objects.filter(pk=replay.pk, status=ReplayStatus.RUNNING), owner=worker, error=error[:2000])


def _gave_up(replay: ReplayRun, attempts: int) -> str:
    return f"gave up after {attempts} attempts: {replay.error or 'the worker died'}"


def _transient_errors() -> tuple[type[BaseException], ...]:
    from common.retry import TRANSIENT_ERRORS

    return TRANSIENT_ERRORS


def replay_offline_run(*, replay: ReplayRun, actor: Actor | None = None, worker: str | None = None) -> ReplayRun:
    """Evaluate the version (and the one it is compared with) on the recorded held-out runs; store cases, metrics
    and the gate report, then settle the version's status. Does nothing unless the replay is queued, or running
    with an expired lease (its worker died: this call takes it over)."""
    actor = actor or Actor.system()
    worker = worker or lease_owner()
    claimed = _claim(replay.pk, worker, actor=actor)
    if claimed is None:
        return ReplayRun.objects.select_related("version__procedure", "compared_with").get(pk=replay.pk)
    replay = claimed
    limit = replay_max_attempts()
    if replay.attempts > limit:
        return fail_replay(replay, actor=actor, error=_gave_up(replay, limit), worker=worker)
    try:
        replay_heartbeat(replay, worker, "claimed")
        recorded = _case_runs(replay)
        replay_heartbeat(replay, worker, "loaded")
        # One streamed pass, in memory flat in the number of cases: each case is judged, counted into the report
        # and written out as a row to a spooled file, which _finish copies into the table.
        offline = _offline_replay(replay)
        rows = SpooledCases(replay.pk)
        # Paired against the version it replaces (a first version replayed offline has no certificate).
        pairs = CasePairs() if replay.compared_with_id is not None else None
        for case in _judged(offline, recorded):
            rows.add(case)
            if pairs is not None:
                pairs.add(case)
        report = offline.report()
        replay_heartbeat(replay, worker, "replayed")
        rubric = _offline_rubric_note(replay.version.procedure)
        try:
            return finish_replay(replay, report, rows, actor=actor, rubric=rubric, worker=worker, pairs=pairs)
        finally:
            rows.close()
    except LeaseLost:
        logger.warning("offline replay %s: lease lost, another worker finishes it", replay.pk)
        return ReplayRun.objects.get(pk=replay.pk)
    except _transient_errors() as exc:  # a busy database, a dropped connection: Celery retries with backoff
        _release(replay, worker, f"{type(exc).__name__}: {exc}")
        raise
    except Exception as exc:  # bad stored data or a bug: the replay fails visibly instead of staying "running"
        logger.exception("offline replay %s failed", replay.pk)
        return fail_replay(replay, actor=actor, error=f"{type(exc).__name__}: {exc}", worker=worker)


def replay_lease_wait(replay_id: int) -> float | None:
    """Seconds until the lease of a running offline replay runs out (None: finished, or nobody holds it)."""
    return lease_wait(
        ReplayRun.objects.filter(pk=replay_id, status=ReplayStatus.RUNNING, lease_expires_at__isnull=False)
    )


def replays_to_requeue(*, actor: Actor | None = None, now: datetime | None = None) -> list[int]:
    """Celery beat: offline replays nobody holds any more (running with a lease that ran out, or queued for longer
    than a lease with no claim: a lost message). Those that used up their attempts fail with the reason; the ids
    of the others are returned for the caller to enqueue again."""
    actor = actor or Actor.system()
    now = now or timezone.now()
    lease = timedelta(seconds=replay_lease_seconds())
    lapsed = Q(status=ReplayStatus.RUNNING) & (
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True, started_at__lt=now - lease)
    )
    lost = Q(status=ReplayStatus.QUEUED, lease_expires_at__isnull=True, created_at__lt=now - lease)
    limit = replay_max_attempts()
    requeue = []
    for replay in ReplayRun.objects.filter(lapsed | lost, mode=ReplayMode.OFFLINE).order_by("pk")[:100]:
        if replay.attempts >= limit:
            fail_replay(replay, actor=actor, error=_gave_up(replay, replay.attempts), expired_before=now)
        else:
            requeue.append(replay.pk)
    return requeue


OFFLINE_NO_RUNS = "not applied: an offline replay makes no runs to judge (the floor applies to live replays)"


def _offline_rubric_note(procedure: Procedure) -> dict[str, Any] | None:
    """What an offline replay's report says about a floor it cannot apply (None when the procedure has none)."""
    if procedure.rubric_floor is None:
        return None
    return {"floor": procedure.rubric_floor, "applied": False, "passed": True, "reason": OFFLINE_NO_RUNS, "runs": []}
