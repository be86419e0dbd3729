"""Every write in procedures: mining a version, offline and live replay.

Status of a version: candidate (stored) → replaying (a replay started) → ready (every replay's gate passed) or
failed. A version becomes active only through reviews: an applied promotion request (procedures/promotable.py)
moves the pointer and retires the previous active version.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from accounts.services import Actor, audit_record
from intents.taxonomy_selectors import runs_of_intent
from procedures import core
from procedures.core.gate import regression_gate
from reviews.rubric_floor import FloorResult, rubric_floor_check
from trajectories.core import TrajectoryStep
from trajectories.job_services import jobs_create, jobs_expire
from trajectories.models import Job, JobStatus, Outcome, Run, Step

from .mining import content_revision, intent_key, split_ids, trajectory_id
from .models import (
    Procedure,
    ProcedureVersion,
    ReplayArm,
    ReplayCase,
    ReplayMode,
    ReplayRun,
    ReplayStatus,
    VersionStatus,
)

logger = logging.getLogger("waymark.procedures")
REPLAY_JOB_KIND = "procedure_replay"
MIN_SUCCESSFUL_RUNS = 2
STEP_BATCH = 2000


class MiningError(ValueError):
    """Mining cannot produce a version (too few runs, nothing shared); the message says why."""


class NotAllowed(PermissionError):
    pass


class InvalidFloor(ValueError):
    """A rubric floor outside [0, 1]."""


@dataclass(frozen=True)
class MineResult:
    version: ProcedureVersion
    created: bool
    replays: tuple[ReplayRun, ...] = ()


# --- reading stored runs as core values ----------------------------------------------------------------------------
def intent_labels(key: str) -> list[str]:
    """The raw declared labels whose normalized key is `key`."""
    labels = Run.objects.exclude(intent="").values_list("intent", flat=True).distinct().order_by()
    return sorted(label for label in labels if intent_key(label) == key)


def _chunks(ids: Sequence[int], size: int = STEP_BATCH) -> Iterator[Sequence[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _steps_by_run(run_ids: Sequence[int], *, only_ok: bool) -> dict[int, list[TrajectoryStep]]:
    """The runs' steps as TrajectoryStep, in ordinal order (one query per STEP_BATCH runs)."""
    steps: dict[int, list[TrajectoryStep]] = {run_id: [] for run_id in run_ids}
    fields = ("run_id", "ordinal", "tool", "action_family", "arguments", "ok")
    fields_more = ("input_tokens", "cached_input_tokens", "output_tokens", "cost")
    for chunk in _chunks(sorted(run_ids)):
        rows = Step.objects.filter(run_id__in=chunk).order_by("run_id", "ordinal")
        if only_ok:
            rows = rows.filter(ok=True)
        for run_id, ordinal, tool, family, arguments, ok, tin, tcached, tout, cost in rows.values_list(
            *fields, *fields_more
        ):
            steps[run_id].append(
                TrajectoryStep(
                    ordinal,
                    tool,
                    family,
                    arguments or {},
                    ok=ok,
                    input_tokens=tin,
                    cached_input_tokens=tcached,
                    output_tokens=tout,
                    cost=cost,
                )
            )
    return steps


def _case_runs(run_ids: Sequence[int]) -> dict[int, core.CaseRun]:
    totals = {}
    for chunk in _chunks(sorted(run_ids)):
        totals.update(
            {
                pk: (outcome, tokens, cost)
                for pk, outcome, tokens, cost in Run.objects.filter(pk__in=chunk).values_list(
                    "pk", "outcome", "total_tokens", "cost"
                )
            }
        )
    steps = _steps_by_run(list(totals), only_ok=False)
    return {
        pk: core.CaseRun(outcome=outcome, steps=steps[pk], tokens=tokens, cost=cost)
        for pk, (outcome, tokens, cost) in totals.items()
    }


def _procedure_steps(version: ProcedureVersion | None) -> tuple[core.ProcedureStep, ...] | None:
    if version is None:
        return None
    return tuple(core.ProcedureStep(tool=step["tool"], arguments=step.get("arguments") or {}) for step in version.steps)


# --- mining --------------------------------------------------------------------------------------------------------
def _check_miner(actor: Actor) -> None:
    if actor.user is not None and not actor.user.is_operator:
        raise NotAllowed("mining procedures needs the operator role")


def procedure_mine(
    *,
    actor: Actor,
    intent: str,
    held_out_share: float = 0.3,
    seed: int = 17,
    live: bool | None = None,
) -> MineResult:
    """Mine the intent's successful runs into a version and queue its replay (see module docstring).

    Successful and failed runs are split alike (sorted ids, seeded shuffle, `held_out_share` held out); only the
    training successful runs are mined, each with its `ok is True` steps (a run left empty is skipped). An identical
    version (same content revision) is returned, not stored twice. Raises MiningError with the reason."""
    _check_miner(actor)
    if not isinstance(intent, str) or not intent_key(intent):
        raise MiningError("an intent is required")
    if isinstance(held_out_share, bool) or not 0 < held_out_share < 1:
        raise MiningError("held_out_share must be between 0 and 1 (exclusive)")
    live = settings.WAYMARK_LIVE_REPLAY if live is None else live
    group = runs_of_intent(intent_key(intent))  # by reviewed intent when the taxonomy has one, else by label
    key = group.key
    runs = group.runs.filter(outcome__in=[Outcome.SUCCESS, Outcome.FAILURE]).order_by()
    by_outcome: dict[str, list[int]] = {Outcome.SUCCESS: [], Outcome.FAILURE: []}
    newest = 0
    for pk, outcome in runs.values_list("pk", "outcome"):
        by_outcome[outcome].append(pk)
        newest = max(newest, pk)
    successes = by_outcome[Outcome.SUCCESS]
    if len(successes) < MIN_SUCCESSFUL_RUNS:
        raise MiningError(
            f"intent {key!r} has {len(successes)} successful run(s); mining needs at least {MIN_SUCCESSFUL_RUNS}"
            " (one to learn from, one to replay on)"
        )
    good = split_ids(successes, held_out_share=held_out_share, seed=seed, at_least_one=True)
    bad = split_ids(by_outcome[Outcome.FAILURE], held_out_share=held_out_share, seed=seed)
    ok_steps = _steps_by_run(good.training, only_ok=True)
    skipped = sorted(pk for pk, steps in ok_steps.items() if not steps)
    mined = {trajectory_id(pk): steps for pk, steps in ok_steps.items() if steps}
    if not mined:
        raise MiningError(f"no training run of intent {key!r} has a step with ok true")
    try:
        candidate = core.learn_procedure(mined, intent=key)
    except ValueError as exc:
        raise MiningError(f"intent {key!r}: {exc}") from exc
    steps = [step.to_dict() for step in candidate.steps]
    revision = content_revision(intent=key, steps=steps)
    title = group.title
    with transaction.atomic(durable=True):
        procedure, created_procedure = Procedure.objects.get_or_create(intent=key, defaults={"title": title})
        procedure = Procedure.objects.select_for_update().get(pk=procedure.pk)
        if created_procedure:
            audit_record(actor=actor, verb="procedure.create", target=procedure, after={"intent": key, "title": title})
        before_mark = procedure.mined_through_run_id
        if newest > before_mark:
            Procedure.objects.filter(pk=procedure.pk).update(mined_through_run_id=newest, updated_at=timezone.now())
        existing = ProcedureVersion.objects.filter(procedure=procedure, content_revision=revision).first()
        if existing is not None:
            if newest > before_mark:
                audit_record(
                    actor=actor,
                    verb="procedure.mined",
                    target=procedure,
                    before={"mined_through_run_id": before_mark},
                    after={"mined_through_run_id": newest, "version": existing.number, "new_version": False},
                )
            return MineResult(version=existing, created=False)
        number = (ProcedureVersion.objects.filter(procedure=procedure).aggregate(n=Max("number"))["n"] or 0) + 1
        version = ProcedureVersion.objects.create(
            procedure=procedure,
            number=number,
            parent=procedure.active_version,
            steps=steps,
            candidate_revision=candidate.revision,
            content_revision=revision,
            source_run_ids=sorted(ok_steps.keys() - set(skipped)),
            training_run_ids=sorted(good.training + bad.training),
            held_out_run_ids=sorted(good.held_out + bad.held_out),
            skipped_run_ids=skipped,
            created_by=actor.user,
        )
        replays = [_queue_replay(version, procedure, ReplayMode.OFFLINE)]
        if live:
            replays.append(_queue_replay(version, procedure, ReplayMode.LIVE))
        audit_record(
            actor=actor,
            verb="procedure_version.create",
            target=version,
            after={
                "procedure": procedure.intent,
                "grouping": group.grouping,
                "number": number,
                "tools": version.tools,
                "content_revision": revision,
                "candidate_revision": candidate.revision,
                "sources": len(version.source_run_ids),
                "held_out": len(version.held_out_run_ids),
                "skipped": skipped[:50],
                "split": {"held_out_share": held_out_share, "seed": seed},
                "replays": [replay.mode for replay in replays],
            },
        )
        for replay in replays:
            _enqueue_replay_on_commit(replay)
    return MineResult(version=version, created=True, replays=tuple(replays))


def _queue_replay(version: ProcedureVersion, procedure: Procedure, mode: str) -> ReplayRun:
    deadline = None
    if mode == ReplayMode.LIVE:
        deadline = timezone.now() + timedelta(seconds=settings.WAYMARK_LIVE_REPLAY_SECONDS)
    return ReplayRun.objects.create(
        version=version,
        compared_with=procedure.active_version,
        mode=mode,
        held_out_run_ids=version.held_out_run_ids,
        deadline=deadline,
    )


def _enqueue_replay_on_commit(replay: ReplayRun) -> None:
    from . import tasks

    task = tasks.replay_offline if replay.mode == ReplayMode.OFFLINE else tasks.replay_live_start
    transaction.on_commit(lambda: task.delay(replay.pk))


MAX_NOTES = 20
NOTE_MAX_CHARS = 300


def _notes(values: object, what: str) -> list[str]:
    if not isinstance(values, list | tuple) or not all(isinstance(value, str) for value in values):
        raise MiningError(f"{what} must be a list of texts")
    notes = [value.strip() for value in values if value.strip()]
    if len(notes) > MAX_NOTES:
        raise MiningError(f"at most {MAX_NOTES} {what}")
    if any(len(note) > NOTE_MAX_CHARS for note in notes):
        raise MiningError(f"each of the {what} has at most {NOTE_MAX_CHARS} characters")
    return notes


def procedure_version_amend(
    *, actor: Actor, version: ProcedureVersion, preconditions: Sequence[str], failure_exits: Sequence[str]
) -> MineResult:
    """An operator's preconditions and failure exits make a new version (parent: `version`) with the same steps;
    it is replayed like a mined one. Identical content returns the existing version."""
    _check_miner(actor)
    preconditions = _notes(preconditions, "preconditions")
    failure_exits = _notes(failure_exits, "failure exits")
    with transaction.atomic(durable=True):
        procedure = Procedure.objects.select_for_update().get(pk=version.procedure_id)
        source = ProcedureVersion.objects.get(pk=version.pk)
        revision = content_revision(
            intent=procedure.intent, steps=source.steps, preconditions=preconditions, failure_exits=failure_exits
        )
        existing = ProcedureVersion.objects.filter(procedure=procedure, content_revision=revision).first()
        if existing is not None:
            return MineResult(version=existing, created=False)
        number = (ProcedureVersion.objects.filter(procedure=procedure).aggregate(n=Max("number"))["n"] or 0) + 1
        amended = ProcedureVersion.objects.create(
            procedure=procedure,
            number=number,
            parent=source,
            steps=source.steps,
            preconditions=preconditions,
            failure_exits=failure_exits,
            candidate_revision=source.candidate_revision,
            content_revision=revision,
            source_run_ids=source.source_run_ids,
            training_run_ids=source.training_run_ids,
            held_out_run_ids=source.held_out_run_ids,
            skipped_run_ids=source.skipped_run_ids,
            created_by=actor.user,
        )
        replay = _queue_replay(amended, procedure, ReplayMode.OFFLINE)
        audit_record(
            actor=actor,
            verb="procedure_version.amend",
            target=amended,
            before={"parent": source.number},
            after={
                "number": number,
                "preconditions": preconditions,
                "failure_exits": failure_exits,
                "content_revision": revision,
            },
        )
        _enqueue_replay_on_commit(replay)
    return MineResult(version=amended, created=True, replays=(replay,))


# --- replay --------------------------------------------------------------------------------------------------------
def _start(replay: ReplayRun, *, actor: Actor) -> bool:
    """Move a queued replay to running (and its version to replaying) in one transaction; False if not queued."""
    with transaction.atomic(durable=True):
        started = ReplayRun.objects.filter(pk=replay.pk, status=ReplayStatus.QUEUED).update(
            status=ReplayStatus.RUNNING, started_at=timezone.now()
        )
        if not started:
            return False
        ProcedureVersion.objects.filter(pk=replay.version_id, status=VersionStatus.CANDIDATE).update(
            status=VersionStatus.REPLAYING
        )
        audit_record(
            actor=actor, verb="replay.start", target=replay, before={"status": "queued"}, after={"status": "running"}
        )
    return True


def replay_offline_run(*, replay: ReplayRun, actor: Actor | None = None) -> ReplayRun:
    """Evaluate the version (and the one it is compared with) on the recorded held-out runs; store cases, metrics
    and the gate report, then settle the version's status. Does nothing unless the replay is queued."""
    actor = actor or Actor.system()
    replay = ReplayRun.objects.select_related("version__procedure", "compared_with").get(pk=replay.pk)
    if replay.mode != ReplayMode.OFFLINE or not _start(replay, actor=actor):
        return replay
    try:
        recorded = _case_runs(replay.held_out_run_ids)
        cases = [core.ReplayCase(case_id=str(pk), run=recorded.get(pk)) for pk in replay.held_out_run_ids]
        report = core.replay_procedure(
            _procedure_steps(replay.version), cases, active=_procedure_steps(replay.compared_with), mode="offline"
        )
    except Exception as exc:  # bad stored data or a bug: the replay fails visibly instead of staying "running"
        logger.exception("offline replay %s failed", replay.pk)
        return _fail(replay, actor=actor, error=f"{type(exc).__name__}: {exc}")
    rows = _case_rows(replay, report, result_runs={})
    return _finish(replay, report, rows, actor=actor, rubric=_offline_rubric_note(replay.version.procedure))


def _case_rows(
    replay: ReplayRun, report: core.ReplayReport, *, result_runs: dict[tuple[str, int], int]
) -> list[ReplayCase]:
    rows = []
    for case in report.cases:
        case_run_id = int(case.case_id)
        arms = [(ReplayArm.CANDIDATE, case.candidate)]
        if case.active is not None:
            arms.append((ReplayArm.ACTIVE, case.active))
        for arm, result in arms:
            payload = result.to_dict()
            payload["regression"] = case.regression
            payload["improvement"] = case.improvement
            rows.append(
                ReplayCase(
                    replay=replay,
                    arm=arm,
                    case_run_id=case_run_id,
                    result_run_id=result_runs.get((arm, case_run_id)),
                    result=payload,
                    answered=result.answered,
                )
            )
    return rows


def _report_summary(report: core.ReplayReport) -> dict[str, Any]:
    return {
        "regressions": [int(case_id) for case_id in report.regressions],
        "improvements": [int(case_id) for case_id in report.improvements],
        "counterexamples": [int(case_id) for case_id in report.counterexamples],
        "unanswered": [int(case_id) for case_id in report.unanswered],
        "active_unanswered": [int(case_id) for case_id in report.active_unanswered],
    }


# --- the rubric floor (Procedure.rubric_floor) -----------------------------------------------------------------------
OFFLINE_NO_RUNS = "not applied: an offline replay makes no runs to judge (the floor applies to live replays)"


def _offline_rubric_note(procedure: Procedure) -> dict[str, Any] | None:
    """What an offline replay's report says about a floor it cannot apply (None when the procedure has none)."""
    if procedure.rubric_floor is None:
        return None
    return {"floor": procedure.rubric_floor, "applied": False, "passed": True, "reason": OFFLINE_NO_RUNS, "runs": []}


def _live_rubric_floor(procedure: Procedure, answered: dict[tuple[str, int], int]) -> FloorResult | None:
    """Judge the candidate arm's answered runs against the procedure's floor (outside any transaction: model
    calls); None when the procedure has no floor."""
    if procedure.rubric_floor is None:
        return None
    run_ids = [run_id for (arm, _case), run_id in answered.items() if arm == ReplayArm.CANDIDATE]
    try:
        return rubric_floor_check(intent=procedure.intent, run_ids=run_ids, floor=procedure.rubric_floor)
    except Exception as exc:  # bad stored data or a bug: the floor fails visibly instead of the replay hanging
        logger.exception("rubric floor of procedure %s failed", procedure.pk)
        return FloorResult(
            floor=procedure.rubric_floor, applied=True, passed=False, reason=f"{type(exc).__name__}: {exc}"
        )


def _gate_report(report: core.ReplayReport, rubric: FloorResult | dict[str, Any] | None) -> dict[str, Any]:
    """The regression gate, plus the rubric floor: an applied floor is one more check (and can fail the gate); a
    floor that was not applied is only reported under "rubric"."""
    gate = regression_gate(report.metrics, report.active_metrics, core.DEFAULT_PROCEDURE_CHECKS).to_dict()
    if isinstance(rubric, FloorResult):
        if rubric.applied:
            gate["checks"].append(rubric.as_check())
            gate["passed"] = gate["passed"] and rubric.passed
        rubric = rubric.to_dict()
    if rubric is not None:
        gate["rubric"] = rubric
    return gate


def rubric_floor_set(*, actor: Actor, procedure: Procedure, floor: float | None) -> Procedure:
    """An operator sets (or clears, with None) the procedure's rubric floor in [0, 1]; audited. Replays settled
    from now on apply it; finished ones keep their report."""
    _check_miner(actor)
    if floor is not None:
        if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor <= 1:
            raise InvalidFloor("the rubric floor is a number from 0 to 1")
        floor = float(floor)
    with transaction.atomic(durable=True):
        locked = Procedure.objects.select_for_update().get(pk=procedure.pk)
        before = locked.rubric_floor
        if before == floor:
            return locked
        locked.rubric_floor = floor
        locked.save(update_fields=["rubric_floor", "updated_at"])
        audit_record(
            actor=actor,
            verb="procedure.rubric_floor",
            target=locked,
            before={"rubric_floor": before},
            after={"rubric_floor": floor},
        )
    return locked


def _finish(
    replay: ReplayRun,
    report: core.ReplayReport,
    rows: list[ReplayCase],
    *,
    actor: Actor,
    rubric: FloorResult | dict[str, Any] | None = None,
) -> ReplayRun:
    gate = _gate_report(report, rubric)
    with transaction.atomic(durable=True):
        locked = ReplayRun.objects.select_for_update().get(pk=replay.pk)
        if locked.status != ReplayStatus.RUNNING:
            return locked
        ReplayCase.objects.bulk_create(rows, batch_size=2000)
        locked.metrics = {
            "candidate": dict(report.metrics),
            "active": report.active_metrics and dict(report.active_metrics),
        }
        locked.gate_report = gate
        locked.report = _report_summary(report)
        locked.status = ReplayStatus.DONE
        locked.finished_at = timezone.now()
        locked.save(update_fields=["metrics", "gate_report", "report", "status", "finished_at"])
        status = _settle_version(locked.version_id)
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
                "version_status": status,
            },
        )
    return locked


def _fail(replay: ReplayRun, *, actor: Actor, error: str) -> ReplayRun:
    with transaction.atomic(durable=True):
        locked = ReplayRun.objects.select_for_update().get(pk=replay.pk)
        if locked.status not in (ReplayStatus.QUEUED, ReplayStatus.RUNNING):
            return locked
        before = locked.status
        locked.status = ReplayStatus.FAILED
        locked.error = error[:2000]
        locked.finished_at = timezone.now()
        locked.save(update_fields=["status", "error", "finished_at"])
        status = _settle_version(locked.version_id)
        audit_record(
            actor=actor,
            verb="replay.fail",
            target=locked,
            before={"status": before},
            after={"status": "failed", "error": locked.error, "version_status": status},
        )
    return locked


def _settle_version(version_id: int) -> str:
    """Inside a transaction: once no replay of the version is queued or running, it becomes ready when every
    replay finished with a passing gate, else failed. Only a candidate or replaying version moves."""
    version = ProcedureVersion.objects.select_for_update().get(pk=version_id)
    if version.status not in (VersionStatus.CANDIDATE, VersionStatus.REPLAYING):
        return version.status
    replays = list(ReplayRun.objects.filter(version_id=version_id).values_list("status", "gate_report"))
    if any(status in (ReplayStatus.QUEUED, ReplayStatus.RUNNING) for status, _ in replays):
        return version.status
    passed = bool(replays) and all(
        status == ReplayStatus.DONE and gate and gate.get("passed") for status, gate in replays
    )
    version.status = VersionStatus.READY if passed else VersionStatus.FAILED
    version.save(update_fields=["status"])
    return version.status


def replays_reaped(replay_ids: list[int]) -> None:
    """Called by the stuck-work reaper inside its transaction: the versions of reaped (failed) replays settle."""
    for version_id in set(ReplayRun.objects.filter(pk__in=replay_ids).values_list("version_id", flat=True)):
        _settle_version(version_id)


# --- live replay ----------------------------------------------------------------------------------------------------
def replay_subject(replay: ReplayRun | int) -> str:
    return f"procedures.replayrun:{getattr(replay, 'pk', replay)}"


def replay_live_start(*, replay: ReplayRun, actor: Actor | None = None) -> ReplayRun:
    """Queue one job per held-out case and arm (candidate, and active when compared) for agents to answer."""
    actor = actor or Actor.system()
    replay = ReplayRun.objects.select_related("version__procedure", "compared_with").get(pk=replay.pk)
    if replay.mode != ReplayMode.LIVE:
        return replay
    tasks_by_run = dict(Run.objects.filter(pk__in=replay.held_out_run_ids).values_list("pk", "task"))
    arms = [(ReplayArm.CANDIDATE, replay.version)]
    if replay.compared_with is not None:
        arms.append((ReplayArm.ACTIVE, replay.compared_with))
    payloads = [
        {
            "replay": replay.pk,
            "arm": arm,
            "case_run_id": pk,
            "task": tasks_by_run.get(pk, ""),
            "intent": replay.version.procedure.intent,
            "procedure": {"version": version.number, "steps": version.steps},
        }
        for pk in replay.held_out_run_ids
        for arm, version in arms
    ]
    with transaction.atomic(durable=True):
        started = ReplayRun.objects.filter(pk=replay.pk, status=ReplayStatus.QUEUED).update(
            status=ReplayStatus.RUNNING, started_at=timezone.now()
        )
        if not started:
            return ReplayRun.objects.get(pk=replay.pk)
        ProcedureVersion.objects.filter(pk=replay.version_id, status=VersionStatus.CANDIDATE).update(
            status=VersionStatus.REPLAYING
        )
        jobs = jobs_create(
            kind=REPLAY_JOB_KIND, subject=replay_subject(replay), payloads=payloads, deadline=replay.deadline
        )
        audit_record(
            actor=actor,
            verb="replay.start",
            target=replay,
            before={"status": "queued"},
            after={"status": "running", "jobs": len(jobs), "deadline": replay.deadline and replay.deadline.isoformat()},
        )
    return ReplayRun.objects.get(pk=replay.pk)


def replay_live_settle(*, replay: ReplayRun, actor: Actor | None = None, now: datetime | None = None) -> ReplayRun:
    """Finish a live replay when every job is answered or its deadline has passed; otherwise leave it running.
    Unanswered cases are reported as unanswered (never passes); their jobs expire."""
    actor = actor or Actor.system()
    now = now or timezone.now()
    replay = ReplayRun.objects.select_related("version__procedure", "compared_with").get(pk=replay.pk)
    if replay.mode != ReplayMode.LIVE or replay.status != ReplayStatus.RUNNING:
        return replay
    jobs = list(Job.objects.filter(subject=replay_subject(replay)).values_list("status", "payload", "result_run_id"))
    open_jobs = [job for job in jobs if job[0] in (JobStatus.QUEUED, JobStatus.LEASED)]
    overdue = replay.deadline is not None and replay.deadline <= now
    if open_jobs and not overdue:
        return replay
    answered = {
        (payload["arm"], payload["case_run_id"]): run_id
        for status, payload, run_id in jobs
        if status == JobStatus.DONE and run_id is not None
    }
    runs = _case_runs(list(set(answered.values())))
    cases = [
        core.ReplayCase(
            case_id=str(pk),
            run=runs.get(answered.get((ReplayArm.CANDIDATE, pk))),
            active_run=runs.get(answered.get((ReplayArm.ACTIVE, pk))),
        )
        for pk in replay.held_out_run_ids
    ]
    report = core.replay_procedure(
        _procedure_steps(replay.version), cases, active=_procedure_steps(replay.compared_with), mode="live"
    )
    rows = _case_rows(replay, report, result_runs=answered)
    rubric = _live_rubric_floor(replay.version.procedure, answered)
    if rubric is not None and rubric.pending:  # another settle is judging; a later one (or the deadline) finishes
        return replay
    if open_jobs:
        with transaction.atomic(durable=True):
            expired = jobs_expire(subject=replay_subject(replay), now=now)
            audit_record(actor=actor, verb="replay.deadline", target=replay, after={"expired_jobs": expired})
    return _finish(replay, report, rows, actor=actor, rubric=rubric)


def overdue_live_replays(now: datetime | None = None) -> list[int]:
    now = now or timezone.now()
    return list(
        ReplayRun.objects.filter(mode=ReplayMode.LIVE, status=ReplayStatus.RUNNING, deadline__lte=now).values_list(
            "pk", flat=True
        )
    )


# --- periodic mining -------------------------------------------------------------------------------------------------
def intents_due_for_mining(*, min_new_runs: int | None = None) -> list[str]:
    """Intent keys with at least `min_new_runs` successful runs newer than what their procedure last considered."""
    threshold = settings.WAYMARK_MINE_MIN_NEW_RUNS if min_new_runs is None else min_new_runs
    marks = dict(Procedure.objects.values_list("intent", "mined_through_run_id"))
    counts: dict[str, int] = {}
    rows = (
        Run.objects.filter(outcome=Outcome.SUCCESS)
        .exclude(intent="")
        .values_list("intent")
        .order_by()
        .annotate(newest=Max("pk"))
    )
    for label, _newest in rows:
        key = intent_key(label)
        if not key:
            continue
        counts[key] = (
            counts.get(key, 0)
            + Run.objects.filter(outcome=Outcome.SUCCESS, intent=label, pk__gt=marks.get(key, 0)).count()
        )
    return sorted(key for key, count in counts.items() if count >= threshold)
