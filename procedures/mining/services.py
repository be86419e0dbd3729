"""Mining an intent's stored runs into a procedure version (and queueing its replays), and finding the intents due
for mining again.

`procedure_mine` runs named steps: check the request, split the intent's runs (versions.split: once, into a temporary
table), learn the procedure from the training successes' ok steps streamed as columns, and store the version with its
run-id lists written from that table (or find the same content stored already). Nothing per run is held in Python
on PostgreSQL, so memory stays flat in the number of runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common.text import plain_identifier_error
from intents.taxonomy.selectors import RunGroup, runs_of_intent
from procedures import core
from procedures.core.columns import learn_streamed
from procedures.core.learn import INTENT_OR_RUNS_MISSING
from trajectories.choices import Outcome
from trajectories.selectors import run_queryset, step_columns

from .. import active_body
from ..errors import MiningError
from ..models import Procedure, ProcedureVersion, ReplayMode, ReplayRun
from ..replay.services.lifecycle import (
    enqueue_replay_on_commit,
    has_live_replay,
    modes_to_rerun,
    queue_replay,
    requeue_replays,
)
from ..versions.split import RUN_LISTS, RunSplit, create_with_run_lists, split_runs
from . import content_revision, decode_arguments, intent_key, trajectory_id

MIN_SUCCESSFUL_RUNS = 2


@dataclass(frozen=True)
class MineResult:
    version: ProcedureVersion
    created: bool
    replays: tuple[ReplayRun, ...] = ()


@dataclass(frozen=True)
class Learnt:
    """What the training side of a split teaches: the candidate, its steps as a version stores them, and the split
    told how many training runs had ok steps (RunSplit.mined)."""

    candidate: core.ProcedureCandidate
    steps: list[dict[str, Any]]
    split: RunSplit


def procedure_mine(
    *,
    actor: Actor,
    intent: str,
    held_out_share: float = 0.3,
    seed: int = 17,
    live: bool | None = None,
    source: str | None = None,
) -> MineResult:
    """Mine the intent's successful runs into a version and queue its replay.

    Successful and failed runs are split alike (versions.split: seeded, `held_out_share` held out); only the training
    successful runs are mined, each with its `ok is True` steps (a run left empty is skipped). An identical
    version (same content revision) is returned, not stored twice. Raises MiningError with the reason.

    `source` mines only that source's runs of the intent (the demo's own, procedures.demo); such a mining leaves the
    procedure's mined-through mark where it was, so periodic mining still counts the other runs as new."""
    require_role(actor, Role.OPERATOR, doing="mining procedures", system=True)
    _check_mining_request(intent, held_out_share)
    live = settings.WAYMARK_LIVE_REPLAY if live is None else live
    group = runs_of_intent(intent_key(intent))  # by reviewed intent when the taxonomy has one, else by label
    runs = group.runs if source is None else group.runs.filter(source=source)
    with split_runs(runs, held_out_share=held_out_share, seed=seed) as split:  # its table dropped after
        _check_enough_successes(split, f"intent {group.key!r}" + (f" from source {source!r}" if source else ""))
        learnt = learn_from_split(group.key, split)
        return _store_mined_version(
            actor=actor,
            group=group,
            learnt=learnt,
            live=live,
            held_out_share=held_out_share,
            seed=seed,
            mark=source is None,
        )


def _check_mining_request(intent: object, held_out_share: object) -> None:
    if not isinstance(intent, str) or not intent_key(intent):
        raise MiningError("an intent is required")
    if problem := plain_identifier_error(intent.strip()):  # the intent names the procedure
        raise MiningError(f"the intent {problem}")
    if isinstance(held_out_share, bool) or not 0 < held_out_share < 1:
        raise MiningError("held_out_share must be between 0 and 1 (exclusive)")


def _check_enough_successes(split: RunSplit, what: str) -> None:
    if split.successes < MIN_SUCCESSFUL_RUNS:
        raise MiningError(
            f"{what} has {split.successes} successful run(s); mining needs at least {MIN_SUCCESSFUL_RUNS}"
            " (one to learn from, one to replay on)"
        )


def learn_from_split(key: str, split: RunSplit) -> Learnt:
    """Learn the procedure from the split's training successful runs' `ok is True` steps, streamed as columns in
    ascending run id order (a run left empty is skipped): exactly learn_procedure's candidate, without its source
    ids (the version's source list is written from the database)."""

    mined = []  # runs streamed by each pass (learn_streamed reads the runs at most twice)

    def training_runs():
        mined.append(0)
        for pk, tools, arguments in step_columns(split.training_success_ids(), only_ok=True):
            mined[-1] += 1
            yield trajectory_id(pk), tools, arguments

    try:
        candidate = learn_streamed(training_runs, intent=key, decode=decode_arguments, keep_source_ids=False)
    except ValueError as exc:
        if str(exc) == INTENT_OR_RUNS_MISSING:  # the intent key is never blank: no run had an ok step
            raise MiningError(f"no training run of intent {key!r} has a step with ok true") from exc
        raise MiningError(f"intent {key!r}: {exc}") from exc
    return Learnt(candidate=candidate, steps=[step.to_dict() for step in candidate.steps], split=split.mined(mined[0]))


def next_version_number(procedure: Procedure) -> int:
    return (ProcedureVersion.objects.filter(procedure=procedure).aggregate(n=Max("number"))["n"] or 0) + 1


def _store_mined_version(
    *, actor: Actor, group: RunGroup, learnt: Learnt, live: bool, held_out_share: float, seed: int, mark: bool = True
) -> MineResult:
    """In one transaction: the procedure (created on first mining) with its mined-through mark (moved only when
    `mark`), then a new version with its split and replays, or, for content stored already, that version with its
    failed replays queued again."""
    revision = content_revision(intent=group.key, steps=learnt.steps)
    with transaction.atomic(durable=True):
        newest = learnt.split.newest if mark else 0
        procedure, before_mark = _procedure_marked(actor=actor, group=group, newest=newest)
        same_content = ProcedureVersion.objects.filter(procedure=procedure, content_revision=revision)
        existing = same_content.defer(*RUN_LISTS).first()  # its run-id lists stay unread (flat memory)
        if existing is not None:
            return _mined_again(actor=actor, procedure=procedure, version=existing, before_mark=before_mark, live=live)
        version, sizes = create_with_run_lists(
            ProcedureVersion,
            learnt.split,
            procedure=procedure,
            number=next_version_number(procedure),
            parent_id=procedure.active_version_id,
            steps=learnt.steps,
            candidate_revision=learnt.candidate.revision,
            content_revision=revision,
            created_by=actor.user,
        )
        replays = [queue_replay(version, procedure, ReplayMode.OFFLINE)]
        if live:
            replays.append(queue_replay(version, procedure, ReplayMode.LIVE))
        audit_record(
            actor=actor,
            verb="procedure_version.create",
            target=version,
            after={
                "procedure": procedure.intent,
                "grouping": group.grouping,
                "number": version.number,
                "tools": version.tools,
                "content_revision": revision,
                "candidate_revision": learnt.candidate.revision,
                "sources": sizes.sources,
                "held_out": sizes.held_out,
                "skipped": sizes.skipped,
                "split": {"held_out_share": held_out_share, "seed": seed},
                "replays": [replay.mode for replay in replays],
            },
        )
        for replay in replays:
            enqueue_replay_on_commit(replay)
    return MineResult(version=version, created=True, replays=tuple(replays))


def _procedure_marked(*, actor: Actor, group: RunGroup, newest: int) -> tuple[Procedure, int]:
    """Inside the mining transaction: the intent's procedure (created and audited on first mining), locked, with its
    mined-through mark moved up to `newest`; returns it with the mark it had before."""
    procedure, created = Procedure.objects.get_or_create(intent=group.key, defaults={"title": group.title})
    procedure = Procedure.objects.select_for_update().get(pk=procedure.pk)
    if created:
        audit_record(
            actor=actor, verb="procedure.create", target=procedure, after={"intent": group.key, "title": group.title}
        )
    before_mark = procedure.mined_through_run_id
    if newest > before_mark:
        Procedure.objects.filter(pk=procedure.pk).update(mined_through_run_id=newest, updated_at=timezone.now())
        active_body.changed()
        procedure.mined_through_run_id = newest
    return procedure, before_mark


def _mined_again(
    *, actor: Actor, procedure: Procedure, version: ProcedureVersion, before_mark: int, live: bool
) -> MineResult:
    """The same content mined again: nothing new is stored but the mark (audited as procedure.mined); a replay that
    errored or gave up (not one whose gate failed) is queued anew, and a live replay when asked for and the version
    has none queued, running or done."""
    if procedure.mined_through_run_id > before_mark:
        audit_record(
            actor=actor,
            verb="procedure.mined",
            target=procedure,
            before={"mined_through_run_id": before_mark},
            after={
                "mined_through_run_id": procedure.mined_through_run_id,
                "version": version.number,
                "new_version": False,
            },
        )
    modes = modes_to_rerun(version, errored_only=True)
    if live and ReplayMode.LIVE not in modes and not has_live_replay(version):
        modes.append(ReplayMode.LIVE)
    replays = requeue_replays(version, procedure, actor=actor, modes=modes)
    return MineResult(version=version, created=False, replays=replays)


# --- periodic mining -------------------------------------------------------------------------------------------------
def intents_due_for_mining(*, min_new_runs: int | None = None) -> list[str]:
    """Intent keys with at least `min_new_runs` successful production runs newer than what their procedure last
    considered."""
    threshold = settings.WAYMARK_MINE_MIN_NEW_RUNS if min_new_runs is None else min_new_runs
    marks = dict(Procedure.objects.values_list("intent", "mined_through_run_id"))
    successes = run_queryset().production().filter(outcome=Outcome.SUCCESS)
    counts: dict[str, int] = {}
    labels = successes.exclude(intent="").values_list("intent", flat=True).distinct().order_by()
    for label in labels:
        key = intent_key(label)
        if not key:
            continue
        counts[key] = counts.get(key, 0) + successes.filter(intent=label, pk__gt=marks.get(key, 0)).count()
    return sorted(key for key, count in counts.items() if count >= threshold)
