"""Charts of procedures: a replay's metrics beside the active version's (the version page), and the procedure's
history, each version's replay metrics over version numbers (docs/decisions.md: "Charts").

`replay_charts` shapes what `selectors.version_page` already read (no query); `procedure_trends` is one query.
Specs are common.charts.chart_spec dicts for static/js/charts.js; the templates put the same numbers in tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common import charts

from .models import Procedure, ProcedureVersion, ReplayMode, ReplayRun, ReplayStatus
from .selectors import VersionPage

# Shares (0–1) on one chart; per-case means and counts on another, with a range of their own. Mean tokens and cost
# are in the page's metrics table: on either axis they would flatten everything else.
SHARE_METRICS = ("task_success", "outcome_success", "tool_correctness", "grounding", "answered_rate")
COUNT_METRICS = ("mean_steps", "counterexamples", "regressions", "improvements")
TREND_METRICS = ("task_success", "tool_correctness", "grounding", "answered_rate")
TREND_VERSIONS = 30


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(float(value), 4)


@dataclass(frozen=True)
class MetricPair:
    metric: str
    candidate: float | None
    active: float | None


@dataclass(frozen=True)
class ChartGroup:
    island: str
    caption: str
    rows: list[MetricPair]
    spec: dict[str, Any]


@dataclass
class ReplayChart:
    """One finished replay's metrics beside the comparison's: the active version measured on the same held-out
    cases when the replay had one, else the active version's own latest replay, else nothing."""

    replay: ReplayRun
    version_label: str
    comparison_label: str
    shares: list[MetricPair] = field(default_factory=list)
    counts: list[MetricPair] = field(default_factory=list)

    @property
    def groups(self) -> list[ChartGroup]:
        """The charts to draw: shares, then means and counts (a group with no value is left out)."""
        groups = [
            ChartGroup(
                f"replay-{self.replay.pk}-shares",
                "Shares of the held-out cases",
                self.shares,
                self.spec(self.shares, y_title="share of the held-out cases", y_range=charts.UNIT_RANGE),
            ),
            ChartGroup(
                f"replay-{self.replay.pk}-counts",
                "Steps per case and case counts",
                self.counts,
                self.spec(self.counts, y_title="steps per case / cases", y_range=charts.FROM_ZERO),
            ),
        ]
        return [group for group in groups if group.rows]

    def spec(self, rows: list[MetricPair], *, y_title: str, y_range) -> dict[str, Any]:
        series = [charts.series(self.version_label, [row.candidate for row in rows])]
        if self.comparison_label:
            series.append(charts.series(self.comparison_label, [row.active for row in rows]))
        return charts.chart_spec(
            labels=[row.metric for row in rows],
            x_title="metric",
            y_title=y_title,
            kind="bar",
            y_range=y_range,
            series_list=series,
        )


def _pairs(names: tuple[str, ...], candidate: dict, active: dict | None) -> list[MetricPair]:
    rows = [MetricPair(name, _number(candidate.get(name)), _number((active or {}).get(name))) for name in names]
    return [row for row in rows if row.candidate is not None or row.active is not None]


def replay_charts(page: VersionPage) -> list[ReplayChart]:
    """A chart pair per finished replay of the page's version with candidate metrics, newest first (no query)."""
    result = []
    active = page.procedure.active_version
    for view in page.replays:
        replay = view.replay
        metrics = replay.metrics or {}
        candidate = metrics.get("candidate")
        if replay.status != ReplayStatus.DONE or not isinstance(candidate, dict) or not candidate:
            continue
        compared, label = metrics.get("active"), ""
        if isinstance(compared, dict) and compared and replay.compared_with is not None:
            label = f"active v{replay.compared_with.number} (same cases)"
        elif page.active_replay is not None and active is not None:
            compared = (page.active_replay.metrics or {}).get("candidate") or None
            label = f"active v{active.number} (its replay #{page.active_replay.pk})" if compared else ""
        else:
            compared = None
        chart = ReplayChart(replay=replay, version_label=f"v{page.version.number}", comparison_label=label)
        chart.shares = _pairs(SHARE_METRICS, candidate, compared if label else None)
        chart.counts = _pairs(COUNT_METRICS, candidate, compared if label else None)
        if chart.shares or chart.counts:
            result.append(chart)
    return result


@dataclass(frozen=True)
class TrendRow:
    version_id: int
    number: int
    status: str
    active: bool
    replay_id: int
    mode: str
    values: dict[str, float | None]

    @property
    def cells(self) -> list[float | None]:
        return [self.values.get(name) for name in (*TREND_METRICS, "mean_steps")]


@dataclass
class ProcedureTrends:
    rows: list[TrendRow]
    metrics: tuple[str, ...] = TREND_METRICS

    @property
    def spec(self) -> dict[str, Any]:
        return charts.chart_spec(
            labels=[f"v{row.number}" for row in self.rows],
            x_title="version (its latest finished replay; offline preferred)",
            y_title="share of the held-out cases",
            series_list=[charts.series(name, [row.values.get(name) for row in self.rows]) for name in self.metrics],
        )


def procedure_trends(procedure: Procedure, *, versions: int = TREND_VERSIONS) -> ProcedureTrends:
    """The last `versions` versions that have a finished replay, oldest first, each with the metrics of its newest
    finished offline replay (a live one when it has no offline one): one query."""
    recent = ProcedureVersion.objects.filter(procedure=procedure).order_by("-number").values("id")[:versions]
    replays = (
        ReplayRun.objects.filter(version__in=recent, status=ReplayStatus.DONE)
        .order_by("version__number", "-id")
        .values("id", "mode", "metrics", "version_id", "version__number", "version__status")
    )
    chosen: dict[int, dict[str, Any]] = {}
    for item in replays:
        kept = chosen.get(item["version_id"])
        if kept is None or (kept["mode"] != ReplayMode.OFFLINE and item["mode"] == ReplayMode.OFFLINE):
            chosen[item["version_id"]] = item
    rows = []
    for item in chosen.values():
        candidate = (item["metrics"] or {}).get("candidate") or {}
        rows.append(
            TrendRow(
                version_id=item["version_id"],
                number=item["version__number"],
                status=item["version__status"],
                active=item["version_id"] == procedure.active_version_id,
                replay_id=item["id"],
                mode=item["mode"],
                values={name: _number(candidate.get(name)) for name in (*TREND_METRICS, "mean_steps")},
            )
        )
    rows.sort(key=lambda row: row.number)
    return ProcedureTrends(rows=rows)
