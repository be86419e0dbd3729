"""Reads of runs with a fixed number of queries: the explorer's filtered, sorted keyset pages and totals, the export
stream, one run with its steps, two runs side by side."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from django.db import connections
from django.db.models import BooleanField, Count, Exists, F, OuterRef, Q, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.shortcuts import get_object_or_404

from config.cursors import IntCursor, InvalidCursor

from .core.search import search_terms
from .core.steps import TrajectoryRun, TrajectoryStep, normalize_tool
from .core.waterfall import waterfall
from .models import Outcome, Run, Step

MAX_PAGE_SIZE = 200
RUN_CURSOR = IntCursor("run")
EXPORT_CHUNK = 500

KINDS = ("production", "evaluation", "all")
# sort name -> (field, descending). Nullable keys (score, duration) put runs without a value last in both directions.
SORTS: dict[str, tuple[str, bool]] = {
    "newest": ("id", True),
    "oldest": ("id", False),
    "score_desc": ("score", True),
    "score_asc": ("score", False),
    "cost_desc": ("cost", True),
    "cost_asc": ("cost", False),
    "steps_desc": ("step_count", True),
    "steps_asc": ("step_count", False),
    "duration_desc": ("duration_seconds", True),
    "duration_asc": ("duration_seconds", False),
}
NULLABLE_SORT_KEYS = ("score", "duration_seconds")
SEARCH_VECTOR_SQL = """"trajectories_run"."search_vector" @@ websearch_to_tsquery('simple'::regconfig, %s)"""


@dataclass(frozen=True)
class RunFilters:
    """What the explorer and the API narrow runs by. Every field optional; `kind` picks production runs, evaluation
    runs (source EVALUATION_SOURCE) or all (the API's default, the page's is production). `q` is the API's "task
    contains"; `search` is full-text search over the search document (task, tools, arguments, observations)."""

    outcome: str | None = None
    source: str | None = None
    tool: str | None = None
    intent: str | None = None
    q: str | None = None
    search: str | None = None
    kind: str = "all"
    received_from: datetime | None = None
    received_before: datetime | None = None
    score_min: float | None = None
    score_max: float | None = None
    duration_min: float | None = None
    duration_max: float | None = None
    cost_min: float | None = None
    cost_max: float | None = None
    steps_min: int | None = None
    steps_max: int | None = None

    def apply(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        if self.kind == "production":
            runs = runs.production()
        elif self.kind == "evaluation":
            runs = runs.evaluation()
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
        if self.search and self.search.strip():
            runs = _full_text(runs, self.search.strip())
        ranges = {
            "created_at__gte": self.received_from,
            "created_at__lt": self.received_before,
            "score__gte": self.score_min,
            "score__lte": self.score_max,
            "duration_seconds__gte": self.duration_min,
            "duration_seconds__lte": self.duration_max,
            "cost__gte": self.cost_min,
            "cost__lte": self.cost_max,
            "step_count__gte": self.steps_min,
            "step_count__lte": self.steps_max,
        }
        bounds = {lookup: value for lookup, value in ranges.items() if value is not None}
        return runs.filter(**bounds) if bounds else runs


def _full_text(runs: QuerySet[Run], text: str) -> QuerySet[Run]:
    """PostgreSQL: the GIN-indexed tsvector of the search document against websearch_to_tsquery (words, "phrases",
    or, -not). Elsewhere (SQLite): every term is a case-insensitive substring of the search document."""
    if connections[runs.db].vendor == "postgresql":
        return runs.filter(RawSQL(SEARCH_VECTOR_SQL, [text], output_field=BooleanField()))
    for term in search_terms(text) or [text]:
        runs = runs.filter(search_document__icontains=term)
    return runs


class SortCursor:
    """The last row of a page under one sort: (sort, key value, id), base64url JSON; refuses what it did not issue
    and a cursor of another sort."""

    prefix = "runs:"

    def encode(self, sort: str, value: Any, pk: int) -> str:
        text = self.prefix + json.dumps([sort, value, pk], separators=(",", ":"))
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    def decode(self, cursor: str, sort: str) -> tuple[Any, int]:
        invalid = InvalidCursor("the cursor is not one this page issued")
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
            if not text.startswith(self.prefix):
                raise invalid
            name, value, pk = json.loads(text.removeprefix(self.prefix))
        except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
            raise invalid from None
        number_ok = value is None or (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
        if name != sort or not number_ok or not isinstance(pk, int) or isinstance(pk, bool):
            raise invalid
        return value, pk


SORT_CURSOR = SortCursor()


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    next_cursor: str | None


def _ordered(runs: QuerySet[Run], sort: str) -> QuerySet[Run]:
    field, descending = SORTS[sort]
    if field == "id":
        return runs.order_by("-id" if descending else "id")
    key = F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True)
    return runs.order_by(key, "-id" if descending else "id")


def _after(runs: QuerySet[Run], sort: str, value: Any, pk: int) -> QuerySet[Run]:
    """The keyset condition: rows after (value, pk) in the sort's order (nulls last)."""
    field, descending = SORTS[sort]
    op = "lt" if descending else "gt"
    if field == "id":
        return runs.filter(**{f"id__{op}": pk})
    if value is None:
        return runs.filter(**{f"{field}__isnull": True, f"id__{op}": pk})
    after = Q(**{f"{field}__{op}": value}) | Q(**{field: value, f"id__{op}": pk})
    if field in NULLABLE_SORT_KEYS:
        after |= Q(**{f"{field}__isnull": True})
    return runs.filter(after)


def run_page(*, filters: RunFilters, cursor: str | None = None, limit: int = 50, sort: str = "newest") -> RunPage:
    """One keyset page of runs in the sort's order (ties by id), in one query. Raises InvalidCursor for a cursor we
    did not issue (or issued under another sort), ValueError for an unknown sort."""
    if sort not in SORTS:
        raise ValueError(f"unknown sort {sort!r}")
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    field, _ = SORTS[sort]
    runs = _ordered(filters.apply(Run.objects.defer("metadata", "search_document")), sort)
    if cursor:
        if sort == "newest":
            runs = _after(runs, sort, None, RUN_CURSOR.decode(cursor))
        else:
            runs = _after(runs, sort, *SORT_CURSOR.decode(cursor, sort))
    rows = list(runs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = None
    if more:
        last = rows[-1]
        if sort == "newest":  # the API's cursor format, unchanged
            next_cursor = RUN_CURSOR.encode(last.pk)
        else:
            next_cursor = SORT_CURSOR.encode(sort, getattr(last, field), last.pk)
    return RunPage(runs=rows, next_cursor=next_cursor)


@dataclass(frozen=True)
class RunTotals:
    runs: int
    successes: int
    tokens: int
    cost: float

    @property
    def success_rate(self) -> float | None:
        """Successful runs among the matching runs (None when nothing matches)."""
        return self.successes / self.runs if self.runs else None


def run_totals(*, filters: RunFilters) -> RunTotals:
    """Matching runs, successes, tokens and cost of the filtered runs: one aggregate query."""
    row = filters.apply(Run.objects.all()).aggregate(
        runs=Count("id"),
        successes=Count("id", filter=Q(outcome=Outcome.SUCCESS)),
        tokens=Sum("total_tokens"),
        cost=Sum("cost"),
    )
    return RunTotals(runs=row["runs"], successes=row["successes"], tokens=row["tokens"] or 0, cost=row["cost"] or 0.0)


def _moment(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def run_as_item(run: Run) -> dict[str, Any]:
    """A stored run (steps prefetched) in the ingest format (trajectories.schemas.RunIn): ingesting it again
    reproduces the run."""
    return {
        "source": run.source,
        "external_id": run.external_id,
        "task": run.task,
        "intent": run.intent,
        "outcome": run.outcome,
        "score": run.score,
        "graph_workspace": run.graph_workspace,
        "graph_revision": run.graph_revision,
        "metadata": run.metadata,
        "started_at": _moment(run.started_at),
        "ended_at": _moment(run.ended_at),
        "steps": [
            {
                "tool": step.tool,
                "action_family": step.action_family,
                "arguments": step.arguments,
                "observation": step.observation,
                "ok": step.ok,
                "started_at": _moment(step.started_at),
                "ended_at": _moment(step.ended_at),
                "input_tokens": step.input_tokens,
                "cached_input_tokens": step.cached_input_tokens,
                "output_tokens": step.output_tokens,
                "cost": step.cost,
            }
            for step in run.steps.all()
        ],
    }


def export_items(*, filters: RunFilters) -> Iterator[dict[str, Any]]:
    """The filtered runs oldest first in the ingest format, read EXPORT_CHUNK runs at a time (two queries a chunk)."""
    runs = filters.apply(Run.objects.defer("search_document")).order_by("id").prefetch_related("steps")
    for run in runs.iterator(chunk_size=EXPORT_CHUNK):
        yield run_as_item(run)


def runs_with_steps(run_ids: list[int]) -> dict[int, Run]:
    """The runs that exist among `run_ids`, each with its steps prefetched: two queries."""
    return {
        run.pk: run for run in Run.objects.defer("search_document").filter(pk__in=run_ids).prefetch_related("steps")
    }


def run_with_steps(run_id: int) -> Run:
    """The run with its steps prefetched (two queries); Http404 when it does not exist."""
    return get_object_or_404(Run.objects.defer("search_document").prefetch_related("steps"), pk=run_id)


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


# --- presentation of one run (no queries) -------------------------------------------------------------------------

WATERFALL_WIDTH = 1000
WATERFALL_LABEL = 260
WATERFALL_ROW = 24


@dataclass(frozen=True)
class WaterfallRow:
    step: Step
    y: int
    text_y: int
    x: float | None = None
    width: float | None = None
    offset: float | None = None
    duration: float | None = None


@dataclass(frozen=True)
class WaterfallDrawing:
    rows: list[WaterfallRow]
    span: float
    timed: int
    height: int
    width: int = WATERFALL_WIDTH
    label_width: int = WATERFALL_LABEL

    @property
    def track(self) -> int:
        return self.width - self.label_width - 10


def run_waterfall(run: Run, steps: list[Step]) -> WaterfallDrawing:
    """Coordinates of the run page's SVG waterfall: one row per step, a bar from its start for its duration."""

    def seconds(moment: datetime | None) -> float | None:
        return moment.timestamp() if moment is not None else None

    drawn = waterfall(
        [(seconds(step.started_at), seconds(step.ended_at)) for step in steps], run_start=seconds(run.started_at)
    )
    track = WATERFALL_WIDTH - WATERFALL_LABEL - 10
    rows = []
    for index, (step, bar) in enumerate(zip(steps, drawn.bars, strict=True)):
        y = index * WATERFALL_ROW
        if bar is None:
            rows.append(WaterfallRow(step=step, y=y + 4, text_y=y + 16))
            continue
        rows.append(
            WaterfallRow(
                step=step,
                y=y + 4,
                text_y=y + 16,
                x=round(WATERFALL_LABEL + bar.left * track, 2),
                width=round(max(2.0, bar.width * track), 2),
                offset=bar.offset,
                duration=bar.duration,
            )
        )
    return WaterfallDrawing(rows=rows, span=drawn.span, timed=drawn.timed, height=max(1, len(steps)) * WATERFALL_ROW)
