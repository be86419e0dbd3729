# ruff: noqa: E501 - the reference template keeps each table's row markup whole
"""The dashboard's chart tables built in Python (dashboard/tables.py) give exactly the markup the template
gave, escaped the same way, for hostile intent names, empty days, one run and many."""

import datetime as dt
import re

import pytest
from django.template import engines

from dashboard import tables as dashboard_tables
from dashboard.selectors import daily_rows, intent_rates, intent_table, window_sums
from trajectories.selectors import DayTotal

# The template's loops before the tables moved to Python: the reference the tables must equal.
REFERENCE = engines["django"].from_string(
    """{% for row in daily reversed %}<tr><td>{{ row.day.isoformat }}</td><td class="num">{{ row.success }}</td><td class="num">{{ row.failure }}</td><td class="num">{{ row.unknown }}</td><td class="num">{{ row.runs }}</td></tr>{% endfor %}"""
    """|{% for item in intent_rates %}<th class="num">{{ item.intent }} <small class="muted">({{ item.runs }} run{{ item.runs|pluralize }})</small></th>{% endfor %}"""
    """|{% for row in intent_table %}<tr><td>{{ row.day.isoformat }}</td>{% for success, total, rate in row.cells %}<td class="num">{% if total %}{{ rate }} <small class="muted">({{ success }}/{{ total }})</small>{% else %}–{% endif %}</td>{% endfor %}</tr>{% endfor %}"""
    """|{% for row in daily reversed %}<tr><td>{{ row.day.isoformat }}</td><td class="num">{{ row.runs }}</td><td class="num">{{ row.tokens }}</td><td class="num">{{ row.cost_text }}</td></tr>{% endfor %}"""
)
DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=n) for n in range(30)]
HOSTILE = "<script>alert(\"x\")</script> & 'quotes'"


def built(daily, rates, table) -> str:
    return "|".join(
        [
            dashboard_tables.outcome_rows(daily),
            dashboard_tables.intent_head(rates),
            dashboard_tables.intent_rows(table),
            dashboard_tables.usage_rows(daily),
        ]
    )


CASES = {
    "no runs": [],
    "one run": [DayTotal(DAYS[3], "refund", "success", 1, 17, 0.001)],
    "hostile intent names, every outcome, big numbers": [
        DayTotal(DAYS[0], HOSTILE, "success", 1_234_567, 10**12, 12345.678901),
        DayTotal(DAYS[0], HOSTILE, "failure", 3, 5, 0.00005),
        DayTotal(DAYS[29], 'a&b "c" <d>/é?', "unknown", 2, 0, 0.0),
        DayTotal(DAYS[15], "", "success", 9, 9, 0.125),
    ],
    "six intents (five shown), a day without runs between": [
        DayTotal(DAYS[day], f"intent-{n}", outcome, n + 1, 100 * n, 0.01 * n)
        for n in range(6)
        for day in (2, 4)
        for outcome in ("success", "failure")
    ],
}


@pytest.mark.parametrize("name", list(CASES))
def test_tables_equal_the_template_markup(name):
    totals = CASES[name]
    sums = window_sums(DAYS, totals)
    daily = daily_rows(DAYS, sums)
    rates = intent_rates(sums)
    table = intent_table(DAYS, rates)
    expected = REFERENCE.render({"daily": daily, "intent_rates": rates, "intent_table": table})
    assert built(daily, rates, table) == expected


def test_tables_escape_the_intent_names():
    totals = CASES["hostile intent names, every outcome, big numbers"]
    rates = intent_rates(window_sums(DAYS, totals))
    html = dashboard_tables.intent_head(rates)
    assert "<script>" not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize("name", list(CASES))
def test_sums_of_two_parts_add_up_and_leave_the_parts_unchanged(name):
    totals = CASES[name]
    closed = [total for total in totals if total.day < DAYS[-2]]
    open_days = [total for total in totals if total.day >= DAYS[-2]]
    kept = window_sums(DAYS, closed)
    before = (repr(kept.days), repr(kept.intents))
    assert kept + window_sums(DAYS, open_days) == window_sums(DAYS, totals)
    assert (repr(kept.days), repr(kept.intents)) == before


# --- the recent runs and the recent activity ---------------------------------------------------------------------
RECENT_REFERENCE = engines["django"].from_string(
    """{% load humanize %}{% for run in recent_runs %}<tr>
            <td><a href="{% url 'trajectories:detail' run.pk %}">{{ run.source }}/{{ run.external_id|truncatechars:24 }}</a></td>
            <td class="wrap">{{ run.task|truncatechars:80|default:"—" }}</td>
            <td><span class="badge badge-{{ run.outcome }}">{{ run.get_outcome_display }}</span></td>
            <td class="num">{{ run.step_count }}</td>
            <td><time datetime="{{ run.created_at|date:'c' }}" title="{{ run.created_at }}">{{ run.created_at|naturaltime }}</time></td>
          </tr>{% endfor %}|{% for e in recent_events %}<li>
        <div><strong>{{ e.actor_label }}</strong> <code>{{ e.verb }}</code>
          {% if e.target_url %}<a href="{{ e.target_url }}">{{ e.target_label|default:e.target_id }}</a>{% else %}{{ e.target_label|default:e.target_id }}{% endif %}
        </div>
        <time class="muted" datetime="{{ e.created_at|date:'c' }}" title="{{ e.created_at }}">{{ e.created_at|naturaltime }}</time>
      </li>{% endfor %}"""
)


def squeezed(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\s*<", "<", str(html))).strip()  # whitespace between tags, ignored


def test_the_recent_runs_and_activity_match_the_template(settings):
    from types import SimpleNamespace

    from trajectories.models import Run

    now = dt.datetime.now(dt.UTC)
    runs = [
        Run(pk=41, source=HOSTILE, external_id="x" * 30, task=HOSTILE * 5, outcome="failure", step_count=3,
            created_at=now - dt.timedelta(minutes=3)),
        Run(pk=42, source="a", external_id="b", task="", outcome="success", step_count=0,
            created_at=now - dt.timedelta(days=3)),
    ]  # fmt: skip
    events = [
        SimpleNamespace(actor_label=HOSTILE, verb="run.ingest", target_url="/trajectories/41/",
                        target_label="", target_id="41", created_at=now - dt.timedelta(seconds=5)),
        SimpleNamespace(actor_label="rita", verb="review.judge", target_url="",
                        target_label=HOSTILE, target_id="7", created_at=now - dt.timedelta(hours=2)),
    ]  # fmt: skip
    expected = RECENT_REFERENCE.render({"recent_runs": runs, "recent_events": events})
    built_runs = dashboard_tables.recent_runs_rows(runs)
    built_events = dashboard_tables.activity_items(events)
    assert squeezed(f"{built_runs}|{built_events}") == squeezed(expected)
    assert "<script>" not in built_runs + built_events and "<strong>rita</strong>" in built_events
