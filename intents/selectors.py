"""Reads of intents for the pages, the API and the services, each a fixed number of queries.

Intents learn from production runs only: the runs a live replay made (`Run.objects.production()` leaves them out)
are never proposed, never cited as a client's evidence, and never counted by a window (intents.windows.selectors).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404

from common.cursors import IntCursor
from trajectories.selectors import run_queryset

from .models import IntentBatchRun, IntentCandidateRecord, IntentProposalBatch, IntentProposalRun

PROPOSAL_CURSOR = IntCursor("proposal")
CANDIDATE_CURSOR = IntCursor("candidate")
MAX_PAGE_SIZE = 200
# A batch holding runs is "covering" them unless it ended without a result; such runs may be proposed again.
COVERING = (
    IntentProposalBatch.Status.PENDING,
    IntentProposalBatch.Status.RUNNING,
    IntentProposalBatch.Status.SUCCEEDED,
)


# -- which runs a proposal covers -------------------------------------------------------------------------------------


def runs_for_selection(
    *,
    window_from: datetime | None = None,
    window_to: datetime | None = None,
    intent: str = "",
    failed_only: bool = False,
    only_new: bool = False,
    source: str = "",
) -> QuerySet:
    """Stored production runs in the window (stored at or after `window_from`, before `window_to`), oldest first;
    only the runs of `source` when one is given (the demo's own: intents.demo)."""
    runs = run_queryset().production()
    if source:
        runs = runs.filter(source=source)
    if window_from is not None:
        runs = runs.filter(created_at__gte=window_from)
    if window_to is not None:
        runs = runs.filter(created_at__lt=window_to)
    if intent.strip():
        runs = runs.filter(intent__iexact=intent.strip())
    if failed_only:
        runs = runs.filter(outcome="failure")
    if only_new:
        covered = IntentBatchRun.objects.filter(trajectory_run=OuterRef("pk"), batch__status__in=COVERING)
        runs = runs.filter(~Exists(covered))
    return runs.order_by("id")


def batch_runs(batch: IntentProposalBatch) -> list:
    """The stored production runs of a batch with their steps, in the batch's order (two queries); an evaluation run
    a batch made before production runs were required is left out."""
    rows = {
        run.pk: run
        for run in run_queryset()
        .production()
        .filter(intent_batches__batch=batch)
        .defer("metadata")
        .prefetch_related("steps")
    }
    members = IntentBatchRun.objects.filter(batch=batch).order_by("id").values_list("trajectory_run_id", flat=True)
    return [rows[run_id] for run_id in members if run_id in rows]


def runs_by_trajectory_ids(trajectory_ids: Iterable[str]) -> list:
    """Stored production runs whose `source:external_id` is one of the ids, with their steps (two queries): an
    evaluation run is no evidence. A source may hold a colon itself, so every split of each id is tried against the
    (source, external_id) unique index."""
    match = Q()
    wanted = 0
    for trajectory_id in set(trajectory_ids):
        for index, char in enumerate(trajectory_id):
            if char == ":":
                match |= Q(source=trajectory_id[:index], external_id=trajectory_id[index + 1 :])
                wanted += 1
    if not wanted:
        return []
    return list(run_queryset().production().filter(match).defer("metadata").prefetch_related("steps"))


# -- proposal runs ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProposalPage:
    runs: list[IntentProposalRun]
    next_cursor: str | None


def proposal_page(*, cursor: str | None = None, limit: int = 20) -> ProposalPage:
    """Proposal runs, newest first, with who started them (one query). InvalidCursor for a foreign cursor."""
    rows = IntentProposalRun.objects.select_related("started_by")
    return ProposalPage(*PROPOSAL_CURSOR.page(rows, cursor, max(1, min(limit, MAX_PAGE_SIZE))))


def proposal_of(run_id: int | None) -> IntentProposalRun:
    found = IntentProposalRun.objects.select_related("started_by").filter(pk=run_id).first() if run_id else None
    if found is None:
        raise Http404(f"no intent proposal run {run_id}")
    return found


def batches_of(run: IntentProposalRun) -> list[IntentProposalBatch]:
    return list(IntentProposalBatch.objects.filter(run=run).order_by("seq"))


def open_scheduled_run() -> IntentProposalRun | None:
    return IntentProposalRun.objects.filter(scheduled=True, status__in=IntentProposalRun.OPEN).first()


# -- candidates -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateFilters:
    kind: str = ""
    label: str = ""
    source: str = ""

    def apply(self, rows: QuerySet[IntentCandidateRecord]) -> QuerySet[IntentCandidateRecord]:
        from .core import normalize_intent

        if self.kind:
            rows = rows.filter(kind=self.kind)
        if self.label.strip():
            rows = rows.filter(normalized__contains=normalize_intent(self.label))
        if self.source == "model":
            rows = rows.filter(source=IntentCandidateRecord.MODEL_SOURCE)
        elif self.source == "client":
            rows = rows.exclude(source=IntentCandidateRecord.MODEL_SOURCE)
        return rows


@dataclass(frozen=True)
class CandidatePage:
    candidates: list[IntentCandidateRecord]
    next_cursor: str | None


def candidate_page(
    *, filters: CandidateFilters = CandidateFilters(), cursor: str | None = None, limit: int = 50
) -> CandidatePage:
    """Candidates, newest first, with their batch and submitter (one query). InvalidCursor for a foreign cursor."""
    rows = filters.apply(IntentCandidateRecord.objects.select_related("batch", "submitted_by"))
    return CandidatePage(*CANDIDATE_CURSOR.page(rows, cursor, max(1, min(limit, MAX_PAGE_SIZE))))


def candidates_of_run(run: IntentProposalRun, *, limit: int = 500) -> list[IntentCandidateRecord]:
    """The candidates a proposal run's batches stored, in batch order (one query)."""
    return list(
        IntentCandidateRecord.objects.filter(batch__run=run)
        .select_related("batch")
        .order_by("batch__seq", "id")[:limit]
    )
