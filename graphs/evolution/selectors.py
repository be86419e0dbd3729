"""Reads of evolution runs for the pages and the API, each a fixed number of queries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from common.cursors import IntCursor
from graphs.core import Graph, skeleton
from graphs.core.rejections import RejectionMemory

from .. import revisions
from ..models import EvolutionRound, EvolutionRun, Revision, Workspace
from .stores import memory_document

RUN_CURSOR = IntCursor("id")
MAX_PAGE_SIZE = 100


def runs_of(workspace: Workspace) -> QuerySet[EvolutionRun]:
    """A workspace's runs, newest first, with who started them."""
    return EvolutionRun.objects.filter(workspace=workspace).select_related("started_by").order_by("-id")


@dataclass(frozen=True)
class RunPage:
    runs: list[EvolutionRun]
    next_cursor: str | None


def run_page(workspace: Workspace, *, cursor: str | None = None, limit: int = 50) -> RunPage:
    """One page of runs, newest first (InvalidCursor for a cursor we did not issue)."""
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    rows = runs_of(workspace)
    if cursor:
        rows = rows.filter(id__lt=RUN_CURSOR.decode(cursor))
    found = list(rows[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    return RunPage(found, RUN_CURSOR.encode(found[-1].pk) if more else None)


def run_of(workspace: Workspace, run_id: int | None) -> EvolutionRun:
    run = (
        EvolutionRun.objects.select_related("started_by", "workspace").filter(pk=run_id, workspace=workspace).first()
        if run_id
        else None
    )
    if run is None:
        raise Http404(f"no evolution run {run_id} in workspace {workspace.slug!r}")
    return run


def rounds_of(run: EvolutionRun) -> list[EvolutionRound]:
    """The run's rounds in order, with the accepted revision's seq (documents left out)."""
    return list(
        EvolutionRound.objects.filter(run=run)
        .select_related("graph_revision")
        .defer("graph_revision__document")
        .order_by("iteration")
    )


def round_of(run: EvolutionRun, iteration: int | None) -> EvolutionRound:
    found = (
        EvolutionRound.objects.select_related("rejections_revision", "graph_revision")
        .filter(run=run, iteration=iteration)
        .first()
        if iteration is not None
        else None
    )
    if found is None:
        raise Http404(f"run {run.pk} has no round {iteration}")
    return found


def score_series(workspace: Workspace, *, runs: int = 10) -> list[dict[str, Any]]:
    """Per run (oldest of the last `runs` first): its baseline and each round's candidate and retained scores, for
    the chart across runs. Two queries."""
    recent = list(EvolutionRun.objects.filter(workspace=workspace).order_by("-id").values("id", "baseline")[:runs])
    ids = [row["id"] for row in recent]
    by_run: dict[int, list[dict[str, Any]]] = {run_id: [] for run_id in ids}
    for row in (
        EvolutionRound.objects.filter(run_id__in=ids)
        .order_by("run_id", "iteration")
        .values("run_id", "iteration", "outcome", "candidate_score", "retained_score")
    ):
        by_run[row["run_id"]].append(row)
    return [
        {"run": row["id"], "baseline": (row["baseline"] or {}).get("score"), "rounds": by_run[row["id"]]}
        for row in reversed(recent)
    ]


def candidate_graph(round_: EvolutionRound) -> Graph | None:
    """The candidate of a round as the rejection memory recorded it (None when the refiner produced none)."""
    revision = round_.rejections_revision
    memory = RejectionMemory.from_document(revision.appended or memory_document(revision))
    for entry in memory.entries:
        if entry.iteration == round_.iteration and entry.candidate is not None:
            return Graph.from_document(entry.candidate)
    return None


def base_graph(workspace: Workspace, round_: EvolutionRound) -> Graph:
    """The graph the round started from (its base digest on the graph chain; the skeleton for an empty base)."""
    if round_.base_digest:
        found = revisions.get(workspace, Revision.Kind.GRAPH, round_.base_digest)
        if found is not None:
            return Graph.from_document(found.document)
    return skeleton(**(workspace.vocabulary or {}))


def rejection_memory(workspace: Workspace) -> RejectionMemory:
    head = revisions.head(workspace, Revision.Kind.REJECTIONS)
    return RejectionMemory.from_document(memory_document(head)) if head is not None else RejectionMemory()


def open_run(workspace: Workspace) -> EvolutionRun | None:
    return EvolutionRun.objects.filter(workspace=workspace, status__in=["queued", "running", "waiting"]).first()
