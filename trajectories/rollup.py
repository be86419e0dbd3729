"""Daily run totals (RunDay), kept by ingest and read where every run would otherwise be scanned.

`record` adds a batch of newly stored runs to their day rows inside the ingest's transaction, with one
INSERT … ON CONFLICT DO UPDATE that adds to the stored counts (PostgreSQL and SQLite alike; keys sorted, so two
concurrent batches lock the rows in one order). `rebuild` recomputes every row from the runs (migration 0006, and
after writing runs behind ingest's back, e.g. bench/pages.py's COPY). A day is the local date of `created_at` in
settings.TIME_ZONE when the run was stored; changing TIME_ZONE later does not move stored rows — rebuild them.
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

from .models import Run, RunDay

Key = tuple[date, str, str, str]


def _day(moment: datetime) -> date:
    return timezone.localdate(moment)


def record(runs: Iterable[Mapping[str, Any]]) -> None:
    """Add newly stored runs (mappings with created_at, source, intent, outcome, step_count, total_tokens, cost) to
    their day rows. Call inside the transaction that stored them."""
    sums: dict[Key, list] = defaultdict(lambda: [0, 0, 0, 0.0])
    for run in runs:
        row = sums[(_day(run["created_at"]), run["source"], run["intent"], run["outcome"])]
        row[0] += 1
        row[1] += run["step_count"]
        row[2] += run["total_tokens"]
        row[3] += run["cost"]
    if not sums:
        return
    table = RunDay._meta.db_table
    keys = sorted(sums)
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(keys))
    params: list = []
    for key in keys:
        params.extend([*key, *sums[key]])
    sql = (
        f"INSERT INTO {table} (day, source, intent, outcome, runs, steps, tokens, cost) VALUES {values} "
        "ON CONFLICT (day, source, intent, outcome) DO UPDATE SET "
        f"runs = {table}.runs + excluded.runs, steps = {table}.steps + excluded.steps, "
        f"tokens = {table}.tokens + excluded.tokens, cost = {table}.cost + excluded.cost"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def rebuild(run_model=Run, day_model=RunDay) -> int:
    """Recompute every day row from the stored runs (one GROUP BY); the number of rows. Takes the models so a
    migration can pass its historical ones."""
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
    return len(rows)
