# ruff: noqa: E501 - the reference template keeps each table's row markup whole
"""The dashboard's chart tables built in Python (config/dashboard_tables.py) give exactly the markup the template
gave, escaped the same way, for hostile intent names, empty days, one run and many."""

import datetime as dt

import pytest
from django.template import engines

from config import dashboard_tables
from config.dashboard import daily_rows, intent_rates, intent_table
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
    daily = daily_rows(DAYS, totals)
    rates = intent_rates(DAYS, totals)
    table = intent_table(DAYS, rates)
    expected = REFERENCE.render({"daily": daily, "intent_rates": rates, "intent_table": table})
    assert built(daily, rates, table) == expected


def test_tables_escape_the_intent_names():
    totals = CASES["hostile intent names, every outcome, big numbers"]
    rates = intent_rates(DAYS, totals)
    html = dashboard_tables.intent_head(rates)
    assert "<script>" not in html and "&lt;script&gt;" in html
