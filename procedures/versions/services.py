"""An operator's changes to a procedure and its versions: running a failed replay again, replaying on another
split of a version's runs, amending preconditions and failure exits (each a new immutable version), and the
rubric floor of live replays."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import QuerySet

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common.parsing import int_or_none
from intents.taxonomy.selectors import runs_of_intent
from trajectories.choices import Outcome
from trajectories.selectors import run_queryset

from ..errors import InvalidFloor, MiningError, ReplayRefused
from ..mining import content_revision
from ..mining.services import MIN_SUCCESSFUL_RUNS, MineResult, learn_from_split, next_version_number
from ..models import Procedure, ProcedureVersion, ReplayMode, ReplayRun, ReplayStatus, VersionStatus
from ..promotable import KIND as PROMOTION_KIND
from ..replay.services.lifecycle import (
    RESETTLED,
    enqueue_replay_on_commit,
    has_live_replay,
    modes_to_rerun,
    queue_replay,
    queue_replay_on,
    requeue_replays,
)
from .split import RUN_LISTS, create_with_run_lists, split_runs


def replay_rerun(*, actor: Actor, version: ProcedureVersion) -> tuple[ReplayRun, ...]:
    """An operator runs a failed version's replay again with the same settings (its held-out cases, each mode whose
    newest replay failed or did not pass its gate), compared with the version active now. ReplayRefused says why
    not (a replay still open, a version that did not fail)."""
    require_role(actor, Role.OPERATOR, doing="re-running a replay", system=True)
    with transaction.atomic(durable=True):
        procedure = Procedure.objects.select_for_update().get(pk=version.procedure_id)
        current = ProcedureVersion.objects.defer(*RUN_LISTS).get(pk=version.pk)
        open_replays = ReplayRun.objects.filter(version=current, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING))
        if open_replays.exists():
            raise ReplayRefused(f"version {current.number} has a replay queued or running; wait for it")
        if current.status != VersionStatus.FAILED:
            raise ReplayRefused(f"only a failed version's replay is run again (v{current.number} is {current.status})")
        modes = modes_to_rerun(current, errored_only=False) or [ReplayMode.OFFLINE]
        return requeue_replays(current, procedure, actor=actor, modes=modes)


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
    require_role(actor, Role.OPERATOR, doing="re-splitting a procedure version", system=True)
    held_out_share, seed = _check_split(held_out_share, seed)
    asked = {"seed": seed, "held_out_share": held_out_share}
    with transaction.atomic(durable=True):
        procedure = Procedure.objects.select_for_update().get(pk=version.procedure_id)
        source = ProcedureVersion.objects.get(pk=version.pk)
        open_replays = ReplayRun.objects.filter(version=source, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING))
        if open_replays.exists():
            raise ReplayRefused(f"version {source.number} has a replay queued or running; wait for it")
        split = split_runs(_runs_of_version(source), held_out_share=held_out_share, seed=seed)
        if split.successes < MIN_SUCCESSFUL_RUNS:
            raise MiningError(f"version {source.number} has {split.successes} successful run(s) to split")
        learnt = learn_from_split(procedure.intent, split)
        revision = content_revision(
            intent=procedure.intent,
            steps=learnt.steps,
            preconditions=source.preconditions,
            failure_exits=source.failure_exits,
        )
        modes = [ReplayMode.OFFLINE, *([ReplayMode.LIVE] if live else [])]
        same = ProcedureVersion.objects.filter(procedure=procedure, content_revision=revision).defer(*RUN_LISTS).first()
        if same is not None:
            if (
                same.pk != source.pk
                and ReplayRun.objects.filter(
                    version=same, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING)
                ).exists()
            ):
                raise ReplayRefused(f"this split learns version {same.number}, which has a replay open; wait for it")
            note = {"split": asked, "learnt_from": f"v{source.number}"}
            replays = requeue_replays(
                same, procedure, actor=actor, modes=modes, held_out=learnt.split, verb="replay.resplit", note=note
            )
            return MineResult(version=same, created=False, replays=replays)
        new, sizes = create_with_run_lists(
            ProcedureVersion,
            learnt.split,
            procedure=procedure,
            number=next_version_number(procedure),
            parent=source,
            steps=learnt.steps,
            preconditions=source.preconditions,
            failure_exits=source.failure_exits,
            candidate_revision=learnt.candidate.revision,
            content_revision=revision,
            created_by=actor.user,
        )
        replays = tuple(queue_replay(new, procedure, mode) for mode in modes)
        audit_record(
            actor=actor,
            verb="procedure_version.resplit",
            target=new,
            before={"parent": source.number},
            after={
                "number": new.number,
                "tools": new.tools,
                "content_revision": revision,
                "held_out": sizes.held_out,
                "split": asked,
                "replays": [replay.mode for replay in replays],
            },
        )
        for replay in replays:
            enqueue_replay_on_commit(replay)
    return MineResult(version=new, created=True, replays=replays)


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
    require_role(actor, Role.OPERATOR, doing="amending a procedure version", system=True)
    preconditions = _notes(preconditions, "preconditions")
    failure_exits = _notes(failure_exits, "failure exits")
    with transaction.atomic(durable=True):
        procedure = Procedure.objects.select_for_update().get(pk=version.procedure_id)
        source = ProcedureVersion.objects.get(pk=version.pk)
        revision = content_revision(
            intent=procedure.intent, steps=source.steps, preconditions=preconditions, failure_exits=failure_exits
        )
        existing = (
            ProcedureVersion.objects.filter(procedure=procedure, content_revision=revision).defer(*RUN_LISTS).first()
        )
        if existing is not None:
            return MineResult(version=existing, created=False)
        number = next_version_number(procedure)
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
        replay = queue_replay(amended, procedure, ReplayMode.OFFLINE)
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
        enqueue_replay_on_commit(replay)
    return MineResult(version=amended, created=True, replays=(replay,))


def rubric_floor_set(*, actor: Actor, procedure: Procedure, floor: float | None) -> Procedure:
    """An operator sets (or clears, with None) the procedure's rubric floor in [0, 1]; audited. Replays settled
    from now on apply it; finished ones keep their report."""
    require_role(actor, Role.OPERATOR, doing="setting a procedure's rubric floor", system=True)
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


def _runs_of_version(version: ProcedureVersion) -> QuerySet:
    """The runs a version was mined from: its training and held-out runs (nothing newer)."""
    return run_queryset().filter(pk__in=sorted({*version.training_run_ids, *version.held_out_run_ids}))


FRESH_RUNS = 500  # the newest fresh runs a re-certification replays on


def procedure_version_recertify(*, actor: Actor, version: ProcedureVersion, model: str | None = None) -> ReplayRun:
    """Certify a version again on fresh held-out runs: production runs of its intent received after its newest
    certificate's split was drawn (after it was mined, when it has none), of `model` only when given, the newest
    FRESH_RUNS of them with an outcome. What a "not certified for <model>" flag and an exhausted split ask for.

    The replay pairs the version with what it is measured against: the version it replaced when it is the active
    one (no procedure, when it replaced none), else today's active version (no procedure when none is). Live when
    the version has been replayed live or has nothing to be paired with offline (a first version: the agent runs
    with and without it), else offline. Audited as `replay.recertify`. ReplayRefused says why not (a replay still
    open, no fresh runs)."""
    require_role(actor, Role.OPERATOR, doing="re-certifying a procedure version", system=True)
    from reviews.activations import rollback_target
    from uplift.selectors import latest_certificate

    with transaction.atomic(durable=True):
        procedure = Procedure.objects.select_for_update().get(pk=version.procedure_id)
        current = ProcedureVersion.objects.defer(*RUN_LISTS).get(pk=version.pk)
        open_replays = ReplayRun.objects.filter(version=current, status__in=(ReplayStatus.QUEUED, ReplayStatus.RUNNING))
        if open_replays.exists():
            raise ReplayRefused(f"version {current.number} has a replay queued or running; wait for it")
        last = latest_certificate(PROMOTION_KIND, str(current.pk))
        drawn_at = last.split.drawn_at if last is not None else current.created_at
        runs = runs_of_intent(procedure.intent).runs.filter(
            created_at__gt=drawn_at, outcome__in=[Outcome.SUCCESS, Outcome.FAILURE]
        )
        if model:
            runs = runs.filter(metadata__model=model)
        run_ids = sorted(runs.order_by("-id").values_list("pk", flat=True)[:FRESH_RUNS])
        of_model = f" of model {model}" if model else ""
        if not run_ids:
            raise ReplayRefused(
                f"no fresh run{of_model} of intent {procedure.intent!r} since {drawn_at:%Y-%m-%d %H:%M} UTC to certify"
                f" v{current.number} on"
            )
        if procedure.active_version_id == current.pk:
            against = int_or_none(rollback_target(PROMOTION_KIND, str(procedure.pk), str(current.pk)))
        else:
            against = procedure.active_version_id
        live = against is None or has_live_replay(current)
        mode = ReplayMode.LIVE if live else ReplayMode.OFFLINE
        replay = queue_replay_on(current, mode=mode, compared_with_id=against, run_ids=run_ids)
        before = current.status
        if before in RESETTLED:
            ProcedureVersion.objects.filter(pk=current.pk).update(status=VersionStatus.REPLAYING)
        audit_record(
            actor=actor,
            verb="replay.recertify",
            target=current,
            before={"status": before},
            after={
                "replay": replay.pk,
                "mode": mode,
                "model": model or None,
                "fresh_runs": len(run_ids),
                "since": drawn_at.isoformat(),
                "compared_with": against,
            },
        )
        enqueue_replay_on_commit(replay)
    return replay
