# ruff: noqa: E501 - the reference template is one row of markup, kept whole per cell
"""The explorer's rows built in Python (trajectories/run_rows.py) give exactly the markup the template gave, escaped
the same way, for hostile text, missing values, long cells, rubric scores and another time zone."""

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.template import engines
from django.utils import timezone

from common.formats import truncate
from trajectories.run_rows import run_rows

# The rows as a template would write them: the reference the rows must equal (cells classed by column, long texts
# clamped with the whole text in a title). (It reads the ORM row's version.number; the rows read
# rubrics.selectors.ListedScore's version_number: the cases hold both.)
REFERENCE = engines["django"].from_string(
    """{% load humanize %}{% for run in runs %}<tr>"""
    """<td class="c-run"><a href="{% url 'trajectories:detail' run.pk %}">#{{ run.pk }}</a><span class="clip run-ext"{% if run.external_id %} title="{{ run.external_id|truncatechars:1000 }}"{% endif %}>{{ run.external_id|truncatechars:1000 }}</span></td>"""
    """<td class="c-task"><span class="clamp"{% if run.task %} title="{{ run.task|truncatechars:1000 }}"{% endif %}>{{ run.task|truncatechars:300 }}</span></td>"""
    """<td class="c-source"><span class="clip"{% if run.source %} title="{{ run.source|truncatechars:1000 }}"{% endif %}>{{ run.source|truncatechars:1000 }}</span></td>"""
    """<td class="c-intent">{% if run.intent %}<a class="clip" href="?intent={{ run.intent|urlencode:'' }}" title="{{ run.intent }}"><code>{{ run.intent }}</code></a>{% endif %}</td>"""
    """<td class="c-outcome"><span class="badge badge-{{ run.outcome }}">{{ run.outcome }}</span></td>"""
    """<td class="c-score num">{{ run.score|default_if_none:"–" }}</td>"""
    """<td class="c-rubric num">{% if run.rubric_score %}<span title="rubric v{{ run.rubric_score.version.number }}">{{ run.rubric_score.overall|floatformat:2 }}</span>"""
    """{% if run.rubric_score.required_failures %} <span class="badge badge-failure" title="required failures: {{ run.rubric_score.required_failures|join:', ' }}">fails</span>{% endif %}{% else %}–{% endif %}</td>"""
    """<td class="c-steps num">{{ run.step_count }}</td>"""
    """<td class="c-tools">{% with tools=run.tools|join:", " %}<span class="clamp"{% if tools %} title="{{ tools|truncatechars:1000 }}"{% endif %}>{{ tools|truncatechars:160 }}</span>{% endwith %}</td>"""
    """<td class="c-tokens num">{{ run.total_tokens|intcomma }}</td>"""
    """<td class="c-cost num">{{ run.cost|floatformat:4 }}</td>"""
    """<td class="c-duration num">{% if run.duration_seconds is not None %}{{ run.duration_seconds|floatformat:1 }} s{% else %}–{% endif %}</td>"""
    """<td class="c-received"><time datetime="{{ run.created_at|date:'c' }}"><span>{{ run.created_at|date:"Y-m-d" }}</span> <span>{{ run.created_at|date:"H:i" }}</span></time></td>"""
    """</tr>{% endfor %}"""
)


def run(**fields):
    values = {
        "pk": 7,
        "external_id": "run-7",
        "task": "Refund order 7",
        "source": "support-agent",
        "intent": "refund_request",
        "outcome": "success",
        "score": 0.75,
        "rubric_score": None,
        "step_count": 3,
        "tools": ["lookup_order", "issue_refund"],
        "total_tokens": 1234567,
        "cost": 0.01234,
        "duration_seconds": 12.25,
        "created_at": datetime(2026, 3, 1, 23, 30, 5, 120000, tzinfo=UTC),
    }
    values.update(fields)
    return SimpleNamespace(**values)


HOSTILE = "<script>alert(\"x\")</script> & 'quotes'"
CASES = {
    "plain": run(),
    "hostile text in every cell": run(
        external_id=HOSTILE,
        task=HOSTILE,
        source=HOSTILE,
        intent='a&b "c" <d>/é?',
        outcome="<b>",
        tools=[HOSTILE, "x"],
    ),
    "missing values": run(score=None, duration_seconds=None, intent="", tools=[], total_tokens=0, cost=0.0),
    "long task and tools": run(task="word " * 60, tools=[f"tool_{n:02d}" for n in range(20)]),
    "exactly at the limits": run(task="t" * 300, tools=["x" * 160]),
    "a task past the title's limit": run(task="long " * 300),
    "no task, no external id": run(task="", external_id=""),
    "rubric score with required failures": run(
        rubric_score=SimpleNamespace(
            version=SimpleNamespace(number=3),
            version_number=3,
            overall=0.666,
            required_failures=["cites <evidence>", "polite"],
        )
    ),
    "rubric score passing": run(
        rubric_score=SimpleNamespace(
            version=SimpleNamespace(number=1), version_number=1, overall=1.0, required_failures=[]
        )
    ),
    "negative score, big id": run(pk=10**12, score=-2.5),
    "halves and tiny numbers round as floatformat does": run(
        cost=0.00125,
        duration_seconds=0.25,
        score=1e-7,
        rubric_score=SimpleNamespace(
            version=SimpleNamespace(number=2), version_number=2, overall=0.125, required_failures=[]
        ),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/Los_Angeles"])
def test_rows_equal_the_template_markup(name, zone):
    runs = [CASES[name]]
    with timezone.override(zone):
        assert run_rows(runs) == REFERENCE.render({"runs": runs})


def test_rows_keep_their_order_and_escape_everything():
    html = run_rows([run(pk=2, task=HOSTILE), run(pk=1)])
    assert html.index("#2") < html.index("#1")
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_truncate():
    assert truncate("abc", 3) == "abc"
    assert truncate("abcd", 3) == "ab…"
    assert truncate("", 3) == ""
