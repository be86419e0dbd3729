"""The seeded split of an intent's runs into training and held-out runs, kept in the database.

Successful and failed runs are split alike: within each outcome the runs are ordered by their split key, a 32-bit
mix of the run id and the seed (procedures.mining.split_key; then by id), and the first round(n × share) are held
out; the successful side keeps at least one run on each side (procedures.mining.split_ids states the rule in Python;
docs/decisions.md).

On PostgreSQL one statement computes the split once into a temporary table: each run's id, outcome and rank within
its outcome by (split key, id), from a window function; a run is held out when its rank is at most its outcome's
held-out count. Everything after reads that table, never the runs again and never the keys: the counts, the
training runs' steps (streamed from it: trajectories.selectors.step_columns) and a new version's run-id lists,
written from it by one statement (`create_with_run_lists`). So mining never holds the runs' ids in Python. The
table is dropped at commit when the split is made inside a transaction, else by `RunSplit.close()` (a split is a
context manager). Elsewhere (SQLite: development) the rule becomes a threshold per outcome, the last held-out
run's (key, id), tested on each run of a queryset, and the lists are built in Python.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    Count,
    ExpressionWrapper,
    Max,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import RawSQL

from trajectories.choices import Outcome
from trajectories.selectors import has_ok_step, run_queryset

from ..mining import held_out_count, split_key_sql

# The version's run-id lists, and which runs of the split each holds.
RUN_LISTS = ("training_run_ids", "held_out_run_ids", "source_run_ids", "skipped_run_ids")
_LIST_RUNS = {
    "training_run_ids": "NOT held",
    "held_out_run_ids": "held",
    "source_run_ids": "NOT held AND has_ok",  # the training successes the steps were learnt from
    "skipped_run_ids": f"NOT held AND outcome = '{Outcome.SUCCESS.value}' AND NOT has_ok",  # training, no ok step
}
SKIPPED_SHOWN = 50
Threshold = tuple[int, int] | None  # the (split key, id) of an outcome's last held-out run; None: none held out
_TABLE_NUMBERS = itertools.count(1)  # temporary tables are per session: a number per split made by this process


@dataclass(frozen=True)
class RunSplit:
    """A seeded split of the successful and failed runs of a queryset, with its counts: on PostgreSQL in the
    temporary `table` (id, outcome, rank), elsewhere as `keyed` (the queryset with `split_key`) and `thresholds`."""

    successes: int
    failures: int
    held_out_successes: int
    held_out_failures: int
    newest: int  # the highest run id considered (0: none)
    table: str = ""
    keyed: QuerySet | None = None
    thresholds: dict[str, Threshold] = dataclasses.field(default_factory=dict)
    # True once mining saw an ok step in every training success (`mined`): no run is skipped, so the lists need
    # not look for ok steps again.
    none_skipped: bool = False

    @property
    def training_successes(self) -> int:
        return self.successes - self.held_out_successes

    def mined(self, runs: int) -> RunSplit:
        """The split, told how many training successes mining found ok steps in (the same table)."""
        return dataclasses.replace(self, none_skipped=runs == self.training_successes)

    def close(self) -> None:
        """Drop the split's temporary table (if any, and if still there); the split is unusable after."""
        if self.table:
            with connections[run_queryset().db].cursor() as cursor:
                cursor.execute(f"DROP TABLE IF EXISTS {self.table}")

    def __enter__(self) -> RunSplit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _held_sql(self) -> tuple[str, list[Any]]:
        """Whether a row of the table is held out, as SQL over its outcome and rank."""
        return "rank <= CASE WHEN outcome = %s THEN %s ELSE %s END", [
            Outcome.SUCCESS.value,
            self.held_out_successes,
            self.held_out_failures,
        ]

    def _held(self, *outcomes: str) -> Q | None:
        """Which runs of `outcomes` are held out: their (key, id) is not above their outcome's threshold (None: no
        run of those outcomes is held out)."""
        held = None
        for outcome in outcomes:
            if self.thresholds[outcome] is not None:
                key, pk = self.thresholds[outcome]
                this = Q(outcome=outcome) & (Q(split_key__lt=key) | Q(split_key=key, pk__lte=pk))
                held = this if held is None else held | this
        return held

    def _annotated(self, *, with_ok: bool) -> QuerySet:
        """The runs with `held` and, when asked, `has_ok` (whether a successful run has a step whose ok is true)."""
        held = self._held(Outcome.SUCCESS, Outcome.FAILURE)
        runs = self.keyed.annotate(
            held=Value(False) if held is None else ExpressionWrapper(held, output_field=BooleanField())
        )
        if with_ok:
            runs = runs.annotate(has_ok=Case(When(outcome=Outcome.SUCCESS, then=has_ok_step()), default=Value(False)))
        return runs

    def training_success_ids(self) -> QuerySet | RawSQL:
        """The training successful runs' ids, as a subquery (never read into Python): RawSQL over the table on
        PostgreSQL, a queryset elsewhere (both are what trajectories.selectors.step_columns takes)."""
        if self.table:
            return RawSQL(
                f"SELECT id FROM {self.table} WHERE outcome = %s AND rank > %s",
                (Outcome.SUCCESS.value, self.held_out_successes),
            )
        successes = self.keyed.filter(outcome=Outcome.SUCCESS)
        held = self._held(Outcome.SUCCESS)
        return (successes if held is None else successes.exclude(held)).values("pk")

    def _split_sql(self) -> tuple[str, list[Any]]:
        """The split as SQL over its table (PostgreSQL): (id, outcome, has_ok, held) per run, with its parameters.
        has_ok: a successful run with a step whose ok is true, looked up for the training successes only, and not
        at all once mining saw ok steps in each of them (`none_skipped`)."""
        held, held_params = self._held_sql()
        if self.none_skipped:
            return f"SELECT id, outcome, outcome = %s AS has_ok, {held} AS held FROM {self.table}", [
                Outcome.SUCCESS.value,
                *held_params,
            ]
        training = self.training_success_ids()
        with_ok, ok_params = (
            run_queryset()
            .filter(pk__in=training)
            .annotate(has_ok=has_ok_step())
            .values_list("pk", "has_ok")
            .query.sql_with_params()
        )
        return (
            f"SELECT t.id, t.outcome, coalesce(ok.has_ok, false) AS has_ok, {held} AS held FROM {self.table} t"
            f" LEFT JOIN ({with_ok}) AS ok(id, has_ok) ON ok.id = t.id",
            [*held_params, *ok_params],
        )

    def run_lists(self) -> dict[str, list[int]]:
        """The lists in Python (ascending ids): for databases other than PostgreSQL, and for tests."""
        lists: dict[str, list[int]] = {name: [] for name in RUN_LISTS}
        if self.table:
            sql, params = self._split_sql()
            with connections[run_queryset().db].cursor() as cursor:
                cursor.execute(f"SELECT id, outcome, held, has_ok FROM ({sql}) split ORDER BY id", params)
                rows = cursor.fetchall()
        else:
            rows = self._annotated(with_ok=True).values_list("pk", "outcome", "held", "has_ok").order_by("pk")
        for pk, outcome, held, has_ok in rows:
            if held:
                lists["held_out_run_ids"].append(pk)
                continue
            lists["training_run_ids"].append(pk)
            if has_ok:
                lists["source_run_ids"].append(pk)
            elif outcome == Outcome.SUCCESS:
                lists["skipped_run_ids"].append(pk)
        return lists


def split_runs(runs: QuerySet, *, held_out_share: float, seed: int) -> RunSplit:
    """Split the successful and failed runs of `runs` (see the module docstring). On PostgreSQL: one statement
    writes the split's table, one query reads its counts; close the split (or use it as a context manager) when it
    is made outside a transaction."""
    runs = runs.filter(outcome__in=[Outcome.SUCCESS, Outcome.FAILURE]).order_by()
    connection = connections[runs.db]
    if connection.vendor != "postgresql":
        return _split_by_thresholds(runs, held_out_share=held_out_share, seed=seed)
    table = f"waymark_split_{next(_TABLE_NUMBERS)}"
    lifetime = " ON COMMIT DROP" if connection.in_atomic_block else ""
    try:
        sql, params = runs.values_list("pk", "outcome").query.sql_with_params()
    except EmptyResultSet:  # a queryset known to select nothing (no label names the intent): an empty table
        sql, params = "SELECT NULL::bigint, NULL::text WHERE false", ()
    counts = {Outcome.SUCCESS: 0, Outcome.FAILURE: 0}
    newest = 0
    with connection.cursor() as cursor:
        # A run's rank within its outcome is the count of its outcome's runs so far in (key, id) order: one sort led
        # by the key, measured 35% faster than partitioning by outcome (which leads the sort with a column of two
        # values, so nearly every comparison falls through to the full keys).
        cursor.execute(
            f"CREATE TEMPORARY TABLE {table}{lifetime} AS SELECT r.id, r.outcome, (CASE WHEN r.outcome = %s"
            f" THEN count(*) FILTER (WHERE r.outcome = %s) OVER ranked"
            f" ELSE count(*) FILTER (WHERE r.outcome <> %s) OVER ranked END)::integer AS rank"
            f" FROM ({sql}) AS r(id, outcome)"
            f" WINDOW ranked AS (ORDER BY {split_key_sql('r.id', seed, vendor='postgresql')}, r.id"
            f" ROWS UNBOUNDED PRECEDING)",
            [*[Outcome.SUCCESS.value] * 3, *params],
        )
        cursor.execute(f"SELECT outcome, count(*), max(id) FROM {table} GROUP BY outcome")
        for outcome, count, top in cursor.fetchall():
            counts[outcome] = count
            newest = max(newest, top)
    return RunSplit(
        successes=counts[Outcome.SUCCESS],
        failures=counts[Outcome.FAILURE],
        held_out_successes=held_out_count(counts[Outcome.SUCCESS], held_out_share=held_out_share, at_least_one=True),
        held_out_failures=held_out_count(counts[Outcome.FAILURE], held_out_share=held_out_share),
        newest=newest,
        table=table,
    )


def _split_by_thresholds(runs: QuerySet, *, held_out_share: float, seed: int) -> RunSplit:
    """The split elsewhere than on PostgreSQL: one query for the counts, one per outcome with held-out runs for its
    threshold."""
    counts = {Outcome.SUCCESS: 0, Outcome.FAILURE: 0}
    newest = 0
    for outcome, count, top in runs.values_list("outcome").annotate(count=Count("pk"), top=Max("pk")):
        counts[outcome] = count
        newest = max(newest, top)
    connection = connections[runs.db]
    column = f"{connection.ops.quote_name(runs.model._meta.db_table)}.{connection.ops.quote_name('id')}"
    keyed = runs.annotate(
        split_key=RawSQL(split_key_sql(column, seed, vendor=connection.vendor), (), output_field=BigIntegerField())
    )
    held_out = {
        Outcome.SUCCESS: held_out_count(counts[Outcome.SUCCESS], held_out_share=held_out_share, at_least_one=True),
        Outcome.FAILURE: held_out_count(counts[Outcome.FAILURE], held_out_share=held_out_share),
    }
    thresholds: dict[str, Threshold] = {}
    for outcome, count in held_out.items():
        last = keyed.filter(outcome=outcome).order_by("split_key", "pk").values_list("split_key", "pk")
        thresholds[outcome] = last[count - 1] if count else None
    return RunSplit(
        successes=counts[Outcome.SUCCESS],
        failures=counts[Outcome.FAILURE],
        held_out_successes=held_out[Outcome.SUCCESS],
        held_out_failures=held_out[Outcome.FAILURE],
        newest=newest,
        keyed=keyed,
        thresholds=thresholds,
    )


@dataclass(frozen=True)
class ListSizes:
    """What the audit event tells of the lists written: their sizes and the first skipped runs."""

    sources: int
    held_out: int
    skipped: list[int]


def create_with_run_lists(model: Any, split: RunSplit, names: tuple[str, ...] = RUN_LISTS, **fields: Any):
    """Create a row of `model` (a procedures model: a version, or a replay with its held-out list) with its run-id
    lists `names` taken from `split`, inside the caller's transaction; returns (the row, its ListSizes). On
    PostgreSQL one statement right after the insert writes every list from the split's table, so nothing per run
    reaches Python (the row, as returned, leaves the lists unread: they load when first read)."""
    connection = connections[model.objects.db]
    if not split.table:
        lists = split.run_lists()
        row = model.objects.create(**fields, **{name: lists[name] for name in names})
        sizes = ListSizes(
            sources=len(lists["source_run_ids"]),
            held_out=len(lists["held_out_run_ids"]),
            skipped=lists["skipped_run_ids"][:SKIPPED_SHOWN],
        )
        return row, sizes
    row = model.objects.create(**fields)
    split_sql, params = split._split_sql()
    assignments = ", ".join(
        f"{name} = (SELECT coalesce(to_jsonb(array_agg(id ORDER BY id)), '[]'::jsonb) FROM split"
        f" WHERE {_LIST_RUNS[name]})"
        for name in names
    )
    sizes = (
        f"(SELECT count(*) FROM split WHERE {_LIST_RUNS['source_run_ids']}),"
        f" (SELECT count(*) FROM split WHERE {_LIST_RUNS['held_out_run_ids']}),"
        f" (SELECT coalesce(jsonb_agg(id), '[]'::jsonb) FROM (SELECT id FROM split"
        f" WHERE {_LIST_RUNS['skipped_run_ids']} ORDER BY id LIMIT {SKIPPED_SHOWN}) first_skipped)"
    )
    with connection.cursor() as cursor:
        # The split read once (materialized), each list an aggregate of it (measured faster than one pass with a
        # FILTER per list).
        cursor.execute(
            f"WITH split AS MATERIALIZED ({split_sql}) UPDATE {model._meta.db_table} SET {assignments}"
            f" WHERE id = %s RETURNING {sizes}",
            [*params, row.pk],
        )
        sources, held_out, first_skipped = cursor.fetchone()
    row = model.objects.defer(*names).get(pk=row.pk)  # the lists as stored, read only when needed
    return row, ListSizes(sources=sources, held_out=held_out, skipped=_json(first_skipped))


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value
