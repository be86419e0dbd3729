"""Run totals kept by ingest and read where every run would otherwise be scanned: by day (RunDay) and over all days
(RunTotal, the same without the day: a few hundred rows where the day rows grow with every day).

`record` adds a batch of newly stored runs to their day rows and their all-time rows inside the ingest's
transaction, with one INSERT … ON CONFLICT DO UPDATE per table that adds to the stored counts (PostgreSQL and SQLite
alike; keys sorted, so two concurrent batches lock the rows in one order). `rebuild` recomputes every row from the
runs (migrations 0006 and 0008, and after writing runs behind ingest's back, e.g. bench/pages.py's COPY), and
replaces the generation under which processes keep closed days' totals (trajectories.closed_days). A day is
the local date of `created_at` in settings.TIME_ZONE when the run was stored; changing TIME_ZONE later does not move
stored rows — rebuild them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from . import closed_days
from .models import Run, RunDay, RunTotal

Key = tuple[date, str, str, str]


def _day(moment: datetime) -> date:
    return timezone.localdate(moment)


def _upsert(table: str, keys: list[str], sums: Mapping[tuple, list]) -> None:
    """One INSERT … ON CONFLICT DO UPDATE adding `sums` (runs, steps, tokens, cost by key) to `table`'s rows."""
    ordered = sorted(sums)  # one lock order for concurrent batches
    columns = ", ".join([*keys, "runs", "steps", "tokens", "cost"])
    row = "(" + ", ".join(["%s"] * (len(keys) + 4)) + ")"
    params: list = []
    for key in ordered:
        params.extend([*key, *sums[key]])
    sql = (
        f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * len(ordered))} "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
        f"runs = {table}.runs + excluded.runs, steps = {table}.steps + excluded.steps, "
        f"tokens = {table}.tokens + excluded.tokens, cost = {table}.cost + excluded.cost"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def record(runs: Iterable[Mapping[str, Any]]) -> None:
    """Add newly stored runs (mappings with created_at, source, intent, outcome, step_count, total_tokens, cost) to
    their day rows and their all-time rows. Call inside the transaction that stored them."""
    days: dict[Key, list] = defaultdict(lambda: [0, 0, 0, 0.0])
    for run in runs:
        row = days[(_day(run["created_at"]), run["source"], run["intent"], run["outcome"])]
        row[0] += 1
        row[1] += run["step_count"]
        row[2] += run["total_tokens"]
        row[3] += run["cost"]
    if not days:
        return
    totals: dict[tuple[str, str, str], list] = defaultdict(lambda: [0, 0, 0, 0.0])
    for (_, *key), row in days.items():
        total = totals[tuple(key)]
        for index, value in enumerate(row):
            total[index] += value
    _upsert(RunDay._meta.db_table, ["day", "source", "intent", "outcome"], days)
    _upsert(RunTotal._meta.db_table, ["source", "intent", "outcome"], totals)


def rebuild(run_model=Run, day_model=RunDay, total_model=RunTotal) -> int:
    """Recompute every day row from the stored runs (one GROUP BY), and the all-time rows from the day rows; the
    number of day rows. Takes the models so a migration can pass its historical ones (None: a migration from before
    the all-time rows existed)."""
    grouped = (
        run_model.objects.annotate(day=TruncDate("created_at"))
        .values("day", "source", "intent", "outcome")
        .annotate(runs=Count("id"), steps=Sum("step_count"), tokens=Sum("total_tokens"), cost=Sum("cost"))
        .order_by()
    )
    rows = [
        day_model(
            day=item["day"],
            source=item["source"],
            intent=item["intent"],
            outcome=item["outcome"],
            runs=item["runs"],
            steps=item["steps"] or 0,
            tokens=item["tokens"] or 0,
            cost=item["cost"] or 0.0,
        )
        for item in grouped.iterator(chunk_size=2000)
    ]
    with transaction.atomic():
        day_model.objects.all().delete()
        day_model.objects.bulk_create(rows, batch_size=2000)
        if total_model is not None:
            rebuild_totals(day_model, total_model)
        closed_days.bump()  # past days may have changed: the dashboard's kept closed days go, on commit
    return len(rows)


def rebuild_totals(day_model=RunDay, total_model=RunTotal) -> int:
    """Recompute the all-time rows from the day rows (one GROUP BY); the number of rows."""
    grouped = (
        day_model.objects.values("source", "intent", "outcome")
        .annotate(all_runs=Sum("runs"), all_steps=Sum("steps"), all_tokens=Sum("tokens"), all_cost=Sum("cost"))
        .order_by()
    )
    rows = [
        total_model(
            source=item["source"],
            intent=item["intent"],
            outcome=item["outcome"],
            runs=item["all_runs"],
            steps=item["all_steps"],
            tokens=item["all_tokens"],
            cost=item["all_cost"],
        )
        for item in grouped
    ]
    with transaction.atomic():
        total_model.objects.all().delete()
        total_model.objects.bulk_create(rows, batch_size=2000)
    return len(rows)
