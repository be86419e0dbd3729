"""The reference stores on the project's revision chains (DESIGN.md §5, spec §8).

`DbRevisionStore` is the reference RevisionStore over `graphs.models.Revision` (graphs.revisions does the appends,
so a stale writer gets HeadMoved and a chain never forks). The layer stores of graphs.core.stores run on it
unchanged, except two of a run: its graph store accepts through the audited service (the revision's meta names the
run), and its rejection store records the round's `EvolutionRound` row in the transaction of the rejection-memory
revision, so the row exists exactly when the round is recorded, whatever dies when.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Count, Sum

from accounts.services import Actor
from graphs.core.rejections import RejectionEntry, RejectionMemory
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
    """The rejection store of one run: each save also writes the round's row (once: unique (run, iteration))."""

    def __init__(self, store: DbRevisionStore, workspace: str, *, run: EvolutionRun) -> None:
        super().__init__(store, workspace)
        self.store = store
        self.run = run

    def save(self, memory: RejectionMemory, *, expected_ref: str | None, iteration: int) -> str:
        with transaction.atomic():
            ref = super().save(memory, expected_ref=expected_ref, iteration=iteration)
            workspace = self.store.workspace(self.workspace)
            record_round(
                run=self.run,
                workspace=workspace,
                entry=memory.entries[-1],
                rejections_revision=self.store.row(self.workspace, REJECTIONS, ref),
            )
            # Progress: the count of steps that died in a row starts again.
            EvolutionRun.objects.filter(pk=self.run.pk).update(attempts=0)
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
