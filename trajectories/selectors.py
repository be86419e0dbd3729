"""Reads of runs with a fixed number of queries: cursor pages (newest first) and one run with its steps."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from django.db.models import Exists, OuterRef, QuerySet
from django.shortcuts import get_object_or_404

from config.cursors import IntCursor

from .core.steps import TrajectoryRun, TrajectoryStep, normalize_tool
from .models import Run, Step

MAX_PAGE_SIZE = 200
RUN_CURSOR = IntCursor("run")


@dataclass(frozen=True)
class RunFilters:
    outcome: str | None = None
    source: str | None = None
    tool: str | None = None
    intent: str | None = None
    q: str | None = None

    def apply(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        if self.outcome:
            runs = runs.filter(outcome=self.outcome)
        if self.source:
            runs = runs.filter(source=self.source)
        if self.intent:
            runs = runs.filter(intent=self.intent)
        if self.tool:
            runs = runs.filter(Exists(Step.objects.filter(run=OuterRef("pk"), tool=normalize_tool(self.tool))))
        if self.q and self.q.strip():
            runs = runs.filter(task__icontains=self.q.strip())
        return runs


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    next_cursor: str | None


def run_page(*, filters: RunFilters, cursor: str | None = None, limit: int = 50) -> RunPage:
    """One page of runs, newest first, in one query. Raises InvalidCursor for a cursor we did not issue."""
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    runs = filters.apply(Run.objects.defer("metadata")).order_by("-id")
    if cursor:
        runs = runs.filter(id__lt=RUN_CURSOR.decode(cursor))
    rows = list(runs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return RunPage(runs=rows, next_cursor=RUN_CURSOR.encode(rows[-1].pk) if more else None)


def run_with_steps(run_id: int) -> Run:
    """The run with its steps prefetched (two queries); Http404 when it does not exist."""
    return get_object_or_404(Run.objects.prefetch_related("steps"), pk=run_id)


def as_trajectory_run(run: Run) -> TrajectoryRun:
    """The core value of a stored run (its steps should be prefetched), for the mining cores."""
    return TrajectoryRun(
        trajectory_id=f"{run.source}:{run.external_id}",
        outcome=run.outcome,
        steps=tuple(
            TrajectoryStep(
                ordinal=step.ordinal,
                tool=step.tool,
                action_family=step.action_family,
                arguments=MappingProxyType(dict(step.arguments)),
                summary=step.observation[:300],
                ok=step.ok,
                started_at=step.started_at.timestamp() if step.started_at else None,
                ended_at=step.ended_at.timestamp() if step.ended_at else None,
                input_tokens=step.input_tokens,
                cached_input_tokens=step.cached_input_tokens,
                output_tokens=step.output_tokens,
                cost=step.cost,
            )
            for step in run.steps.all()
        ),
    )


def runs_guided_by(workspace_slug: str, *, offset: int, limit: int) -> tuple[list[Run], int]:
    """(runs, total): the window [offset, offset+limit) of the runs a graph workspace guided, oldest first, with
    their steps prefetched (three queries)."""
    runs = Run.objects.filter(graph_workspace=workspace_slug).order_by("id")
    total = runs.count()
    if total == 0 or limit <= 0:
        return [], total
    return list(runs.prefetch_related("steps")[offset : offset + limit]), total


def jobs_for_subject(subject: str):
    """The evaluation jobs of one subject, oldest first, with their answered runs (one query)."""
    from .models import Job

    return Job.objects.filter(subject=subject).select_related("result_run").order_by("id")


def open_job_subjects(prefix: str) -> list[str]:
    """The subjects starting with `prefix` that still have queued or leased jobs."""
    from .models import Job, JobStatus

    rows = Job.objects.filter(subject__startswith=prefix, status__in=[JobStatus.QUEUED, JobStatus.LEASED])
    return sorted(set(rows.values_list("subject", flat=True)))
