"""Every write in procedures: mining a version, offline and live replay.

Status of a version: candidate (stored) → replaying (a replay started) → ready (every replay's gate passed) or
failed. A version becomes active only through reviews: an applied promotion request (procedures/promotable.py)
moves the pointer and retires the previous active version.

An offline replay is claimed with a lease (a conditional update: queued, or running with a lease that ran out) and
renews it at every stage. A worker that dies leaves the lease to run out: the redelivered message (or the beat's
`replays_to_requeue`) takes the replay over and finishes it once (`_finish` writes the cases, the gate report and
the status in one transaction, only for the lease holder). After `WAYMARK_REPLAY_MAX_ATTEMPTS` claims the replay
fails with "gave up after N attempts: <the last error, or the worker died>". A failed replay is run again by an
operator (`replay_rerun`) or by mining the same content again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import batched, islice
from operator import lt
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import F, Max, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.services import Actor, audit_record
from intents.taxonomy_selectors import runs_of_intent
from procedures import core
from procedures.core.columns import OfflineReplay, learn_streamed
from procedures.core.gate import regression_gate
from procedures.core.learn import INTENT_OR_RUNS_MISSING
from reviews.rubric_floor import FloorResult, rubric_floor_check
from trajectories.core import TrajectoryStep
from trajectories.job_services import answering_agents, jobs_create, jobs_expire
from trajectories.models import Job, JobStatus, Outcome, Run, Step
from trajectories.selectors import run_columns, step_columns

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


class ReplayRefused(ValueError):
    """A replay cannot be run again as asked; the message says why. Nothing was written."""


class LeaseLost(Exception):
    """Another worker took this offline replay over (our lease ran out): stop without writing."""


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


def _recorded_runs(run_ids: Sequence[int]) -> dict[int, core.CaseRun]:
    """The runs among `run_ids` with all their steps, as core values (a live replay's answers: a few runs)."""
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


def _arguments(text: Any) -> Any:
    """A step's arguments read as JSON text (trajectories.selectors.step_columns), as the ORM would give them, with
    a null or empty value as {}: what `_steps_by_run` puts in a TrajectoryStep."""
    if isinstance(text, str | bytes):
        with contextlib.suppress(json.JSONDecodeError):  # the ORM hands undecodable text over as it is
            text = json.loads(text)
    return text or {}


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


def _case_runs(run_ids: Sequence[int]) -> _HeldOut:
    """An offline replay's recorded cases (see _HeldOut)."""
    return _HeldOut(run_ids)


def _offline_replay(replay: ReplayRun) -> OfflineReplay:
    return OfflineReplay(
        _procedure_steps(replay.version), active=_procedure_steps(replay.compared_with), decode=_arguments
    )


def _judged(offline: OfflineReplay, recorded: _HeldOut) -> Iterator[core.CaseResult]:
    for pk, run in recorded:
        if run is None:
            yield offline.case(str(pk), None)
        else:
            outcome, tokens, cost, tools, arguments = run
            yield offline.case(str(pk), (outcome, tools, arguments, tokens, cost))


def _procedure_steps(version: ProcedureVersion | None) -> tuple[core.ProcedureStep, ...] | None:
    if version is None:
        return None
    return tuple(core.ProcedureStep(tool=step["tool"], arguments=step.get("arguments") or {}) for step in version.steps)


# --- mining --------------------------------------------------------------------------------------------------------
def _check_miner(actor: Actor) -> None:
    if actor.user is not None and not actor.user.may_operate:
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
    for pk, outcome in runs.values_list("pk", "outcome").iterator(chunk_size=STEP_BATCH):  # not cached: flat
        by_outcome[outcome].append(pk)
        newest = max(newest, pk)
    successes = by_outcome[Outcome.SUCCESS]
    if len(successes) < MIN_SUCCESSFUL_RUNS:
        raise MiningError(
            f"intent {key!r} has {len(successes)} successful run(s); mining needs at least {MIN_SUCCESSFUL_RUNS}"
            " (one to learn from, one to replay on)"
        )
    learnt = _learn(key, successes, by_outcome[Outcome.FAILURE], held_out_share=held_out_share, seed=seed)
    candidate, steps, skipped = learnt.candidate, learnt.steps, learnt.skipped
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
            # The same content again: a replay that errored or gave up (not one whose gate failed) is queued anew,
            # and a live replay when asked for and the version has none queued, running or done.
            modes = _modes_to_rerun(existing, errored_only=True)
            if live and ReplayMode.LIVE not in modes and not _has_live_replay(existing):
                modes.append(ReplayMode.LIVE)
            replays = _requeue(existing, procedure, actor=actor, modes=modes)
            return MineResult(version=existing, created=False, replays=replays)
        number = (ProcedureVersion.objects.filter(procedure=procedure).aggregate(n=Max("number"))["n"] or 0) + 1
        version = ProcedureVersion.objects.create(
            procedure=procedure,
            number=number,
            parent=procedure.active_version,
            steps=steps,
            candidate_revision=candidate.revision,
            content_revision=revision,
            source_run_ids=learnt.sources,
            training_run_ids=learnt.training,
            held_out_run_ids=learnt.held_out,
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


@dataclass(frozen=True)
class Learnt:
    """What one split of an intent's runs teaches: the candidate, its steps and the split's run ids."""

    candidate: core.ProcedureCandidate
    steps: list[dict[str, Any]]
    sources: list[int]
    training: list[int]
    held_out: list[int]
    skipped: list[int]


def _learn(key: str, successes: list[int], failures: list[int], *, held_out_share: float, seed: int) -> Learnt:
    """Split successful and failed runs alike (sorted ids, seeded shuffle, `held_out_share` held out) and learn the
    procedure from the training successful runs' `ok is True` steps (a run left empty is skipped)."""
    good = split_ids(successes, held_out_share=held_out_share, seed=seed, at_least_one=True)
    bad = split_ids(failures, held_out_share=held_out_share, seed=seed)

    def training_runs() -> Iterator[tuple[str, list[str], list[str]]]:
        for pk, tools, arguments in step_columns(good.training, only_ok=True):
            yield trajectory_id(pk), tools, arguments

    try:
        candidate = learn_streamed(training_runs, intent=key, decode=_arguments)
    except ValueError as exc:
        if str(exc) == INTENT_OR_RUNS_MISSING:  # the intent key is never blank: no run had an ok step
            raise MiningError(f"no training run of intent {key!r} has a step with ok true") from exc
        raise MiningError(f"intent {key!r}: {exc}") from exc
    sources = [int(source) for source in candidate.source_trajectory_ids]
    return Learnt(
        candidate=candidate,
        steps=[step.to_dict() for step in candidate.steps],
        sources=sources,
        training=sorted(good.training + bad.training),
        held_out=sorted(good.held_out + bad.held_out),
        skipped=_missing(good.training, sources),
    )


def _missing(ids: Sequence[int], present: Sequence[int]) -> list[int]:
    """The ids (ascending) not in `present` (ascending, a subset of `ids`)."""
    missing, position = [], 0
    for pk in ids:
        if position < len(present) and present[position] == pk:
            position += 1
        else:
            missing.append(pk)
    return missing


def _queue_replay(
    version: ProcedureVersion, procedure: Procedure, mode: str, *, held_out: Sequence[int] | None = None
) -> ReplayRun:
    deadline = None
    if mode == ReplayMode.LIVE:
        deadline = timezone.now() + timedelta(seconds=settings.WAYMARK_LIVE_REPLAY_SECONDS)
    return ReplayRun.objects.create(
        version=version,
        compared_with=procedure.active_version,
        mode=mode,
        held_out_run_ids=list(version.held_out_run_ids if held_out is None else held_out),
        deadline=deadline,
    )


def _modes_to_rerun(version: ProcedureVersion, *, errored_only: bool) -> list[str]:
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


def _has_live_replay(version: ProcedureVersion) -> bool:
    open_or_done = (ReplayStatus.QUEUED, ReplayStatus.RUNNING, ReplayStatus.DONE)
    return ReplayRun.objects.filter(version=version, mode=ReplayMode.LIVE, status__in=open_or_done).exists()


# A version whose replays are run again (or joined by another mode) goes back to replaying: its status settles
# again from its newest replay of each mode (_settle_version). Active and retired versions keep their status.
RESETTLED = (VersionStatus.FAILED, VersionStatus.READY, VersionStatus.CANDIDATE)


def _requeue(
    version: ProcedureVersion,
    procedure: Procedure,
    *,
    actor: Actor,
    modes: Sequence[str],
    held_out: Sequence[int] | None = None,
    verb: str = "replay.rerun",
    note: dict[str, Any] | None = None,
) -> tuple[ReplayRun, ...]:
    """Inside the caller's transaction (procedure locked): queue a new replay per mode, on the version's held-out
    cases (or `held_out`: another split's), compared with today's active version; a failed or ready version goes
    back to replaying. Audited (`verb`, with `note` in the after state)."""
    if not modes:
        return ()
    version = ProcedureVersion.objects.select_for_update().get(pk=version.pk)
    before = version.status
    if before in RESETTLED:
        version.status = VersionStatus.REPLAYING
        version.save(update_fields=["status"])
    replays = tuple(_queue_replay(version, procedure, mode, held_out=held_out) for mode in modes)
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
        _enqueue_replay_on_commit(replay)
    return replays


def replay_rerun(*, actor: Actor, version: ProcedureVersion) -> tuple[ReplayRun, ...]:
    """An operator runs a failed version's replay again with the same settings (its held-out cases, each mode whose
    newest replay failed or did not pass its gate), compared with the version active now. ReplayRefused says why
    not (a replay still open, a version that did not fail)."""
    _check_miner(actor)
    with transaction.atomic(durable=True):
        procedure = Procedure.objects.select_for_update().get(pk=version.procedure_id)
        current = ProcedureVersion.objects.get(pk=version.pk)
        open_replays = ReplayRun.objects.filter(version=current, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING))
        if open_replays.exists():
            raise ReplayRefused(f"version {current.number} has a replay queued or running; wait for it")
        if current.status != VersionStatus.FAILED:
            raise ReplayRefused(f"only a failed version's replay is run again (v{current.number} is {current.status})")
        modes = _modes_to_rerun(current, errored_only=False) or [ReplayMode.OFFLINE]
        return _requeue(current, procedure, actor=actor, modes=modes)


def _check_split(held_out_share: object, seed: object) -> tuple[float, int]:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**31 - 1:
        raise ReplayRefused("the seed is a whole number from 0 to 2147483647")
    if isinstance(held_out_share, bool) or not isinstance(held_out_share, int | float) or not 0 < held_out_share < 1:
        raise ReplayRefused("the held-out share is a number between 0 and 1 (exclusive)")
    return float(held_out_share), seed


def procedure_version_resplit(
    *, actor: Actor, version: ProcedureVersion, seed: int, held_out_share: float, live: bool = False
) -> MineResult:
    """Re-run a version's replay on another split (seed, held-out share) of the runs it was mined from.

    The version's runs (its training and held-out runs, nothing newer: mining again is for new runs) are split
    anew and learnt from as mining does. The held-out side must not have taught the steps it is replayed on, so:
    - the new training side learns the same content (steps, with the version's preconditions and failure exits) as
      a stored version (this one or another): that version is replayed on the new held-out runs (offline, and live
      when asked); its own recorded split stays as mined (versions are immutable), each replay keeps its own cases;
    - it learns other content: a new version (parent: this one) holding the new split, replayed like a mined one.
    Audited as replay.resplit or procedure_version.resplit with the split. ReplayRefused says why not (a bad seed
    or share, a replay still open); MiningError when the split leaves nothing to learn from."""
    _check_miner(actor)
    held_out_share, seed = _check_split(held_out_share, seed)
    split = {"seed": seed, "held_out_share": held_out_share}
    with transaction.atomic(durable=True):
        procedure = Procedure.objects.select_for_update().get(pk=version.procedure_id)
        source = ProcedureVersion.objects.get(pk=version.pk)
        open_replays = ReplayRun.objects.filter(version=source, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING))
        if open_replays.exists():
            raise ReplayRefused(f"version {source.number} has a replay queued or running; wait for it")
        run_ids = sorted(set(source.training_run_ids) | set(source.held_out_run_ids))
        by_outcome: dict[str, list[int]] = {Outcome.SUCCESS: [], Outcome.FAILURE: []}
        for pk, outcome in Run.objects.filter(pk__in=run_ids).values_list("pk", "outcome"):
            by_outcome.setdefault(outcome, []).append(pk)
        successes = by_outcome[Outcome.SUCCESS]
        if len(successes) < MIN_SUCCESSFUL_RUNS:
            raise MiningError(f"version {source.number} has {len(successes)} successful run(s) to split")
        learnt = _learn(
            procedure.intent, successes, by_outcome[Outcome.FAILURE], held_out_share=held_out_share, seed=seed
        )
        revision = content_revision(
            intent=procedure.intent,
            steps=learnt.steps,
            preconditions=source.preconditions,
            failure_exits=source.failure_exits,
        )
        modes = [ReplayMode.OFFLINE, *([ReplayMode.LIVE] if live else [])]
        same = ProcedureVersion.objects.filter(procedure=procedure, content_revision=revision).first()
        if same is not None:
            if (
                same.pk != source.pk
                and ReplayRun.objects.filter(
                    version=same, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING)
                ).exists()
            ):
                raise ReplayRefused(f"this split learns version {same.number}, which has a replay open; wait for it")
            note = {"split": split, "learnt_from": f"v{source.number}"}
            replays = _requeue(
                same, procedure, actor=actor, modes=modes, held_out=learnt.held_out, verb="replay.resplit", note=note
            )
            return MineResult(version=same, created=False, replays=replays)
        number = (ProcedureVersion.objects.filter(procedure=procedure).aggregate(n=Max("number"))["n"] or 0) + 1
        new = ProcedureVersion.objects.create(
            procedure=procedure,
            number=number,
            parent=source,
            steps=learnt.steps,
            preconditions=source.preconditions,
            failure_exits=source.failure_exits,
            candidate_revision=learnt.candidate.revision,
            content_revision=revision,
            source_run_ids=learnt.sources,
            training_run_ids=learnt.training,
            held_out_run_ids=learnt.held_out,
            skipped_run_ids=learnt.skipped,
            created_by=actor.user,
        )
        replays = tuple(_queue_replay(new, procedure, mode) for mode in modes)
        audit_record(
            actor=actor,
            verb="procedure_version.resplit",
            target=new,
            before={"parent": source.number},
            after={
                "number": number,
                "tools": new.tools,
                "content_revision": revision,
                "held_out": len(new.held_out_run_ids),
                "split": split,
                "replays": [replay.mode for replay in replays],
            },
        )
        for replay in replays:
            _enqueue_replay_on_commit(replay)
    return MineResult(version=new, created=True, replays=replays)


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
def replay_lease_seconds() -> int:
    """An offline replay's lease; by default the task time limit, so a replay slower than its heartbeats is killed
    by Celery before another worker could take it over."""
    default = getattr(settings, "CELERY_TASK_TIME_LIMIT", None) or 15 * 60
    return int(getattr(settings, "WAYMARK_REPLAY_LEASE_SECONDS", default))


def replay_max_attempts() -> int:
    return int(getattr(settings, "WAYMARK_REPLAY_MAX_ATTEMPTS", 3))


def replay_worker_name(task_id: str | None = None) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{task_id or uuid.uuid4().hex[:12]}"[:200]


_VERSION_RUN_LISTS = tuple(
    f"{version}__{field}"
    for version in ("version", "compared_with")
    for field in ("source_run_ids", "training_run_ids", "held_out_run_ids", "skipped_run_ids")
)


def _claim(replay_id: int, worker: str, *, actor: Actor, now: datetime | None = None) -> ReplayRun | None:
    """Take an offline replay that is queued, or running with a lease that ran out (its worker died), with a lease;
    the version moves to replaying. None when it is finished or another worker holds it."""
    now = now or timezone.now()
    free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    with transaction.atomic(durable=True):
        before = ReplayRun.objects.filter(pk=replay_id).values("status", "lease_owner").first()
        taken = ReplayRun.objects.filter(
            free, pk=replay_id, mode=ReplayMode.OFFLINE, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING)
        ).update(
            status=ReplayStatus.RUNNING,
            lease_owner=worker[:200],
            lease_expires_at=now + timedelta(seconds=replay_lease_seconds()),
            attempts=F("attempts") + 1,
            started_at=Coalesce(F("started_at"), Value(now)),
        )
        if not taken:
            return None
        replay = (
            ReplayRun.objects.select_related("version__procedure", "compared_with")
            .defer(*_VERSION_RUN_LISTS)  # the replay needs the versions' steps, not their run ids (flat memory)
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
    lease = timezone.now() + timedelta(seconds=replay_lease_seconds())
    held = ReplayRun.objects.filter(pk=replay.pk, lease_owner=worker, status=ReplayStatus.RUNNING)
    if not held.update(lease_expires_at=lease):
        raise LeaseLost(f"replay {replay.pk} is no longer held by {worker} ({stage})")


def _release(replay: ReplayRun, worker: str, error: str) -> None:
    """A transient error: give the lease back (keeping the error) so Celery's retry can claim the replay again."""
    ReplayRun.objects.filter(pk=replay.pk, lease_owner=worker, status=ReplayStatus.RUNNING).update(
        lease_owner="", lease_expires_at=None, error=error[:2000]
    )


def _gave_up(replay: ReplayRun, attempts: int) -> str:
    return f"gave up after {attempts} attempts: {replay.error or 'the worker died'}"


def _transient_errors() -> tuple[type[BaseException], ...]:
    from config.celery import TRANSIENT_ERRORS

    return TRANSIENT_ERRORS


def replay_offline_run(*, replay: ReplayRun, actor: Actor | None = None, worker: str | None = None) -> ReplayRun:
    """Evaluate the version (and the one it is compared with) on the recorded held-out runs; store cases, metrics
    and the gate report, then settle the version's status. Does nothing unless the replay is queued, or running
    with an expired lease (its worker died: this call takes it over)."""
    actor = actor or Actor.system()
    worker = worker or replay_worker_name()
    claimed = _claim(replay.pk, worker, actor=actor)
    if claimed is None:
        return ReplayRun.objects.select_related("version__procedure", "compared_with").get(pk=replay.pk)
    replay = claimed
    limit = replay_max_attempts()
    if replay.attempts > limit:
        return _fail(replay, actor=actor, error=_gave_up(replay, limit), worker=worker)
    try:
        replay_heartbeat(replay, worker, "claimed")
        recorded = _case_runs(replay.held_out_run_ids)
        replay_heartbeat(replay, worker, "loaded")
        # Two streamed passes, so memory stays flat in the number of cases: the report (metrics and the gate), then
        # the case rows, judged again while _finish writes them.
        # One streamed pass, in memory flat in the number of cases: each case is judged, counted into the report
        # and written out as a row to a spooled file, which _finish copies into the table.
        offline = _offline_replay(replay)
        rows = _SpooledCases(replay.pk)
        for case in _judged(offline, recorded):
            rows.add(case)
        report = offline.report()
        replay_heartbeat(replay, worker, "replayed")
        rubric = _offline_rubric_note(replay.version.procedure)
        try:
            return _finish(replay, report, rows, actor=actor, rubric=rubric, worker=worker)
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
        return _fail(replay, actor=actor, error=f"{type(exc).__name__}: {exc}", worker=worker)


def replay_lease_wait(replay_id: int) -> float | None:
    """Seconds until the lease of a running offline replay runs out (None: finished, or nobody holds it)."""
    expires = (
        ReplayRun.objects.filter(pk=replay_id, status=ReplayStatus.RUNNING, lease_expires_at__isnull=False)
        .values_list("lease_expires_at", flat=True)
        .first()
    )
    return None if expires is None else max(0.0, (expires - timezone.now()).total_seconds())


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
            _fail(replay, actor=actor, error=_gave_up(replay, replay.attempts), expired_before=now)
        else:
            requeue.append(replay.pk)
    return requeue


def _case_rows(
    replay: ReplayRun, report: core.ReplayReport, *, result_runs: dict[tuple[str, int], int]
) -> list[ReplayCase]:
    rows = []
    for case in report.cases:
        case_run_id = int(case.case_id)
        for arm, result in _arms(case):
            rows.append(
                ReplayCase(
                    replay=replay,
                    arm=arm,
                    case_run_id=case_run_id,
                    result_run_id=result_runs.get((arm, case_run_id)),
                    result=_case_payload(case, result),
                    answered=result.answered,
                )
            )
    return rows


def _arms(case: core.CaseResult) -> list[tuple[str, core.ArmResult]]:
    arms = [(ReplayArm.CANDIDATE, case.candidate)]
    if case.active is not None:
        arms.append((ReplayArm.ACTIVE, case.active))
    return arms


def _case_payload(case: core.CaseResult, result: core.ArmResult) -> dict[str, Any]:
    payload = result.to_dict()
    payload["regression"] = case.regression
    payload["improvement"] = case.improvement
    return payload


class _SpooledCases:
    """An offline replay's case rows (no result run: recorded runs only), kept as lines of PostgreSQL COPY text in
    a spooled temporary file (in memory up to SPOOL_BYTES, then on disk), so memory stays flat in the number of
    cases; `_write_cases` copies them into the table (bulk_create batches on other databases)."""

    SPOOL_BYTES = 8 << 20
    COLUMNS = ("replay_id", "arm", "case_run_id", "result", "answered")

    def __init__(self, replay_id: int) -> None:
        self.replay_id = replay_id
        self._file = tempfile.SpooledTemporaryFile(max_size=self.SPOOL_BYTES, mode="w+b")  # noqa: SIM115 (closed by close())
        self._dumps = json.JSONEncoder(allow_nan=False).encode
        self._parts: dict[tuple, tuple[str, str]] = {}

    def add(self, case: core.CaseResult) -> None:
        regression, improvement = case.regression, case.improvement
        case_run_id = int(case.case_id)
        lines = []
        for arm, result in _arms(case):
            # The payload's JSON around tokens and cost repeats from case to case: formatted once per distinct key.
            key = (arm, result.answered, result.passed, result.outcome, result.follows, result.observed_arguments,
                   result.retained_arguments, result.steps, regression, improvement)  # fmt: skip
            parts = self._parts.get(key)
            if parts is None:
                parts = self._parts[key] = self._split(case, result)
            head, tail = parts
            tokens, cost = self._scalar(result.tokens), self._scalar(result.cost)
            lines.append(f'{self.replay_id}\t{arm}\t{case_run_id}\t{head}{tokens}, "cost": {cost}{tail}')
        self._file.write("".join(lines).encode())

    def _split(self, case: core.CaseResult, result: core.ArmResult) -> tuple[str, str]:
        """The result column's text before the payload's tokens value and after its cost value, then the answered
        column (COPY text: backslashes doubled)."""
        payload = _case_payload(case, result)
        keys = list(payload)
        at = keys.index("tokens")
        if keys[at + 1] != "cost":
            raise RuntimeError("the case payload must hold cost right after tokens")
        head = self._dumps({key: payload[key] for key in keys[:at]})[:-1] + ', "tokens": '
        tail = ", " + self._dumps({key: payload[key] for key in keys[at + 2 :]})[1:]
        escape = "\\", "\\\\"
        return head.replace(*escape), tail.replace(*escape) + f"\t{'t' if result.answered else 'f'}\n"

    def _scalar(self, value: Any) -> str:
        if type(value) is int or (type(value) is float and math.isfinite(value)):
            return repr(value)  # what json.dumps writes for them
        return self._dumps(value).replace("\\", "\\\\")

    def copy_into(self, cursor: Any, table: str) -> None:
        self._file.seek(0)
        with cursor.copy(f"COPY {table} ({', '.join(self.COLUMNS)}) FROM STDIN") as copy:
            while block := self._file.read(1 << 20):
                copy.write(block)

    def __iter__(self) -> Iterator[ReplayCase]:
        self._file.seek(0)
        for line in self._file:
            replay_id, arm, case_run_id, text, answered = line.decode().rstrip("\n").split("\t")
            yield ReplayCase(
                replay_id=int(replay_id),
                arm=arm,
                case_run_id=int(case_run_id),
                result=json.loads(text.replace("\\\\", "\\")),
                answered=answered == "t",
            )

    def close(self) -> None:
        self._file.close()


def _write_cases(rows: list[ReplayCase] | _SpooledCases) -> None:
    """Inside _finish's transaction: the case rows, by COPY when an offline replay spooled them on PostgreSQL."""
    if not isinstance(rows, _SpooledCases):
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
    agents: list[dict[str, Any]] | None = None,
    worker: str | None = None,
) -> ReplayRun:
    """Write the cases, metrics and gate report and settle the version, in one transaction, once: only a running
    replay (held by `worker`, for an offline one) is finished; cases a dead attempt could have left are replaced."""
    gate = _gate_report(report, rubric, agents)
    with transaction.atomic(durable=True):
        locked = ReplayRun.objects.select_for_update().get(pk=replay.pk)
        if locked.status != ReplayStatus.RUNNING or (worker is not None and locked.lease_owner != worker):
            return locked
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
        locked.lease_owner, locked.lease_expires_at = "", None
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
                **({"agents": [row["agent"] for row in agents]} if agents is not None else {}),
            },
        )
    return locked


def _fail(
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
        locked = ReplayRun.objects.select_for_update().get(pk=replay.pk)
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
        locked.lease_owner, locked.lease_expires_at = "", None
        locked.save(update_fields=["status", "error", "finished_at", "lease_owner", "lease_expires_at"])
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
    return _finish(replay, report, rows, actor=actor, rubric=rubric, agents=answering_agents(replay_subject(replay)))


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
