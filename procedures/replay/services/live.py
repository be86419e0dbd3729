"""Live replay: agents answer each held-out case with the candidate version (and the active one, when compared) as
evaluation jobs; the replay settles when every job is answered or its deadline passed, with the rubric floor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounts.services import Actor, audit_record
from procedures import core
from rubrics.floor import FloorResult, rubric_floor_check
from trajectories.choices import JobStatus
from trajectories.core import TrajectoryStep
from trajectories.job_services import answering_agents, jobs_create, jobs_expire
from trajectories.selectors import jobs_for_subject, run_queryset, runs_with_steps

from ...models import (
    Procedure,
    ProcedureVersion,
    ReplayArm,
    ReplayCase,
    ReplayMode,
    ReplayRun,
    ReplayStatus,
    VersionStatus,
)
from ..certification import CasePairs
from ..spooled_cases import arms, case_payload
from .lifecycle import finish_replay, procedure_steps

logger = logging.getLogger("waymark.procedures")
REPLAY_JOB_KIND = "procedure_replay"


def _recorded_runs(run_ids: Sequence[int]) -> dict[int, core.CaseRun]:
    """The runs among `run_ids` with all their steps, as core values (a live replay's answers: a few runs; two
    queries)."""
    return {
        pk: core.CaseRun(
            outcome=run.outcome,
            steps=[
                TrajectoryStep(
                    step.ordinal,
                    step.tool,
                    step.action_family,
                    step.arguments or {},
                    ok=step.ok,
                    input_tokens=step.input_tokens,
                    cached_input_tokens=step.cached_input_tokens,
                    output_tokens=step.output_tokens,
                    cost=step.cost,
                )
                for step in run.steps.all()
            ],
            tokens=run.total_tokens,
            cost=run.cost,
        )
        for pk, run in runs_with_steps(list(run_ids)).items()
    }


def _case_rows(
    replay: ReplayRun, report: core.ReplayReport, *, result_runs: dict[tuple[str, int], int]
) -> list[ReplayCase]:
    rows = []
    for case in report.cases:
        case_run_id = int(case.case_id)
        for arm, result in arms(case):
            rows.append(
                ReplayCase(
                    replay=replay,
                    arm=arm,
                    case_run_id=case_run_id,
                    result_run_id=result_runs.get((arm, case_run_id)),
                    result=case_payload(case, result),
                    answered=result.answered,
                )
            )
    return rows


def _unguided(run: core.CaseRun | None) -> core.ArmResult:
    """The none arm's result: a run made without any procedure passes when it succeeded."""
    if run is None:
        return core.ArmResult(answered=False, passed=False)
    return core.ArmResult(
        answered=True,
        passed=run.outcome == "success",
        outcome=run.outcome,
        steps=len(run.steps),
        tokens=run.tokens,
        cost=run.cost,
    )


def _paired(
    replay: ReplayRun,
    report: core.ReplayReport,
    runs: dict[int, core.CaseRun],
    answered: dict[tuple[str, int], int],
    rows: list[ReplayCase],
) -> CasePairs:
    """Every case paired across the candidate and the control arm (the active version, or no procedure: whose
    case rows are added to `rows`)."""
    against_none = replay.compared_with_id is None
    pairs = CasePairs(against_none=against_none)
    control_arm = ReplayArm.NONE if against_none else ReplayArm.ACTIVE
    for case in report.cases:
        pk = int(case.case_id)
        control = None
        if against_none:
            control_run = answered.get((ReplayArm.NONE, pk))
            control = _unguided(runs.get(control_run))
            rows.append(
                ReplayCase(
                    replay=replay,
                    arm=ReplayArm.NONE,
                    case_run_id=pk,
                    result_run_id=control_run,
                    result=case_payload(case, control),
                    answered=control.answered,
                )
            )
        run_ids = {"candidate": answered.get((ReplayArm.CANDIDATE, pk)), "control": answered.get((control_arm, pk))}
        pairs.add(case, control=control, runs=run_ids)
    return pairs


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


# --- live replay ----------------------------------------------------------------------------------------------------
def replay_subject(replay: ReplayRun | int) -> str:
    return f"procedures.replayrun:{getattr(replay, 'pk', replay)}"


def replay_live_start(*, replay: ReplayRun, actor: Actor | None = None) -> ReplayRun:
    """Queue one job per held-out case and arm for agents to answer: the candidate, and the active version it is
    compared with or, for a first version, no procedure (`"procedure": null`: the agent runs unguided)."""
    actor = actor or Actor.system()
    replay = ReplayRun.objects.select_related("version__procedure", "compared_with").get(pk=replay.pk)
    if replay.mode != ReplayMode.LIVE:
        return replay
    tasks_by_run = dict(run_queryset().filter(pk__in=replay.held_out_run_ids).values_list("pk", "task"))
    # The control arm: the version it replaces, or (a first version) no procedure at all.
    control = (ReplayArm.ACTIVE, replay.compared_with) if replay.compared_with is not None else (ReplayArm.NONE, None)
    arms = [(ReplayArm.CANDIDATE, replay.version), control]
    payloads = [
        {
            "replay": replay.pk,
            "arm": arm,
            "case_run_id": pk,
            "task": tasks_by_run.get(pk, ""),
            "intent": replay.version.procedure.intent,
            "procedure": None if version is None else {"version": version.number, "steps": version.steps},
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
    jobs = [(job.status, job.payload, job.result_run_id) for job in jobs_for_subject(replay_subject(replay))]
    open_jobs = [job for job in jobs if job[0] in (JobStatus.QUEUED, JobStatus.LEASED)]
    overdue = replay.deadline is not None and replay.deadline <= now
    if open_jobs and not overdue:
        return replay
    answered = {
        (payload["arm"], payload["case_run_id"]): run_id
        for status, payload, run_id in jobs
        if status == JobStatus.DONE and run_id is not None
    }
    runs = _recorded_runs(list(set(answered.values())))
    cases = [
        core.ReplayCase(
            case_id=str(pk),
            run=runs.get(answered.get((ReplayArm.CANDIDATE, pk))),
            active_run=runs.get(answered.get((ReplayArm.ACTIVE, pk))),
        )
        for pk in replay.held_out_run_ids
    ]
    report = core.replay_procedure(
        procedure_steps(replay.version), cases, active=procedure_steps(replay.compared_with), mode="live"
    )
    rows = _case_rows(replay, report, result_runs=answered)
    pairs = _paired(replay, report, runs, answered, rows)
    rubric = _live_rubric_floor(replay.version.procedure, answered)
    if rubric is not None and rubric.pending:  # another settle is judging; a later one (or the deadline) finishes
        return replay
    if open_jobs:
        with transaction.atomic(durable=True):
            expired = jobs_expire(subject=replay_subject(replay), now=now)
            audit_record(actor=actor, verb="replay.deadline", target=replay, after={"expired_jobs": expired})
    agents = answering_agents(replay_subject(replay))
    return finish_replay(replay, report, rows, actor=actor, rubric=rubric, agents=agents, pairs=pairs)


def overdue_live_replays(now: datetime | None = None) -> list[int]:
    now = now or timezone.now()
    return list(
        ReplayRun.objects.filter(mode=ReplayMode.LIVE, status=ReplayStatus.RUNNING, deadline__lte=now).values_list(
            "pk", flat=True
        )
    )
