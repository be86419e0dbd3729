"""The dashboard's tables as HTML, built in Python (as the explorer's rows are: trajectories/run_rows.py).

Thirty days by four or five numbers, three times: through Django's template engine (a loop, a lookup and a number
localization per cell) they took most of the dashboard's render time (bench/pages.py). The markup is what the
template wrote; numbers are written as the template writes them (no thousands separator: USE_THOUSAND_SEPARATOR is
off), dates as ISO dates, and the one text from the data, an intent's name, passes through `html.escape`, as
Django's autoescaping would. The recent runs and the recent activity are built the same way: every text from the
data escaped, times as the template printed them (`date:'c'` and the localized date of the local time, and
humanize's `naturaltime`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from html import escape
from typing import Any

from django.contrib.humanize.templatetags.humanize import naturaltime
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import localize
from django.utils.safestring import SafeString, mark_safe

from common.formats import truncate
from trajectories.choices import Outcome

OUTCOME_LABELS = dict(Outcome.choices)

DASH = "–"


def _day_rows(daily: Iterable[Any], cells: Callable[[Any], tuple]) -> SafeString:
    """One row per day, newest first: the ISO date, then each of `cells(row)` as a number cell."""
    rows = []
    for row in reversed(list(daily)):
        numbers = "".join(f'<td class="num">{cell}</td>' for cell in cells(row))
        rows.append(f"<tr><td>{row.day.isoformat()}</td>{numbers}</tr>")
    return mark_safe("".join(rows))


def outcome_rows(daily: Iterable[Any]) -> SafeString:
    """Runs per day by outcome, newest first."""
    return _day_rows(daily, lambda row: (row.success, row.failure, row.unknown, row.runs))


def usage_rows(daily: Iterable[Any]) -> SafeString:
    """Runs, tokens and cost per day, newest first."""
    return _day_rows(daily, lambda row: (row.runs, row.tokens, escape(row.cost_text)))


def intent_head(rates: Iterable[Any]) -> SafeString:
    """The header cells of the success-rate table: each intent with its runs in the window."""
    return mark_safe(
        "".join(
            f'<th class="num">{escape(item.intent)} <small class="muted">({item.runs} run'
            f"{'' if item.runs == 1 else 's'})</small></th>"
            for item in rates
        )
    )


def _rate_cell(success: int, total: int, rate: str) -> str:
    if not total:
        return f'<td class="num">{DASH}</td>'
    return f'<td class="num">{escape(rate)} <small class="muted">({success}/{total})</small></td>'


def intent_rows(table: Iterable[dict]) -> SafeString:
    """The success-rate table's rows (dashboard.selectors.intent_table: newest first)."""
    return mark_safe(
        "".join(
            f"<tr><td>{row['day'].isoformat()}</td>{''.join(_rate_cell(*cell) for cell in row['cells'])}</tr>"
            for row in table
        )
    )


def _time(moment, *, muted: bool = False) -> str:
    local = timezone.localtime(moment)
    css = ' class="muted"' if muted else ""
    return (
        f'<time{css} datetime="{local.isoformat()}" title="{escape(localize(local))}">'
        f"{escape(naturaltime(moment))}</time>"
    )


def _outcome_label(outcome: str) -> str:
    return OUTCOME_LABELS.get(outcome, outcome)


def recent_runs_rows(runs: Iterable[Any]) -> SafeString:
    """The recent runs' table rows: source/id linked to the run, the task, the outcome, steps, when received."""
    detail_prefix = reverse("trajectories:detail", args=[0]).removesuffix("0/")
    return mark_safe(
        "".join(
            "<tr>"
            f'<td><a href="{detail_prefix}{run.pk}/">'
            f"{escape(run.source)}/{escape(truncate(run.external_id, 24))}</a></td>"
            f'<td class="wrap">{escape(truncate(run.task, 80) or "—")}</td>'
            f'<td><span class="badge badge-{escape(run.outcome)}">{escape(_outcome_label(run.outcome))}</span></td>'
            f'<td class="num">{run.step_count}</td>'
            f"<td>{_time(run.created_at)}</td>"
            "</tr>"
            for run in runs
        )
    )


def activity_items(events: Iterable[Any]) -> SafeString:
    """The recent activity's list items: who, the verb, the target, when (sealed judgments are not among `events`:
    accounts.blinding leaves them out)."""
    items = []
    for event in events:
        who = escape(str(event.actor_label))
        label = escape(str(event.target_label or event.target_id))
        target = f'<a href="{escape(event.target_url)}">{label}</a>' if event.target_url else label
        items.append(
            f"<li><div><strong>{who}</strong> <code>{escape(event.verb)}</code> {target}</div>"
            f"{_time(event.created_at, muted=True)}</li>"
        )
    return mark_safe("".join(items))
