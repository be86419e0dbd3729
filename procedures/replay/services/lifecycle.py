"""A replay's life apart from running it: queued (a new replay row per mode, enqueued once the transaction
commits), then finished with its cases, metrics and gate report written once, and its version's status settled.

Mining, re-running, re-splitting and amending a version all queue replays through `queue_replay` /
`requeue_replays`; a version whose replays are run again goes back to replaying. Offline replays
(services.offline) and live ones (services.live) both finish through `finish_replay` (one
transaction: the cases, the metrics, the gate with the rubric floor, the replay's status and its version's) or fail
through `fail_replay`. A version settles once none of its replays is open: ready when the newest replay of
each mode passed its gate, else failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import batched
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Subquery
from django.utils import timezone

from accounts.services import Actor, audit_record
from common.leases import lease_clear
from procedures import core
from procedures.core.gate import regression_gate
from rubrics.floor import FloorResult

from ...models import Procedure, ProcedureVersion, ReplayCase, ReplayMode, ReplayRun, ReplayStatus, VersionStatus
from ...versions.split import RUN_LISTS, RunSplit, create_with_run_lists
from ..certification import CasePairs, certify_replay
from ..spooled_cases import SpooledCases


def procedure_steps(version: ProcedureVersion | None) -> tuple[core.ProcedureStep, ...] | None:
    if version is None:
        return None
    return tuple(core.ProcedureStep(tool=step["tool"], arguments=step.get("arguments") or {}) for step in version.steps)


def _write_cases(rows: list[ReplayCase] | SpooledCases) -> None:
    """Inside finish_replay's transaction: a live replay's case rows, or an offline replay's spooled ones (by COPY
    on PostgreSQL)."""
    if not isinstance(rows, SpooledCases):
        ReplayCase.objects.bulk_create(rows, batch_size=2000)
        return
    connection = connections[ReplayCase.objects.db]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            rows.copy_into(cursor.cursor, ReplayCase._meta.db_table)
        return
    for batch in batched(rows, 2000):
        ReplayCase.objects.bulk_create(batch)


def _report_summary(report: core.ReplayReport) -> dict[str, Any]:
    return {
        "regressions": [int(case_id) for case_id in report.regressions],
        "improvements": [int(case_id) for case_id in report.improvements],
        "counterexamples": [int(case_id) for case_id in report.counterexamples],
        "unanswered": [int(case_id) for case_id in report.unanswered],
        "active_unanswered": [int(case_id) for case_id in report.active_unanswered],
    }


def _gate_report(
    report: core.ReplayReport,
    rubric: FloorResult | dict[str, Any] | None,
    agents: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The regression gate, plus the rubric floor: an applied floor is one more check (and can fail the gate); a
    floor that was not applied is only reported under "rubric". A live replay's report names the agents whose
    answers it counts under "agents"."""
    gate = regression_gate(report.metrics, report.active_metrics, core.DEFAULT_PROCEDURE_CHECKS).to_dict()
    if agents is not None:
        gate["agents"] = agents
    if isinstance(rubric, FloorResult):
        if rubric.applied:
            gate["checks"].append(rubric.as_check())
            gate["passed"] = gate["passed"] and rubric.passed
        rubric = rubric.to_dict()
    if rubric is not None:
        gate["rubric"] = rubric
    return gate


def finish_replay(
    replay: ReplayRun,
    report: core.ReplayReport,
    rows: list[ReplayCase],
    *,
    actor: Actor,
    rubric: FloorResult | dict[str, Any] | None = None,
    agents: list[dict[str, Any]] | None = None,
    worker: str | None = None,
    pairs: CasePairs | None = None,
) -> ReplayRun:
    """Write the cases, metrics and gate report and settle the version, in one transaction, once: only a running
    replay (held by `worker`, for an offline one) is finished; cases a dead attempt could have left are replaced.
    With `pairs` (a replay paired against the version it replaces, or against no procedure) the replay's
    certificate is issued in the same transaction and is one more check of its gate."""
    gate = _gate_report(report, rubric, agents)
    with transaction.atomic(durable=True):
        locked = ReplayRun.objects.select_for_update().defer("held_out_run_ids").get(pk=replay.pk)
        if locked.status != ReplayStatus.RUNNING or (worker is not None and locked.lease_owner != worker):
            return locked
        if pairs is not None:
            locked.version = replay.version
            gate["certificate"] = certify_replay(locked, pairs, actor=actor)
            gate["passed"] = gate["passed"] and gate["certificate"]["passed"]
        ReplayCase.objects.filter(replay=locked).delete()
        _write_cases(rows)
        locked.metrics = {
            "candidate": dict(report.metrics),
            "active": report.active_metrics and dict(report.active_metrics),
        }
        locked.gate_report = gate
        locked.report = _report_summary(report)
        locked.status = ReplayStatus.DONE
        locked.finished_at = timezone.now()
        lease_clear(locked)
        locked.save(
            update_fields=[
                "metrics",
                "gate_report",
                "report",
                "status",
                "finished_at",
                "lease_owner",
                "lease_expires_at",
            ]
        )
        status = settle_version(locked.version_id)
        audit_record(
            actor=actor,
            verb="replay.finish",
            target=locked,
            before={"status": "running"},
            after={
                "status": "done",
                "mode": locked.mode,
                "passed": gate["passed"],
                "failed_checks": [check["metric"] for check in gate["checks"] if not check["passed"]],
                "regressions": len(report.regressions),
                "certified": (gate.get("certificate") or {}).get("passed"),
                "version_status": status,
                **({"agents": [row["agent"] for row in agents]} if agents is not None else {}),
            },
        )
    return locked


def fail_replay(
    replay: ReplayRun,
    *,
    actor: Actor,
    error: str,
    worker: str | None = None,
    expired_before: datetime | None = None,
) -> ReplayRun:
    """Fail an open replay (only while `worker` holds it, or while its lease is still expired before
    `expired_before`, when given) and settle its version."""
    with transaction.atomic(durable=True):
        locked = ReplayRun.objects.select_for_update().defer("held_out_run_ids").get(pk=replay.pk)
        if locked.status not in (ReplayStatus.QUEUED, ReplayStatus.RUNNING):
            return locked
        if worker is not None and locked.lease_owner != worker:
            return locked
        if expired_before is not None and locked.lease_expires_at and locked.lease_expires_at >= expired_before:
            return locked
        before = locked.status
        locked.status = ReplayStatus.FAILED
        locked.error = error[:2000]
        locked.finished_at = timezone.now()
        lease_clear(locked)
        locked.save(update_fields=["status", "error", "finished_at", "lease_owner", "lease_expires_at"])
        status = settle_version(locked.version_id)
        audit_record(
            actor=actor,
            verb="replay.fail",
            target=locked,
            before={"status": before},
            after={"status": "failed", "error": locked.error, "version_status": status},
        )
    return locked


def settle_version(version_id: int) -> str:
    """Inside a transaction: once no replay of the version is queued or running, it becomes ready when every
    replay finished with a passing gate, else failed. Only a candidate or replaying version moves."""
    version = ProcedureVersion.objects.select_for_update().defer(*RUN_LISTS).get(pk=version_id)
    if version.status not in (VersionStatus.CANDIDATE, VersionStatus.REPLAYING):
        return version.status
    replays = list(
        ReplayRun.objects.filter(version_id=version_id).order_by("-id").values_list("mode", "status", "gate_report")
    )
    if any(status in (ReplayStatus.QUEUED, ReplayStatus.RUNNING) for _, status, _ in replays):
        return version.status
    newest: dict[str, tuple[str, Any]] = {}  # a replay run again supersedes the earlier one of its mode
    for mode, status, gate in replays:
        newest.setdefault(mode, (status, gate))
    passed = bool(newest) and all(
        status == ReplayStatus.DONE and gate and gate.get("passed") for status, gate in newest.values()
    )
    version.status = VersionStatus.READY if passed else VersionStatus.FAILED
    version.save(update_fields=["status"])
    return version.status


# --- queueing replays ---------------------------------------------------------------------------------------------
def queue_replay(
    version: ProcedureVersion, procedure: Procedure, mode: str, *, held_out: RunSplit | None = None
) -> ReplayRun:
    """A new replay of the version, compared with the procedure's active version, on the version's held-out runs
    (copied in the database: never read into Python) or those of `held_out` (another split of its runs)."""
    deadline = None
    if mode == ReplayMode.LIVE:
        deadline = timezone.now() + timedelta(seconds=settings.WAYMARK_LIVE_REPLAY_SECONDS)
    fields = {"version": version, "compared_with_id": procedure.active_version_id, "mode": mode, "deadline": deadline}
    if held_out is not None:
        replay, _ = create_with_run_lists(ReplayRun, held_out, ("held_out_run_ids",), **fields)
        return replay
    replay = ReplayRun.objects.create(**fields)
    version_lists = ProcedureVersion.objects.filter(pk=version.pk).values("held_out_run_ids")[:1]
    ReplayRun.objects.filter(pk=replay.pk).update(held_out_run_ids=Subquery(version_lists))
    return ReplayRun.objects.defer("held_out_run_ids").get(pk=replay.pk)


def queue_replay_on(
    version: ProcedureVersion, *, mode: str, compared_with_id: int | None, run_ids: list[int]
) -> ReplayRun:
    """A new replay of the version on the given held-out runs, compared with the version `compared_with_id` (None:
    no procedure). The caller enqueues it on commit."""
    deadline = None
    if mode == ReplayMode.LIVE:
        deadline = timezone.now() + timedelta(seconds=settings.WAYMARK_LIVE_REPLAY_SECONDS)
    return ReplayRun.objects.create(
        version=version, compared_with_id=compared_with_id, mode=mode, deadline=deadline, held_out_run_ids=run_ids
    )


def modes_to_rerun(version: ProcedureVersion, *, errored_only: bool) -> list[str]:
    """The modes whose newest replay of the version failed (errored or gave up; with errored_only False, also a
    finished replay whose gate failed). Empty while a replay is queued or running."""
    newest: dict[str, tuple[str, Any]] = {}
    for mode, status, gate in (
        ReplayRun.objects.filter(version=version).order_by("-id").values_list("mode", "status", "gate_report")
    ):
        if status in (ReplayStatus.QUEUED, ReplayStatus.RUNNING):
            return []
        newest.setdefault(mode, (status, gate))
    return [
        mode
        for mode, (status, gate) in sorted(newest.items())
        if status == ReplayStatus.FAILED or (not errored_only and not (gate or {}).get("passed"))
    ]


def has_live_replay(version: ProcedureVersion) -> bool:
    open_or_done = (ReplayStatus.QUEUED, ReplayStatus.RUNNING, ReplayStatus.DONE)
    return ReplayRun.objects.filter(version=version, mode=ReplayMode.LIVE, status__in=open_or_done).exists()


# A version whose replays are run again (or joined by another mode) goes back to replaying: its status settles
# again from its newest replay of each mode (settle_version). Active and retired versions keep their status.
RESETTLED = (VersionStatus.FAILED, VersionStatus.READY, VersionStatus.CANDIDATE)


def requeue_replays(
    version: ProcedureVersion,
    procedure: Procedure,
    *,
    actor: Actor,
    modes: Sequence[str],
    held_out: RunSplit | None = None,
    verb: str = "replay.rerun",
    note: dict[str, Any] | None = None,
) -> tuple[ReplayRun, ...]:
    """Inside the caller's transaction (procedure locked): queue a new replay per mode, on the version's held-out
    cases (or `held_out`: another split's), compared with today's active version; a failed or ready version goes
    back to replaying. Audited (`verb`, with `note` in the after state)."""
    if not modes:
        return ()
    version = ProcedureVersion.objects.select_for_update().defer(*RUN_LISTS).get(pk=version.pk)
    before = version.status
    if before in RESETTLED:
        version.status = VersionStatus.REPLAYING
        version.save(update_fields=["status"])
    replays = tuple(queue_replay(version, procedure, mode, held_out=held_out) for mode in modes)
    audit_record(
        actor=actor,
        verb=verb,
        target=version,
        before={"status": before},
        after={
            "status": version.status,
            "replays": [{"id": r.pk, "mode": r.mode, "held_out": len(r.held_out_run_ids)} for r in replays],
            **(note or {}),
        },
    )
    for replay in replays:
        enqueue_replay_on_commit(replay)
    return replays


def enqueue_replay_on_commit(replay: ReplayRun) -> None:
    from ... import tasks

    task = tasks.replay_offline if replay.mode == ReplayMode.OFFLINE else tasks.replay_live_start
    transaction.on_commit(lambda: task.delay(replay.pk))
