"""The explorer's table as HTML, built in Python: its columns, header and rows.

A page of the explorer is 25 rows of 13 cells; through Django's template engine (a variable lookup and a filter per
cell) the rows took most of the page's time (bench/pages.py). Here each row is one f-string in which every value
from a run passes through `html.escape`, exactly what Django's autoescaping applies.

Every cell carries its column's class (`c-task`, …): the column chooser hides a column with one class on the table
(`hide-task`, static/css/waymark.css), and at phone width each cell is labelled by its class. Long texts are kept
short on screen, whole in their title: the task and the tools clamp to two lines, the source, intent and external id
to one, each with its full text (up to TITLE_CHARS) on hover.
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

from common.formats import fixed, truncate

# (key, header, whether the cell is a number): the run column is always shown, every other one may be hidden.
COLUMNS = (
    ("run", "Run", False),
    ("task", "Task", False),
    ("source", "Source", False),
    ("intent", "Intent", False),
    ("outcome", "Outcome", False),
    ("score", "Score", True),
    ("rubric", "Rubric", True),
    ("steps", "Steps", True),
    ("tools", "Tools", False),
    ("tokens", "Tokens", True),
    ("cost", "Cost", True),
    ("duration", "Duration", True),
    ("received", "Received", False),
)
CHOOSABLE = tuple(key for key, _, _ in COLUMNS if key != "run")
TASK_CHARS = 300  # two lines of the widest task column hold about this many; the rest is in the title
TOOLS_CHARS = 160
TITLE_CHARS = 1000
DASH = "–"


def _clipped(text: str, limit: int, css: str) -> str:
    """`text` in a span that CSS clamps (`css`), the whole text (to TITLE_CHARS) in its title when it is cut."""
    shown = escape(truncate(text, limit))
    title = f' title="{escape(truncate(text, TITLE_CHARS))}"' if text else ""
    return f'<span class="{css}"{title}>{shown}</span>'


def _intent(intent: str) -> str:
    if not intent:
        return ""
    return (
        f'<a class="clip" href="?intent={escape(quote(intent, safe=""))}" title="{escape(intent)}">'
        f"<code>{escape(intent)}</code></a>"
    )


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
        f'<td class="c-run"><a href="{detail_prefix}{run.pk}/">#{run.pk}</a>'
        f"{_clipped(run.external_id, TITLE_CHARS, 'clip run-ext')}</td>"
        f'<td class="c-task">{_clipped(run.task, TASK_CHARS, "clamp")}</td>'
        f'<td class="c-source">{_clipped(run.source, TITLE_CHARS, "clip")}</td>'
        f'<td class="c-intent">{_intent(run.intent)}</td>'
        f'<td class="c-outcome"><span class="badge badge-{outcome}">{outcome}</span></td>'
        f'<td class="c-score num">{score}</td>'
        f'<td class="c-rubric num">{_rubric(getattr(run, "rubric_score", None))}</td>'
        f'<td class="c-steps num">{run.step_count}</td>'
        f'<td class="c-tools">{_clipped(", ".join(run.tools), TOOLS_CHARS, "clamp")}</td>'
        f'<td class="c-tokens num">{run.total_tokens:,}</td>'
        f'<td class="c-cost num">{fixed(run.cost, 4)}</td>'
        f'<td class="c-duration num">{duration}</td>'
        f'<td class="c-received"><time datetime="{received.isoformat()}"><span>{received:%Y-%m-%d}</span> '
        f"<span>{received:%H:%M}</span></time></td>"
        "</tr>"
    )


def run_rows(runs: Iterable[Any]) -> SafeString:
    """The `<tr>` of each run, in order, for the explorer's table body."""
    detail_prefix = reverse("trajectories:detail", args=[0]).removesuffix("0/")
    return mark_safe("".join(_row(run, detail_prefix) for run in runs))  # every value was escaped above


def header_row() -> SafeString:
    """The `<tr>` of the table's header: one `<th>` per column, with the cells' classes."""
    cells = "".join(
        f'<th scope="col" class="c-{key}{" num" if number else ""}">{label}</th>' for key, label, number in COLUMNS
    )
    return mark_safe(f"<tr>{cells}</tr>")


def hidden_classes(shown: Iterable[str]) -> str:
    """The table's classes that hide the columns not in `shown` (`hide-source hide-tools`)."""
    chosen = set(shown)
    return " ".join(f"hide-{key}" for key in CHOOSABLE if key not in chosen)
