"""The workspace page's trend: the production runs a workspace's graph guided, per day of the last 30, with their
success rate (docs/decisions.md: "Charts"). One GROUP BY query; the spec is drawn by static/js/charts.js."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from common import charts
from trajectories.selectors import guided_runs_per_day

from .models import Workspace


@dataclass(frozen=True)
class GuidedDay:
    day: dt.date
    runs: int = 0
    success: int = 0

    @property
    def rate(self) -> float | None:
        return charts.rate(self.success, self.runs)


@dataclass(frozen=True)
class WorkspaceTrends:
    days: list[GuidedDay]

    @property
    def runs(self) -> int:
        return sum(day.runs for day in self.days)

    @property
    def spec(self) -> dict[str, Any]:
        return charts.chart_spec(
            labels=[charts.day_label(day.day) for day in self.days],
            x_title="day (received)",
            y_title="success rate",
            y2_title="guided runs",
            y2_integer=True,
            series_list=[
                charts.series("success rate", [day.rate for day in self.days]),
                charts.series("guided runs", [day.runs for day in self.days], kind="bar", axis="y2", tone="neutral"),
            ],
        )


def workspace_trends(workspace: Workspace, *, days: int = charts.WINDOW_DAYS) -> WorkspaceTrends:
    """Production runs naming this workspace (`Run.graph_workspace`) per local day, zeros on days without: one query."""
    window = charts.window_days(days)
    found = guided_runs_per_day(workspace.slug, since=charts.window_start(window))
    return WorkspaceTrends(days=[GuidedDay(day, *found.get(day, (0, 0))) for day in window])
