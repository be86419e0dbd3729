"""The reference stores on the project's revision chains (DESIGN.md §5, spec §8).

`DbRevisionStore` is the reference RevisionStore over `graphs.models.Revision` (graphs.revisions does the appends,
so a stale writer gets HeadMoved and a chain never forks). The layer stores of graphs.core.stores run on it
unchanged, except those of a run, which also keep on the run row what its next step reads, in the transaction of the
write that makes it true, so a step that dies anywhere leaves its successor the state an uninterrupted step would:

- the graph store accepts through the audited service (the revision's meta names the run);
- the rejection store records the round's `EvolutionRound` row, the rounds done, the retained best (the accepted
  candidate's evaluation) and the meter in the transaction of the rejection-memory revision, with the round's
  decision on the validation split and its candidate's certification (graphs.certification_services);
- the checkpoint store writes the meter with every checkpoint, so an evaluation a checkpoint holds is counted exactly
  when a resumed round can reuse it;
- the first step's evaluator writes the baseline (as baseline and best, with the meter that counts it) as soon as it
  is measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Count, Sum

from accounts.services import Actor
from graphs.core.budget import Meter
from graphs.core.evaluation import Decision, Evaluation
from graphs.core.rejections import ACCEPTED, RejectionEntry, RejectionMemory
from graphs.core.stores import (
    CHECKPOINT_WINDOW,
    Candidate,
    Revision,
    RevisionCheckpointStore,
    RevisionGraphStore,
    RevisionRejectionStore,
)
from llm.selectors import calls_for_subject

from .. import revisions
from ..models import EvolutionRound, EvolutionRun, Workspace
from ..models import Revision as RevisionRow

ROUND_SUBJECT = "graphs.evolutionround"
GRAPH = RevisionRow.Kind.GRAPH
REJECTIONS = RevisionRow.Kind.REJECTIONS
CHECKPOINTS = RevisionRow.Kind.CHECKPOINTS


def round_subject(run_id: int, iteration: int) -> tuple[str, str]:
    """The ModelCall subject of the calls a run makes in one round."""
    return ROUND_SUBJECT, f"{run_id}:{iteration}"


def _value(row: RevisionRow, slug: str) -> Revision:
    return Revision(
        workspace=slug,
        kind=row.kind,
        seq=row.seq,
        digest=row.digest,
        parent_digest=row.parent_digest,
        document=row.document,
        meta=row.meta,
        created_at=row.created_at.isoformat(),
    )


class DbRevisionStore:
    """RevisionStore over the Revision table; workspaces are named by slug and must exist."""

    def __init__(self, *known: Workspace) -> None:
        self._workspaces: dict[str, Workspace] = {workspace.slug: workspace for workspace in known}
        self.appended: dict[str, RevisionRow] = {}  # the last row appended per digest, to save a lookup

    def workspace(self, slug: str) -> Workspace:
        if slug not in self._workspaces:
            self._workspaces[slug] = Workspace.objects.get(slug=slug)
        return self._workspaces[slug]

    def head(self, workspace: str, kind: str) -> Revision | None:
        row = revisions.head(self.workspace(workspace), kind)
        return _value(row, workspace) if row is not None else None

    def append(
        self, workspace: str, kind: str, document: Any, *, expected_head: str | None, meta: Mapping | None = None
    ) -> Revision:
        row = revisions.append(self.workspace(workspace), kind, document, expected_head=expected_head, meta=meta)
        self.appended = {row.digest: row}
        return _value(row, workspace)

    def row(self, workspace: str, kind: str, digest: str) -> RevisionRow | None:
        """The stored row of a revision, without a query when this store just appended it."""
        row = self.appended.get(digest)
        if row is not None and row.kind == kind:
            return row
        return revisions.get(self.workspace(workspace), kind, digest)

    def head_digest(self, workspace: str, kind: str) -> str | None:
        pointer = revisions.head_pointer(self.workspace(workspace), kind)
        return pointer[1] if pointer is not None else None

    def get(self, workspace: str, kind: str, digest: str) -> Revision | None:
        row = revisions.get(self.workspace(workspace), kind, digest)
        return _value(row, workspace) if row is not None else None

    def list(self, workspace: str, kind: str, limit: int = 50) -> list[Revision]:
        return [_value(row, workspace) for row in revisions.list_revisions(self.workspace(workspace), kind, limit)]


class DbCheckpointStore(RevisionCheckpointStore):
    """The reference checkpoint store, reading the one revision it needs: the newest of the last 200 whose meta
    names the iteration (every checkpoint revision carries meta {iteration}), by index instead of a scan."""

    def __init__(self, store: DbRevisionStore, workspace: str) -> None:
        super().__init__(store, workspace)
        self.store = store

    def load(self, iteration: int) -> dict[str, Any] | None:
        workspace = self.store.workspace(self.workspace)
        pointer = revisions.head_pointer(workspace, CHECKPOINTS)
        if pointer is None:
            return None
        document = (
            RevisionRow.objects.filter(
                workspace=workspace, kind=CHECKPOINTS, seq__gt=pointer[0] - CHECKPOINT_WINDOW, meta__iteration=iteration
            )
            .order_by("-seq")
            .values_list("document", flat=True)
            .first()
        )
        if not isinstance(document, Mapping) or document.get("iteration") != iteration:
            return None
        payload = document.get("payload")
        return dict(payload) if isinstance(payload, Mapping) else None

    def decision(self, iteration: int) -> Decision | None:
        """The gate's decision checkpointed for a round (checkpoint #3, stop flag included), None for a round no gate
        decided."""
        document = (
            RevisionRow.objects.filter(
                workspace=self.store.workspace(self.workspace),
                kind=CHECKPOINTS,
                meta__iteration=iteration,
                document__payload__has_key="decision",
            )
            .order_by("-seq")
            .values_list("document", flat=True)
            .first()
        )
        if not isinstance(document, Mapping) or document.get("iteration") != iteration:
            return None
        return Decision.from_document(document["payload"]["decision"])


def record_progress(run: EvolutionRun, **fields: Any) -> None:
    """Write on the run what its next step reads, in the caller's transaction (and on the instance in hand)."""
    EvolutionRun.objects.filter(pk=run.pk).update(**fields)
    for key, value in fields.items():
        setattr(run, key, value)


class RunCheckpointStore(DbCheckpointStore):
    """The checkpoint store of one run: every checkpoint writes the run's meter in its transaction. Checkpoint #2
    holds the candidate's evaluation, which a resumed round reuses without counting it again, so the count must be
    on the run exactly when that checkpoint is."""

    def __init__(self, store: DbRevisionStore, workspace: str, *, run: EvolutionRun, meter: Meter) -> None:
        super().__init__(store, workspace)
        self.run = run
        self.meter = meter

    def save(self, iteration: int, payload: Mapping[str, Any]) -> None:
        with transaction.atomic():
            super().save(iteration, payload)
            record_progress(self.run, meter=self.meter.to_dict())


class RunBaselineRecorder:
    """The evaluator of a run's first step: the baseline it measures is written on the run (as its baseline and its
    retained best, with the meter that counts it) before the loop goes on, so a step that dies after measuring it
    leaves its successor nothing to measure again. In objective mode a baseline that does not name the graph it was
    asked about is left for the loop to refuse."""

    def __init__(
        self, evaluator: Any, *, run: EvolutionRun, meter: Meter, first_iteration: int, objective_mode: bool
    ) -> None:
        self.evaluator = evaluator
        self.run = run
        self.meter = meter
        self.first_iteration = first_iteration
        self.objective_mode = objective_mode

    def evaluate(self, ref: str | None, graph: Any, *, iteration: int, purpose: str) -> Evaluation:
        evaluation = self.evaluator.evaluate(ref, graph, iteration=iteration, purpose=purpose)
        if purpose == "baseline" and (not self.objective_mode or evaluation.ref == ref):
            document = evaluation.to_document()
            # The loop counts the evaluation as soon as this returns: the meter recorded is the one that counts it.
            meter = {**self.meter.to_dict(), "evaluations": self.meter.evaluations + 1}
            record_progress(
                self.run,
                meter=meter,
                baseline=document,
                best=document,
                first_iteration=self.first_iteration,
                attempts=0,
            )
        return evaluation


class RunGraphStore(RevisionGraphStore):
    """The graph store of one run: an accepted candidate goes through graphs.services (audited, validated) and its
    revision meta names the run, which is how a promotion finds the measured evaluation behind it."""

    def __init__(self, store: DbRevisionStore, workspace: str, *, run: EvolutionRun) -> None:
        super().__init__(store, workspace)
        self.store = store
        self.run = run

    def accept(self, candidate: Candidate, *, expected_ref: str) -> str:
        from graphs.services import graph_append_accepted

        meta = {
            **dict(candidate.meta),
            "edits": candidate.edits.to_dict(candidate.graph.attribute_fields),
            "evolution_run": self.run.pk,
        }
        actor = Actor(user=self.run.started_by) if self.run.started_by_id else Actor.system()
        revision = graph_append_accepted(
            actor=actor,
            workspace=self.store.workspace(self.workspace),
            graph=candidate.graph,
            expected_head=expected_ref,
            meta=meta,
        )
        return revision.digest


class RunRejectionStore(RevisionRejectionStore):
    """The rejection store of one run: each save also writes the round's row (once: unique (run, iteration)) and, on
    the run, the rounds done, the meter and, for an accepted round, the retained best: the next step compares its
    candidate with that best, so it must be on the run exactly when the round is."""

    def __init__(self, store: DbRevisionStore, workspace: str, *, run: EvolutionRun, meter: Meter) -> None:
        super().__init__(store, workspace)
        self.store = store
        self.run = run
        self.meter = meter

    def save(self, memory: RejectionMemory, *, expected_ref: str | None, iteration: int) -> str:
        from graphs.certification_services import round_recorded_in_transaction

        with transaction.atomic():
            ref = super().save(memory, expected_ref=expected_ref, iteration=iteration)
            workspace = self.store.workspace(self.workspace)
            entry = memory.entries[-1]
            round_row = record_round(
                run=self.run,
                workspace=workspace,
                entry=entry,
                rejections_revision=self.store.row(self.workspace, REJECTIONS, ref),
            )
            # The round's decision on the validation split and its candidate's certification, once with the round.
            # The run's best is still the retained graph's evaluation here: the accepted one replaces it below.
            round_recorded_in_transaction(
                run=self.run, workspace=workspace, entry=entry, round_row=round_row, retained=self.run.best
            )
            progress: dict[str, Any] = {"rounds_done": EvolutionRound.objects.filter(run=self.run).count()}
            if entry.kind == ACCEPTED and entry.validation is not None:
                progress["best"] = entry.validation.to_document()
            # Progress: the count of steps that died in a row starts again.
            record_progress(self.run, meter=self.meter.to_dict(), attempts=0, **progress)
        return ref


def record_round(
    *, run: EvolutionRun, workspace: Workspace, entry: RejectionEntry, rejections_revision: RevisionRow
) -> EvolutionRound:
    """The round row of a rejection-memory entry, with the calls and cost the ledger holds for that round."""
    decision = entry.decision if isinstance(entry.decision, Mapping) else None
    disposition = decision.get("disposition") if decision else None
    calls = calls_for_subject(*round_subject(run.pk, entry.iteration)).aggregate(n=Count("id"), cost=Sum("cost"))
    accepted = None
    if entry.kind == "accepted" and entry.candidate_digest:
        accepted = revisions.get(workspace, GRAPH, entry.candidate_digest)
    return EvolutionRound.objects.create(
        run=run,
        iteration=entry.iteration,
        outcome=entry.kind,
        disposition=disposition if isinstance(disposition, str) else "",
        mode=entry.mode or "",
        retained_score=entry.retained_score,
        candidate_score=entry.validation.score if entry.validation is not None else None,
        edits=entry.edits or {},
        edit_counts=entry.edit_counts(),
        diagnostics=[diagnostic.to_dict() for diagnostic in entry.diagnostics],
        decision=dict(decision) if decision else None,
        candidate_digest=entry.candidate_digest or "",
        base_digest=entry.base_digest or "",
        duplicate_of=entry.duplicate_of,
        trace_ids=list(entry.trace_ids),
        rejections_revision=rejections_revision,
        graph_revision=accepted,
        model_calls=calls["n"] or 0,
        cost=calls["cost"] or Decimal(0),
    )
