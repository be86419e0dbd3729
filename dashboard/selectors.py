"""The dashboard's reads: a fixed number of queries whatever the data size.

Runs here are production runs only (`production()`): runs answering evaluation jobs are gate evidence, counted apart
and linked to the runs list filtered by `?kind=evaluation`. Counts and charts read the totals kept by ingest
(trajectories.selectors.run_counts, production_window: two queries over a few hundred and a few thousand rows),
never every run. Other apps' rows come through their selectors.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from functools import partial

from django.urls import NoReverseMatch, reverse

from accounts.blinding import blind, sealed_events
from accounts.selectors import AuditFilters, audit_page, latest_audit_events
from common import charts
from common.formats import fixed
from llm.selectors import model_call_count
from reviews.selectors import pending_count
from trajectories.choices import Outcome
from trajectories.selectors import (
    DayTotal,
    RunCounts,
    production_window,
    recent_production_runs,
    run_counts,
)

from . import tables

RECENT_RUNS = 5
OUTCOME_POSITION = {"success": 0, "failure": 1, "unknown": 2}  # DayRow's outcome fields, in order
assert set(OUTCOME_POSITION) == set(Outcome.values)
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
    qualifier: str = ""  # "about", "more than": a value that is not an exact count


def _url(name: str, *args, query: str = "") -> str:
    try:
        return reverse(name, args=args) + (f"?{query}" if query else "")
    except NoReverseMatch:
        return ""


def _counts(counts: RunCounts) -> list[Stat]:
    return [
        Stat("Runs", counts.runs, _url("trajectories:list")),
        Stat("Successful runs", counts.successes, _url("trajectories:list", query="outcome=success")),
        Stat("Failed runs", counts.failures, _url("trajectories:list", query="outcome=failure")),
        Stat("Steps", counts.steps),
        _ledger_stat(),
        Stat("Open reviews", pending_count(), _url("reviews:queue")),
    ]


def _ledger_stat() -> Stat:
    size = model_call_count()
    return Stat("Model calls", size.calls, _url("llm:calls"), size.qualifier)


def _recent_events(viewer) -> list:
    """The latest RECENT_EVENTS events `viewer` may see: a judgment of something still open is left out unless
    `viewer` has judged it too (accounts.blinding), and the list is still full — no gap to count or to time. The
    newest events come from the fixed query; only when some of them are sealed is the list read again without them
    (one more query)."""
    newest = latest_audit_events(RECENT_EVENTS)
    events = blind(newest, viewer)
    if len(events) < len(newest):
        events = audit_page(AuditFilters(), size=RECENT_EVENTS, hide=sealed_events(viewer)).events
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

    @property
    def cost_text(self) -> str:
        return fixed(self.cost, 4)


@dataclass(frozen=True)
class WindowSums:
    """Sums over a window's day totals, by position in the window's days: production runs by outcome, tokens and
    cost per day (`days`: [success, failure, unknown, tokens, cost] each), and per intent its successes and runs per
    day. The closed days' sums are kept per process (trajectories.selectors.production_window), so a request sums
    only the open days' few rows and adds; `+` makes new lists, never changing a kept one."""

    days: list[list]
    intents: dict[str, tuple[list[int], list[int]]]

    def __add__(self, other: WindowSums) -> WindowSums:
        intents = dict(self.intents)
        for intent, (success, runs) in other.intents.items():
            mine = intents.get(intent)
            intents[intent] = (success, runs) if mine is None else (_plus(mine[0], success), _plus(mine[1], runs))
        return WindowSums([_plus(a, b) for a, b in zip(self.days, other.days, strict=True)], intents)


def _plus(a: list, b: list) -> list:
    return [x + y for x, y in zip(a, b, strict=True)]


def window_sums(days: list[dt.date], totals: list[DayTotal]) -> WindowSums:
    """One pass over day totals (a window holds thousands of (day, intent, outcome) rows) into plain lists."""
    index = {day: position for position, day in enumerate(days)}
    sums = [[0, 0, 0, 0, 0.0] for _ in days]
    intents: dict[str, tuple[list[int], list[int]]] = {}
    for total in totals:
        position = index.get(total.day)
        outcome = OUTCOME_POSITION.get(total.outcome)
        if position is None or outcome is None:
            continue
        day = sums[position]
        day[outcome] += total.runs
        day[3] += total.tokens
        day[4] += total.cost
        if total.intent:
            found = intents.get(total.intent)
            if found is None:
                found = intents[total.intent] = ([0] * len(days), [0] * len(days))
            found[1][position] += total.runs
            if outcome == 0:  # success
                found[0][position] += total.runs
    return WindowSums(sums, intents)


def daily_rows(days: list[dt.date], sums: WindowSums) -> list[DayRow]:
    """Runs by outcome, tokens and cost per day of `days` (received at, local days)."""
    return [
        DayRow(day, success, failure, unknown, tokens, round(cost, 4))
        for day, (success, failure, unknown, tokens, cost) in zip(days, sums.days, strict=True)
    ]


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
    def cells(self) -> list[tuple[int, int, str]]:
        """(successes, runs, the rate with two decimals or "" on a day without runs) per day."""
        rates = ["" if rate is None else fixed(rate, 2) for rate in self.rates]
        return list(zip(self.success, self.total, rates, strict=True))


def intent_rates(sums: WindowSums, *, top: int = TOP_INTENTS) -> list[IntentRates]:
    """The `top` intents by production runs in the window (ties by name), each with its daily success counts."""
    runs = {intent: sum(daily) for intent, (_, daily) in sums.intents.items()}
    leaders = sorted(runs, key=lambda intent: (-runs[intent], intent))[:top]
    return [IntentRates(intent, runs[intent], *sums.intents[intent]) for intent in leaders]


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
    counts = run_counts()
    days = charts.window_days()
    closed, open_days = production_window(days[0], partial(window_sums, days), name="dashboard")
    sums = closed + open_days
    daily = daily_rows(days, sums)
    intents = intent_rates(sums)
    table = intent_table(days, intents)
    recent_runs = recent_production_runs(RECENT_RUNS)
    events = _recent_events(viewer)
    return {
        "counts": _counts(counts),
        "evaluation_runs": Stat(
            "evaluation runs not counted",
            counts.evaluation_runs,
            _url("trajectories:list", query="kind=evaluation"),
        ),
        "recent_runs": recent_runs,
        "recent_runs_rows": tables.recent_runs_rows(recent_runs),
        "recent_events": events,
        "activity_items": tables.activity_items(events),
        "window_days": len(days),
        "daily": daily,
        "has_runs_in_window": any(row.runs for row in daily),
        "outcome_chart": outcome_chart(daily),
        "usage_chart": usage_chart(daily),
        "intent_rates": intents,
        "intent_table": table,
        "intent_chart": intent_chart(days, intents),
        # the tables beside the charts, as HTML built in Python (dashboard.tables)
        "outcome_rows": tables.outcome_rows(daily),
        "usage_rows": tables.usage_rows(daily),
        "intent_head": tables.intent_head(intents),
        "intent_rows": tables.intent_rows(table),
    }
