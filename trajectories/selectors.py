"""Reads of runs with a fixed number of queries: the explorer's filtered, sorted keyset pages and totals, the export
stream, one run with its steps, two runs side by side."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from datetime import time as time_of_day
from types import MappingProxyType
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import BooleanField, Count, Exists, F, OuterRef, Q, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import TruncDate
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from common.cursors import IntCursor, InvalidCursor
from common.fixed_queries import FixedQuery
from common.local_copies import Recent

from . import closed_days
from .core.search import search_terms
from .core.steps import TrajectoryRun, TrajectoryStep, normalize_tool
from .core.waterfall import waterfall
from .models import EVALUATION_SOURCE, Outcome, Run, RunDay, RunTotal, Step

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
# Unqualified: the column resolves to the runs of whichever query holds the condition (a subquery's alias too).
SEARCH_VECTOR_SQL = """"search_vector" @@ websearch_to_tsquery('simple'::regconfig, %s)"""
# The same matches as an array of ids computed once (an InitPlan: a bitmap scan of the GIN index, whose cost follows
# the matches), which the page or the totals walk then reads by id: for a rare word.
SEARCH_FIRST_SQL = (
    f'"{Run._meta.db_table}"."id" = ANY(ARRAY(SELECT "matched"."id" FROM "{Run._meta.db_table}" AS "matched" '
    """WHERE "matched"."search_vector" @@ websearch_to_tsquery('simple'::regconfig, %s)))"""
)


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
    # A rare text search (text_search_is_rare; set by run_results): its matches are read from the GIN index first.
    search_first: bool = False

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
            runs = _full_text(runs, self.search.strip(), first=self.search_first)
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


def _full_text(runs: QuerySet[Run], text: str, *, first: bool = False) -> QuerySet[Run]:
    """PostgreSQL: the GIN-indexed tsvector of the search document against websearch_to_tsquery (words, "phrases",
    or, -not); with `first`, as the ids of every match read from the GIN index before anything else. Elsewhere
    (SQLite): every term is a case-insensitive substring of the search document."""
    if connections[runs.db].vendor == "postgresql":
        condition = SEARCH_FIRST_SQL if first else SEARCH_VECTOR_SQL
        return runs.filter(RawSQL(condition, [text], output_field=BooleanField()))
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


@dataclass(slots=True)
class ListedRun:
    """A run as lists show it (the explorer, the API's runs list: trajectories.schemas.RunOut): every column but the
    metadata and the search document, read as a tuple (building model instances took longer than the query on every
    page), and the rubric score the explorer attaches."""

    id: int
    source: str
    external_id: str
    task: str
    intent: str
    outcome: str
    score: float | None
    graph_workspace: str
    graph_revision: str
    procedure_revision: str
    started_at: datetime | None
    ended_at: datetime | None
    created_at: datetime
    step_count: int
    total_tokens: int
    cost: float
    tools: list[str]
    duration_seconds: float | None
    rubric_score: Any = None

    @property
    def pk(self) -> int:
        return self.id


LISTED_COLUMNS = tuple(name for name in ListedRun.__dataclass_fields__ if name != "rubric_score")


@dataclass(frozen=True)
class RunPage:
    runs: list[ListedRun]
    next_cursor: str | None


def _ordered(runs: QuerySet[Run], sort: str) -> QuerySet[Run]:
    field, descending = SORTS[sort]
    if field == "id":
        return runs.order_by("-id" if descending else "id")
    if field not in NULLABLE_SORT_KEYS:  # a plain (key, id) order: the (key, id) index answers it, either way
        return runs.order_by(f"-{field}" if descending else field, "-id" if descending else "id")
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


def _listed(runs: QuerySet[Run], limit: int) -> list[ListedRun]:
    return [ListedRun(*values) for values in runs.values_list(*LISTED_COLUMNS)[:limit]]


def _by_received(filters: RunFilters, sort: str) -> bool:
    """Newest or oldest first within a received range: ordered by (created_at, id) so the (created_at, id) index
    walks straight into the range (ordering by id, the planner would scan every newer run before reaching an old
    day)."""
    return sort in ("newest", "oldest") and (filters.received_from is not None or filters.received_before is not None)


def _micros(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def _received_page(filters: RunFilters, cursor: str | None, limit: int, sort: str) -> RunPage:
    descending = sort == "newest"
    name = f"received-{sort}"
    order = ("-created_at", "-id") if descending else ("created_at", "id")
    runs = filters.apply(Run.objects.all()).order_by(*order)
    if cursor:
        micros, pk = SORT_CURSOR.decode(cursor, name)
        if not isinstance(micros, int):
            raise InvalidCursor("the cursor is not one this page issued")
        moment = datetime.fromtimestamp(micros // 1_000_000, tz=UTC).replace(microsecond=micros % 1_000_000)
        op = "lt" if descending else "gt"
        runs = runs.filter(Q(**{f"created_at__{op}": moment}) | Q(created_at=moment, **{f"id__{op}": pk}))
    rows = _listed(runs, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = SORT_CURSOR.encode(name, _micros(rows[-1].created_at), rows[-1].pk) if more else None
    return RunPage(runs=rows, next_cursor=next_cursor)


def run_page(*, filters: RunFilters, cursor: str | None = None, limit: int = 50, sort: str = "newest") -> RunPage:
    """One keyset page of runs in the sort's order (ties by id), in one query. Raises InvalidCursor for a cursor we
    did not issue (or issued under another sort), ValueError for an unknown sort."""
    if sort not in SORTS:
        raise ValueError(f"unknown sort {sort!r}")
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    if _by_received(filters, sort):
        return _received_page(filters, cursor, limit, sort)
    field, _ = SORTS[sort]
    runs = _ordered(filters.apply(Run.objects.all()), sort)
    if cursor:
        if sort == "newest":
            runs = _after(runs, sort, None, RUN_CURSOR.decode(cursor))
        else:
            runs = _after(runs, sort, *SORT_CURSOR.decode(cursor, sort))
    rows = _listed(runs, limit + 1)
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


TOTALS_CAP = 1_000
# Filters the daily totals (RunDay) can answer exactly; any other narrows runs by what only the runs hold.
ROLLUP_FIELDS = frozenset({"kind", "outcome", "source", "intent", "received_from", "received_before"})


@dataclass(frozen=True)
class RunTotals:
    """Matching runs, successes, tokens and cost. `capped`: more than TOTALS_CAP runs match a filter the daily totals
    cannot answer; the figures are then those of the newest TOTALS_CAP matching runs."""

    runs: int
    successes: int
    tokens: int
    cost: float
    capped: bool = False

    @property
    def success_rate(self) -> float | None:
        """Successful runs among the matching runs (None when nothing matches)."""
        return self.successes / self.runs if self.runs else None


def _whole_days(filters: RunFilters) -> tuple[date | None, date | None] | None:
    """The received bounds as local days [first, last], or None when a bound is not a local midnight."""
    days = []
    for bound in (filters.received_from, filters.received_before):
        if bound is None:
            days.append(None)
            continue
        local = timezone.localtime(bound)
        if local.time() != time_of_day.min:
            return None
        days.append(local.date())
    first, before = days
    return first, (before - timedelta(days=1)) if before is not None else None


def totals_are_kept(filters: RunFilters) -> bool:
    """Whether the daily totals answer these filters (one small query), rather than a walk of the matching runs."""
    used = {name for name, value in vars(filters).items() if value not in (None, "", "all") and name != "search_first"}
    return used <= ROLLUP_FIELDS and _whole_days(filters) is not None


def _totals_from_days(filters: RunFilters) -> RunTotals:
    """From the all-time rows when no day bound is set, else from the day rows within the bounds: one plain GROUP BY
    outcome over at most a few thousand rows (written by hand: the ORM took twice the query's time to compile it)."""
    first, last = _whole_days(filters)
    model = RunDay if first is not None or last is not None else RunTotal
    conditions, params = [], []
    if filters.kind in ("production", "evaluation"):
        conditions.append("source <> %s" if filters.kind == "production" else "source = %s")
        params.append(EVALUATION_SOURCE)
    for column in ("outcome", "source", "intent"):
        if getattr(filters, column):
            conditions.append(f"{column} = %s")
            params.append(getattr(filters, column))
    for condition, day in (("day >= %s", first), ("day <= %s", last)):
        if day is not None:
            conditions.append(condition)
            params.append(day)
    where = " AND ".join(conditions) or "1 = 1"
    table = model._meta.db_table
    sql = f"SELECT outcome, SUM(runs), SUM(tokens), SUM(cost) FROM {table} WHERE {where} GROUP BY outcome"
    with connections[model.objects.db].cursor() as cursor:
        cursor.execute(sql, params)
        by_outcome = cursor.fetchall()
    return RunTotals(  # SUM of bigint is numeric on PostgreSQL: int() it
        runs=sum(int(runs) for _, runs, _, _ in by_outcome),
        successes=sum(int(runs) for outcome, runs, _, _ in by_outcome if outcome == Outcome.SUCCESS),
        tokens=sum(int(tokens) for _, _, tokens, _ in by_outcome),
        cost=sum(cost for _, _, _, cost in by_outcome),
    )


def run_totals(*, filters: RunFilters) -> RunTotals:
    """Totals of the filtered runs in one query whatever the number of runs: from the daily totals when the filters
    are theirs (kind, outcome, source, intent, whole received days), else over at most the newest TOTALS_CAP + 1
    matching runs (an index walk, never a scan of every run; their three columns summed here, which costs less than
    compiling the ORM's window and aggregate for the server to sum them)."""
    if totals_are_kept(filters):
        return _totals_from_days(filters)
    newest = filters.apply(Run.objects.all()).order_by("-id").values_list("outcome", "total_tokens", "cost")
    rows = list(newest[: TOTALS_CAP + 1])
    capped = len(rows) > TOTALS_CAP
    del rows[TOTALS_CAP:]
    return RunTotals(
        runs=len(rows),
        successes=sum(outcome == Outcome.SUCCESS for outcome, _, _ in rows),
        tokens=sum(tokens for _, tokens, _ in rows),
        cost=sum(cost for _, _, cost in rows),
        capped=capped,
    )


# A text search that matches few runs must not be answered by walking the runs in page order looking for matches:
# PostgreSQL estimates every word outside its most common ones at the same frequency (thousands of runs in a
# million), so for a rare word it walks the id index through most of the table (bench/pages.py: 0.3 s). A probe of
# the newest SEARCH_PROBE_WINDOW runs tells a rare search from a common one (it stops at SEARCH_PROBE_MATCHES
# matches, so a common word costs a few rows); a rare one is read from the GIN index first (SEARCH_FIRST_SQL: the
# ids of its matches, then the page or the walk among them), a common one finds its page among the newest runs.
SEARCH_PROBE_WINDOW = 500
SEARCH_PROBE_MATCHES = 13  # the same share as 26 of 1,000 (a page and one row), at half the probe's cost


PROBE_WINDOW_SQL = f'"{Run._meta.db_table}"."id" > (SELECT MAX("id") FROM "{Run._meta.db_table}") - %s'


def text_search_is_rare(filters: RunFilters) -> bool:
    """Fewer than SEARCH_PROBE_MATCHES runs among the newest SEARCH_PROBE_WINDOW ids match every filter (one query,
    bounded by the window: an index range on the ids, whatever the search)."""
    newest = Run.objects.filter(RawSQL(PROBE_WINDOW_SQL, [SEARCH_PROBE_WINDOW], output_field=BooleanField()))
    matches = filters.apply(newest).values_list("id", flat=True)[:SEARCH_PROBE_MATCHES]
    return len(matches) < SEARCH_PROBE_MATCHES


# The probe's answers, kept per process for a minute by filters: the next page of a search and its totals request
# ask the same question at once, and whether a word is rare among the newest runs changes slowly. A stale answer
# only picks the other plan; both give the same rows (tests/trajectories/test_search_plan.py).
PROBE_ANSWERS: Recent[RunFilters, bool] = Recent(max_age=60.0, size=256)


def planned(filters: RunFilters) -> RunFilters:
    """The filters as the explorer runs them: a rare text search on PostgreSQL read from the GIN index first (one
    probe decides, or its answer of the last minute); anything else unchanged, without a query."""
    searching = bool(filters.search and filters.search.strip())
    if not searching or connections[Run.objects.db].vendor != "postgresql":
        return filters
    rare = PROBE_ANSWERS.get(filters)
    if rare is None:
        rare = text_search_is_rare(filters)
        PROBE_ANSWERS.put(filters, rare)
    return replace(filters, search_first=True) if rare else filters


def run_results(
    *, filters: RunFilters, cursor: str | None = None, limit: int = 50, sort: str = "newest", totals: bool = True
) -> tuple[RunPage, RunTotals | None]:
    """The explorer's page (run_page) and, unless `totals` is false, its totals (run_totals), under one plan for a
    text search."""
    filters = planned(filters)
    page = run_page(filters=filters, cursor=cursor, limit=limit, sort=sort)
    return page, run_totals(filters=filters) if totals else None


def searched_totals(*, filters: RunFilters) -> RunTotals:
    """run_totals under the plan run_results uses for a text search (the explorer's totals, asked for on their own)."""
    return run_totals(filters=planned(filters))


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
        "procedure_revision": run.procedure_revision,
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


def run_models(run_ids: Sequence[int]) -> dict[int, str]:
    """The agent's model (`metadata.model`) of each run among `run_ids` that names one (a query per 5,000 ids)."""
    ids = sorted(set(run_ids))
    found: dict[int, str] = {}
    for start in range(0, len(ids), 5000):
        rows = Run.objects.filter(pk__in=ids[start : start + 5000]).values_list("pk", "metadata__model")
        found.update((pk, str(model)[:200]) for pk, model in rows if isinstance(model, str) and model)
    return found


def step_observations(run_ids: Sequence[int], tools: Sequence[str], *, limit: int = 2000) -> list[tuple]:
    """(run id, ordinal, tool, observation) of the steps of `run_ids` that call one of `tools`, in run and ordinal
    order, at most `limit` (one query): where a learned text's sources can be read."""
    if not run_ids or not tools:
        return []
    rows = (
        Step.objects.filter(run_id__in=sorted(set(run_ids)), tool__in=sorted(set(tools)))
        .order_by("run_id", "ordinal")
        .values_list("run_id", "ordinal", "tool", "observation")
    )
    return list(rows[:limit])


def model_counts(runs: QuerySet[Run], *, limit: int) -> dict[str, int]:
    """How many of the newest `limit` runs of `runs` came from each agent model (`metadata.model`; runs naming none
    left out). One query."""
    newest = runs.order_by("-id").values_list("metadata__model", flat=True)[:limit]
    counts: dict[str, int] = {}
    for model in newest:
        if isinstance(model, str) and model:
            counts[model[:200]] = counts.get(model[:200], 0) + 1
    return counts


def run_with_steps(run_id: int) -> Run:
    """The run with its steps prefetched (two queries); Http404 when it does not exist."""
    return get_object_or_404(Run.objects.defer("search_document").prefetch_related("steps"), pk=run_id)


def run_and_steps(run_id: int) -> tuple[Run, list[Step]]:
    """The run and its steps in order (two queries, without the prefetch machinery: a run's page); Http404 when the
    run does not exist."""
    run = Run.objects.defer("search_document").filter(pk=run_id).first()
    if run is None:
        raise Http404(f"no run {run_id}")
    return run, list(Step.objects.filter(run_id=run_id))


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
    """(runs, total): the window [offset, offset+limit) of the production runs a graph workspace guided, oldest
    first, with their steps prefetched (three queries). Graph evolution learns from them (its traces, the agents
    evaluator's validation tasks): the runs answering evaluation jobs are evidence of their own jobs, never read."""
    runs = Run.objects.production().filter(graph_workspace=workspace_slug).order_by("id")
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


# --- steps as columns, streamed (procedures' mining and offline replay) ---------------------------------------------
COLUMN_CHUNK = 2000


def step_columns(
    run_ids: Sequence[int] | QuerySet | RawSQL, *, only_ok: bool = False, chunk_size: int = COLUMN_CHUNK
) -> Iterator[tuple[int, list[str], list[str]]]:
    """The steps of the runs among `run_ids` as columns, one run at a time in ascending run id order: (run id, its
    tool names, its arguments as JSON text), both in ordinal order; with `only_ok`, steps whose ok is true only.
    Runs without (such) steps are left out. `run_ids` may be a queryset of run ids (`.values("pk")`) or a RawSQL
    query selecting run ids (say, from a temporary table): on PostgreSQL it stays a subquery, so the ids never reach
    Python.

    Memory stays flat in the number of runs: on PostgreSQL one query groups each run's steps into arrays and its
    rows are streamed (libpq's chunked mode, `chunk_size` rows at a time: the server sends while Python reads), so
    the connection serves nothing else until the iteration ends or the generator is closed (another query on it
    meanwhile fails); elsewhere the ids are read `chunk_size` at a time. Arguments stay JSON text (decode them
    where a value is needed)."""
    yield from _columns(run_ids, with_run=False, only_ok=only_ok, with_missing=False, chunk_size=chunk_size)


def run_columns(
    run_ids: Sequence[int] | QuerySet | RawSQL, *, with_missing: bool = False, chunk_size: int = COLUMN_CHUNK
) -> Iterator[tuple[int, str | None, int | None, float | None, list[str], list[str]]]:
    """The runs among `run_ids` that exist, as columns, one at a time in ascending id order: (run id, outcome,
    total tokens, cost, tool names, arguments as JSON text), the steps in ordinal order (a run without steps has
    empty lists). With `with_missing`, every id of `run_ids` once, a run that does not exist as (its id, None,
    None, None, [], []). Streamed like `step_columns` (`run_ids` may be a queryset or RawSQL query of run ids)."""
    yield from _columns(run_ids, with_run=True, only_ok=False, with_missing=with_missing, chunk_size=chunk_size)


def _columns(
    run_ids: Sequence[int] | QuerySet | RawSQL, *, with_run: bool, only_ok: bool, with_missing: bool, chunk_size: int
) -> Iterator[tuple]:
    connection = connections[Run.objects.db]
    if connection.vendor == "postgresql":
        yield from _columns_on_postgresql(
            run_ids, with_run=with_run, only_ok=only_ok, with_missing=with_missing, chunk_size=chunk_size
        )
        return
    if isinstance(run_ids, QuerySet):
        run_ids = list(run_ids.values_list("pk", flat=True))
    elif isinstance(run_ids, RawSQL):
        with connection.cursor() as cursor:
            cursor.execute(run_ids.sql, run_ids.params)
            run_ids = [pk for (pk,) in cursor.fetchall()]
    ids = sorted(set(run_ids))
    if not ids:
        return
    step, run = Step._meta.db_table, Run._meta.db_table
    ok = " AND s.ok" if only_ok else ""
    for start in range(0, len(ids), chunk_size):
        chunk = ids[start : start + chunk_size]
        marks = ", ".join(["%s"] * len(chunk))
        with connection.cursor() as cursor:
            runs = {}
            if with_run:
                cursor.execute(f"SELECT id, outcome, total_tokens, cost FROM {run} WHERE id IN ({marks})", chunk)
                runs = {row[0]: row for row in cursor.fetchall()}
            cursor.execute(
                f"SELECT s.run_id, s.tool, s.arguments FROM {step} s WHERE s.run_id IN ({marks}){ok}"
                " ORDER BY s.run_id, s.ordinal",
                chunk,
            )
            steps: dict[int, tuple[list[str], list[str]]] = {}
            for run_id, tool, arguments in cursor.fetchall():
                tools, texts = steps.setdefault(run_id, ([], []))
                tools.append(tool)
                texts.append(arguments)
        for run_id in chunk:
            tools, texts = steps.get(run_id, ([], []))
            if with_run:
                if run_id in runs:
                    yield (*runs[run_id], tools, texts)
                elif with_missing:
                    yield run_id, None, None, None, [], []
            elif tools:
                yield run_id, tools, texts


def _columns_on_postgresql(
    run_ids: Sequence[int] | QuerySet | RawSQL, *, with_run: bool, only_ok: bool, with_missing: bool, chunk_size: int
) -> Iterator[tuple]:
    """One query, streamed: a row per step in (run id, ordinal) order, grouped into a run's columns here (measured
    faster than grouping in the server with `array_agg(… ORDER BY ordinal)`: 0.25 s against 0.41 s for 56,000 runs,
    docs/decisions.md). A query of run ids stays a subquery, made an array in the server (`= ANY(ARRAY(…))`: the
    indexes are then scanned for those ids in id order, with no join to plan). With `with_run`, each run's fields
    lead its rows and a run without steps comes as one row without a tool; with `with_missing`, every id is joined
    to its run (none: an id without a run), so each id comes once."""
    if isinstance(run_ids, QuerySet | RawSQL):
        if isinstance(run_ids, RawSQL):
            subquery, params = run_ids.sql, list(run_ids.params)
        else:
            try:
                subquery, params = run_ids.values("pk").query.sql_with_params()
            except EmptyResultSet:  # a queryset known to be empty (`.none()`)
                return
            params = list(params)
    else:
        ids = sorted(set(run_ids))
        if not ids:
            return
        # The ids as one array literal: psycopg's per-element array dumper costs more than the query.
        subquery, params = "SELECT unnest(%s::bigint[])", ["{" + ",".join(map(str, map(int, ids))) + "}"]
    step, run = Step._meta.db_table, Run._meta.db_table
    if with_missing:
        sql = (
            f"SELECT ids.id, r.outcome, r.total_tokens, r.cost, s.tool, s.arguments"
            f" FROM (SELECT DISTINCT x.id FROM ({subquery}) AS x(id)) ids LEFT JOIN {run} r ON r.id = ids.id"
            f" LEFT JOIN {step} s ON s.run_id = r.id ORDER BY ids.id, s.ordinal"
        )
    elif with_run:
        sql = (
            f"SELECT r.id, r.outcome, r.total_tokens, r.cost, s.tool, s.arguments FROM {run} r"
            f" LEFT JOIN {step} s ON s.run_id = r.id WHERE r.id = ANY(ARRAY({subquery})) ORDER BY r.id, s.ordinal"
        )
    else:
        ok = " AND s.ok" if only_ok else ""
        sql = (
            f"SELECT s.run_id, s.tool, s.arguments FROM {step} s WHERE s.run_id = ANY(ARRAY({subquery})){ok}"
            " ORDER BY s.run_id, s.ordinal"
        )
    from psycopg import pq  # PostgreSQL only

    size = chunk_size if pq.version() >= 170000 else 1  # chunks need libpq 17; before it, row by row
    with connections[Run.objects.db].cursor() as cursor:
        yield from _grouped_by_run(cursor.cursor.stream(sql, params, size=size))


def _grouped_by_run(rows: Iterable[tuple]) -> Iterator[tuple]:
    """Rows of (run id, *the run's fields, tool, arguments) in run order, as (run id, *fields, tools, arguments)
    per run; a row whose tool is None (a run without steps) adds no step."""
    run, tools, texts = None, [], []
    for row in rows:
        if run is None or row[0] != run[0]:
            if run is not None:
                yield (*run, tools, texts)
            run, tools, texts = row[:-2], [], []
        if row[-2] is not None:
            tools.append(row[-2])
            texts.append(row[-1])
    if run is not None:
        yield (*run, tools, texts)


def has_ok_step() -> Exists:
    """An expression for annotating runs (`run_queryset()`): whether the run has a step whose ok is true."""
    return Exists(Step.objects.filter(run_id=OuterRef("pk"), ok=True))


# --- for other apps: where their reads of runs start (they never import trajectories.models; issue 14) -------------


def run_queryset() -> QuerySet[Run]:
    """Every stored run, unevaluated: other apps' selectors narrow it by the run's fields (intents by window, batch
    and intent; `.production()` leaves out the runs answering evaluation jobs)."""
    return Run.objects.all()


@dataclass(frozen=True)
class RunCounts:
    """All runs ever received: production runs by outcome with their steps, and the evaluation runs apart."""

    runs: int
    successes: int
    failures: int
    steps: int
    evaluation_runs: int


def run_counts() -> RunCounts:
    """From the all-time totals ingest keeps (trajectories.rollup): one GROUP BY over a few hundred rows, by source
    and outcome, summed here. Its SQL is compiled by the ORM once per process and then run on a plain cursor: the
    ORM's compiling cost several times the query."""
    if not _COUNTS_SQL:
        rows = RunTotal.objects.values("source", "outcome").annotate(run_sum=Sum("runs"), step_sum=Sum("steps"))
        sql, params = rows.values_list("source", "outcome", "run_sum", "step_sum").order_by().query.sql_with_params()
        assert not params, params  # a fixed statement: nothing to bind
        _COUNTS_SQL.append(sql)
    counts = {"runs": 0, "successes": 0, "failures": 0, "steps": 0, "evaluation_runs": 0}
    with connections[RunTotal.objects.db].cursor() as cursor:
        cursor.execute(_COUNTS_SQL[0])
        for source, outcome, run_sum, step_sum in cursor.fetchall():
            runs, steps = int(run_sum), int(step_sum)  # SUM of bigint is numeric on PostgreSQL
            if source == EVALUATION_SOURCE:
                counts["evaluation_runs"] += runs
                continue
            counts["runs"] += runs
            counts["steps"] += steps
            if outcome == Outcome.SUCCESS:
                counts["successes"] += runs
            elif outcome == Outcome.FAILURE:
                counts["failures"] += runs
    return RunCounts(**counts)


_COUNTS_SQL: list[str] = []


@dataclass(frozen=True)
class DayTotal:
    """Production runs received on one local day with one intent ("" for none) and one outcome."""

    day: date
    intent: str
    outcome: str
    runs: int
    tokens: int
    cost: float


def production_window[S](
    first_day: date, summarize: Callable[[list[DayTotal]], S], *, name: str, today: date | None = None
) -> tuple[S, S]:
    """`summarize` of the production day totals (per day, intent and outcome, sources summed) from `first_day` on,
    as (closed days, open days): the closed days' summary read by one GROUP BY the first time and then kept per
    process under `name` (trajectories.closed_days), the open days' (today and yesterday) by one small GROUP BY on
    every call. A caller that only needs sums over the window sums the closed days once."""
    open_from = max(first_day, closed_days.first_open_day(today))
    if first_day < open_from:
        kept = closed_days.closed(first_day, open_from, lambda a, b: summarize(_day_totals(a, b)), name=name)
    else:
        kept = summarize([])
    return kept, summarize(_day_totals(open_from, None))


def _day_totals(first_day: date, before: date | None) -> list[DayTotal]:
    """Production day rows summed over sources, from `first_day` up to `before` (one plain GROUP BY: through the ORM
    compiling it took twice as long as running it, on every dashboard)."""
    bounds, params = "day >= %s", [EVALUATION_SOURCE, first_day]
    if before is not None:
        bounds += " AND day < %s"
        params.append(before)
    sql = (
        f"SELECT day, intent, outcome, SUM(runs), SUM(tokens), SUM(cost) FROM {RunDay._meta.db_table} "
        f"WHERE source <> %s AND {bounds} GROUP BY day, intent, outcome"
    )
    with connections[RunDay.objects.db].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # SUM of bigint is numeric on PostgreSQL: int() it
    return [
        DayTotal(day, intent, outcome, int(runs), int(tokens), cost)
        for day, intent, outcome, runs, tokens, cost in rows
    ]


def recent_production_runs(limit: int) -> list[ListedRun]:
    """The newest production runs, as lists show them (one query, compiled once per thread: the dashboard's)."""
    return [ListedRun(*row) for row in _newest_production(limit).rows()]


@functools.cache
def _newest_production(limit: int) -> FixedQuery:
    return FixedQuery(lambda: Run.objects.production().order_by("-id").values_list(*LISTED_COLUMNS)[:limit])


def run_ids_by_identity(identities: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """{(source, external_id): run id} for the stored runs among `identities` (one query)."""
    wanted = set(identities)
    if not wanted:
        return {}
    rows = Run.objects.filter(external_id__in={external_id for _, external_id in wanted}).values_list(
        "source", "external_id", "id"
    )
    return {(source, external_id): pk for source, external_id, pk in rows if (source, external_id) in wanted}


def guided_runs_per_day(workspace_slug: str, *, since: datetime) -> dict[date, tuple[int, int]]:
    """{local day: (runs, successes)} of the production runs received since `since` that name the graph workspace
    in `graph_workspace` (one GROUP BY query)."""
    grouped = (
        Run.objects.production()
        .filter(graph_workspace=workspace_slug, created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(runs=Count("id"), success=Count("id", filter=Q(outcome=Outcome.SUCCESS)))
        .order_by()
    )
    return {item["day"]: (item["runs"], item["success"]) for item in grouped}
