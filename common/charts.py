"""Chart specs for static/js/charts.js and the day buckets of daily charts: pure data shaping, never a query.

A spec is the JSON a page hands to charts.js through `json_script` (see the header of static/js/charts.js):
{labels, x_title, y_title, kind, y_range, stacked, series: [{label, data, kind?, axis?, tone?, ...}], y2_title?,
y2_range?}. Every chart also has its numbers in a table on the page, so the specs carry nothing the table lacks.

Days are calendar days in the current time zone (settings.TIME_ZONE, UTC by default), the same days Django's
TruncDate gives the database: a day with no runs is a bucket of zeros, never a missing label.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from django.utils import timezone

WINDOW_DAYS = 30
UNIT_RANGE = (0, 1)
FROM_ZERO = (0, None)


def window_days(days: int = WINDOW_DAYS, *, today: dt.date | None = None) -> list[dt.date]:
    """The last `days` calendar days, oldest first, ending with today (local date)."""
    if days < 1:
        raise ValueError("a window needs at least one day")
    today = today or timezone.localdate()
    return [today - dt.timedelta(days=offset) for offset in range(days - 1, -1, -1)]


def window_start(days: list[dt.date]) -> dt.datetime:
    """The aware datetime at which the window's first day starts in the current time zone (a filter bound)."""
    return timezone.make_aware(dt.datetime.combine(days[0], dt.time.min))


def rate(part: int, whole: int) -> float | None:
    """part / whole rounded to 4 places; None when there is nothing to divide (a gap, not a zero)."""
    return round(part / whole, 4) if whole else None


def series(label: str, data: Sequence[Any], **options: Any) -> dict[str, Any]:
    """One dataset: `options` are charts.js's per-series keys (kind, axis, tone, points_only, stepped)."""
    return {"label": label, "data": list(data), **options}


def chart_spec(
    *,
    labels: Iterable[Any],
    series_list: list[dict[str, Any]],
    x_title: str,
    y_title: str,
    kind: str = "line",
    y_range: tuple[float | None, float | None] = UNIT_RANGE,
    stacked: bool = False,
    y2_title: str = "",
    y2_range: tuple[float | None, float | None] = FROM_ZERO,
    y_integer: bool = False,
    y2_integer: bool = False,
) -> dict[str, Any]:
    """The dict charts.js draws. y_range / y2_range are suggested [min, max] (None: the data decides); a y2 axis on
    the right is drawn only when a series has axis "y2"; y_integer / y2_integer: that axis counts (whole ticks)."""
    if kind not in ("line", "bar"):
        raise ValueError("a chart is a line or a bar chart")
    spec: dict[str, Any] = {
        "labels": [str(label) for label in labels],
        "x_title": x_title,
        "y_title": y_title,
        "kind": kind,
        "y_range": list(y_range),
        "stacked": stacked,
        "series": series_list,
    }
    if y_integer:
        spec["y_integer"] = True
    if any(item.get("axis") == "y2" for item in series_list):
        spec["y2_title"] = y2_title
        spec["y2_range"] = list(y2_range)
        if y2_integer:
            spec["y2_integer"] = True
    return spec


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def day_label(day: dt.date) -> str:
    """A day on a chart's axis, short ("Mar 1"; the tables beside give the ISO date), whatever the locale."""
    return f"{MONTHS[day.month - 1]} {day.day}"
