"""The dashboard's reads: a fixed number of queries whatever the data size.

Runs here are production runs only (`production()`): runs answering evaluation jobs are gate evidence, counted apart
and linked to the runs list filtered by `?kind=evaluation`. Counts and charts read the daily totals kept by ingest
(trajectories.rollup.RunDay), never every run.
"""

import datetime as dt
from dataclasses import dataclass, field

from django.db.models import Q, Sum
from django.urls import NoReverseMatch, reverse

from accounts.blinding import blind
from accounts.models import AuditEvent
from llm.models import ModelCall
from reviews.selectors import pending_count
from trajectories.models import Outcome, Run, RunDay

from . import charts

RECENT_RUNS = 5
RECENT_EVENTS = 10
TOP_INTENTS = 5

# Audit targets that have a page of their own: target_type -> URL name taking the target's primary key.
TARGET_PAGES = {
    "trajectories.run": "trajectories:detail",
}


@dataclass(frozen=True)
class Stat:
    label: str
    value: int
    url: str = ""


def _url(name: str, *args, query: str = "") -> str:
    try:
        return reverse(name, args=args) + (f"?{query}" if query else "")
    except NoReverseMatch:
        return ""


def _counts() -> list[Stat]:
    runs = RunDay.objects.production().aggregate(
        total=Sum("runs", default=0),
        success=Sum("runs", filter=Q(outcome=Outcome.SUCCESS), default=0),
        failure=Sum("runs", filter=Q(outcome=Outcome.FAILURE), default=0),
        step_sum=Sum("steps", default=0),
    )
    return [
        Stat("Runs", runs["total"], _url("trajectories:list")),
        Stat("Successful runs", runs["success"], _url("trajectories:list", query="outcome=success")),
        Stat("Failed runs", runs["failure"], _url("trajectories:list", query="outcome=failure")),
        Stat("Steps", runs["step_sum"]),
        Stat("Model calls", ModelCall.objects.count(), _url("llm:calls")),
        Stat("Open reviews", pending_count(), _url("reviews:queue")),
    ]


def _recent_events(viewer) -> list[AuditEvent]:
    """The latest events; a judgment of something still open names no one unless `viewer` has judged it too."""
    events = blind(
        AuditEvent.objects.select_related("actor_user", "actor_token").defer("before", "after")[:RECENT_EVENTS], viewer
    )
    for event in events:
        page = TARGET_PAGES.get(event.target_type)
        event.target_url = _url(page, event.target_id) if page and event.target_id.isdigit() else ""
    return events


@dataclass
class DayRow:
    """One day of the window: production runs by outcome, their tokens and cost (zeros on a day with no run)."""

    day: dt.date
    success: int = 0
    failure: int = 0
    unknown: int = 0
    tokens: int = 0
    cost: float = 0.0

    @property
    def runs(self) -> int:
        return self.success + self.failure + self.unknown


def daily_rows(days: list[dt.date]) -> list[DayRow]:
    """Runs by outcome, tokens and cost per day of `days` (received at, local days): one GROUP BY query."""
    rows = {day: DayRow(day) for day in days}
    grouped = (
        RunDay.objects.production()
        .filter(day__gte=days[0])
        .values("day", "outcome")
        .annotate(run_sum=Sum("runs"), token_sum=Sum("tokens"), cost_sum=Sum("cost"))
        .order_by()
    )
    for item in grouped:
        row = rows.get(item["day"])
        if row is None or item["outcome"] not in Outcome.values:
            continue
        setattr(row, item["outcome"], item["run_sum"])
        row.tokens += item["token_sum"] or 0
        row.cost += item["cost_sum"] or 0.0
    for row in rows.values():
        row.cost = round(row.cost, 4)
    return list(rows.values())


def outcome_chart(rows: list[DayRow]) -> dict:
    return charts.chart_spec(
        labels=[charts.day_label(row.day) for row in rows],
        x_title="day (received)",
        y_title="runs",
        kind="bar",
        stacked=True,
        y_range=charts.FROM_ZERO,
        y_integer=True,
        series_list=[
            charts.series(outcome, [getattr(row, outcome) for row in rows], tone=tone)
            for outcome, tone in (("success", "success"), ("failure", "failure"), ("unknown", "neutral"))
        ],
    )


def usage_chart(rows: list[DayRow]) -> dict:
    return charts.chart_spec(
        labels=[charts.day_label(row.day) for row in rows],
        x_title="day (received)",
        y_title="tokens",
        kind="bar",
        y_range=charts.FROM_ZERO,
        y_integer=True,
        y2_title="cost (USD)",
        series_list=[
            charts.series("tokens", [row.tokens for row in rows]),
            charts.series("cost (USD)", [row.cost for row in rows], kind="line", axis="y2"),
        ],
    )


@dataclass
class IntentRates:
    """Success rate per day of one intent: successes / runs that day (None on a day without its runs)."""

    intent: str
    runs: int
    success: list[int] = field(default_factory=list)
    total: list[int] = field(default_factory=list)

    @property
    def rates(self) -> list[float | None]:
        return [charts.rate(part, whole) for part, whole in zip(self.success, self.total, strict=True)]

    @property
    def cells(self) -> list[tuple[int, int, float | None]]:
        return list(zip(self.success, self.total, self.rates, strict=True))


def intent_rates(days: list[dt.date], *, top: int = TOP_INTENTS) -> list[IntentRates]:
    """The `top` intents by production runs in the window (ties by name), each with its daily success counts:
    two queries (the top intents, then one GROUP BY day and intent)."""
    window = RunDay.objects.production().filter(day__gte=days[0]).exclude(intent="")
    leaders = window.values("intent").annotate(run_sum=Sum("runs")).order_by("-run_sum", "intent")[:top]
    result = {item["intent"]: IntentRates(item["intent"], item["run_sum"]) for item in leaders}
    if not result:
        return []
    index = {day: position for position, day in enumerate(days)}
    for item in result.values():
        item.success = [0] * len(days)
        item.total = [0] * len(days)
    grouped = (
        window.filter(intent__in=list(result))
        .values("day", "intent")
        .annotate(total=Sum("runs"), success=Sum("runs", filter=Q(outcome=Outcome.SUCCESS), default=0))
        .order_by()
    )
    for row in grouped:
        position = index.get(row["day"])
        if position is not None:
            result[row["intent"]].success[position] = row["success"]
            result[row["intent"]].total[position] = row["total"]
    return list(result.values())


def intent_chart(days: list[dt.date], rows: list[IntentRates]) -> dict:
    return charts.chart_spec(
        labels=[charts.day_label(day) for day in days],
        x_title="day (received)",
        y_title="success rate",
        series_list=[charts.series(row.intent, row.rates) for row in rows],
    )


def intent_table(days: list[dt.date], rows: list[IntentRates]) -> list[dict]:
    """The chart's numbers by day, newest first: per intent (in the chart's order) successes, runs and the rate."""
    cells = [row.cells for row in rows]
    return [
        {"day": day, "cells": [column[position] for column in cells]}
        for position, day in reversed(list(enumerate(days)))
    ]


def dashboard_context(viewer=None) -> dict:
    recent_runs = (
        Run.objects.production()
        .only("id", "source", "external_id", "task", "intent", "outcome", "score", "step_count", "created_at")
        .order_by("-id")[:RECENT_RUNS]
    )
    days = charts.window_days()
    daily = daily_rows(days)
    intents = intent_rates(days)
    return {
        "counts": _counts(),
        "evaluation_runs": Stat(
            "evaluation runs not counted",
            RunDay.objects.evaluation().aggregate(n=Sum("runs", default=0))["n"],
            _url("trajectories:list", query="kind=evaluation"),
        ),
        "recent_runs": list(recent_runs),
        "recent_events": _recent_events(viewer),
        "window_days": len(days),
        "daily": daily,
        "has_runs_in_window": any(row.runs for row in daily),
        "outcome_chart": outcome_chart(daily),
        "usage_chart": usage_chart(daily),
        "intent_rates": intents,
        "intent_table": intent_table(days, intents),
        "intent_chart": intent_chart(days, intents),
    }
