"""The explorer's result rows as HTML, built in Python.

A page of the explorer is 25 rows of 13 cells; through Django's template engine (a variable lookup and a filter per
cell) the rows took most of the page's time (bench/pages.py). Here each row is one f-string in which every value
from a run passes through `html.escape`, exactly what Django's autoescaping applies; the markup is the template's.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any
from urllib.parse import quote

from django.urls import reverse
from django.utils import timezone
from django.utils.formats import localize
from django.utils.safestring import SafeString, mark_safe

from config.formats import fixed, truncate

TASK_CHARS = 120
TOOLS_CHARS = 80
DASH = "–"


def _intent(intent: str) -> str:
    if not intent:
        return ""
    return f'<a href="?intent={escape(quote(intent, safe=""))}"><code>{escape(intent)}</code></a>'


def _rubric(score: Any) -> str:
    """The newest rubric score (reviews.rubric_selectors.attach_rubric_scores), with a badge for required failures."""
    if not score:
        return DASH
    cell = f'<span title="rubric v{score.version_number}">{fixed(score.overall, 2)}</span>'
    if score.required_failures:
        failures = escape(", ".join(score.required_failures))
        cell += f' <span class="badge badge-failure" title="required failures: {failures}">fails</span>'
    return cell


def _row(run: Any, detail_prefix: str) -> str:
    received = timezone.localtime(run.created_at)
    outcome = escape(run.outcome)
    score = DASH if run.score is None else localize(run.score)  # as a template prints a float: 1e-07 → 0.0000001
    duration = f"{fixed(run.duration_seconds, 1)} s" if run.duration_seconds is not None else DASH
    return (
        "<tr>"
        f'<td><a href="{detail_prefix}{run.pk}/">#{run.pk}</a><br><small>{escape(run.external_id)}</small></td>'
        f"<td>{escape(truncate(run.task, TASK_CHARS))}</td>"
        f"<td>{escape(run.source)}</td>"
        f"<td>{_intent(run.intent)}</td>"
        f'<td><span class="badge badge-{outcome}">{outcome}</span></td>'
        f"<td>{score}</td>"
        f"<td>{_rubric(getattr(run, 'rubric_score', None))}</td>"
        f"<td>{run.step_count}</td>"
        f"<td>{escape(truncate(', '.join(run.tools), TOOLS_CHARS))}</td>"
        f"<td>{run.total_tokens:,}</td>"
        f"<td>{fixed(run.cost, 4)}</td>"
        f"<td>{duration}</td>"
        f'<td><time datetime="{received.isoformat()}">{received:%Y-%m-%d %H:%M}</time></td>'
        "</tr>"
    )


def run_rows(runs: Iterable[Any]) -> SafeString:
    """The `<tr>` of each run, in order, for the explorer's table body."""
    detail_prefix = reverse("trajectories:detail", args=[0]).removesuffix("0/")
    return mark_safe("".join(_row(run, detail_prefix) for run in runs))  # every value was escaped above
