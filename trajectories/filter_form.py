"""The explorer's filter form as HTML, built in Python.

Through the template engine its sixteen fields (a bound value, an error check and a loop of options each) cost about
as much as the rest of the page's markup (bench/pages.py). Here each field is one f-string; every value typed into
the form passes through `html.escape`, as Django's autoescaping would escape it, and the markup is the one the
template had.
"""

from __future__ import annotations

from html import escape

from django.utils.safestring import SafeString, mark_safe

from .forms import RunFilterForm

# (label, name, input type, extra attributes): the text fields, then the selects, then the range fields
TEXTS = (
    ("Source", "source", 'maxlength="100"'),
    ("Tool", "tool", 'maxlength="60"'),
    ("Intent", "intent", 'maxlength="200"'),
)
SELECTS = (("Runs", "kind"), ("Outcome", "outcome"), ("Sort", "sort"))
SCORE = 'step="any" min="-1000000000000.0" max="1000000000000.0"'
SECONDS = 'step="any" min="0" max="1000000000"'
MONEY = 'step="any" min="0" max="1000000000000.0"'
STEPS = 'min="0" max="2000"'
RANGES = (
    ("Received from", "received_from", "date", ""),
    ("Received until", "received_to", "date", ""),
    ("Score from", "score_min", "number", SCORE),
    ("Score to", "score_max", "number", SCORE),
    ("Duration from (s)", "duration_min", "number", SECONDS),
    ("Duration to (s)", "duration_max", "number", SECONDS),
    ("Cost from", "cost_min", "number", MONEY),
    ("Cost to", "cost_max", "number", MONEY),
    ("Steps from", "steps_min", "number", STEPS),
    ("Steps to", "steps_max", "number", STEPS),
)


def filter_form_html(form: RunFilterForm, action: str) -> SafeString:
    """The whole `<form>`: what was typed kept in every field (a bound form's data), invalid fields marked. The
    address is the state: each filtering pushes its query to the bar (htmx), and Back or Forward fills the fields
    from it again (static/js/explorer.js)."""
    typed = form.data if form.is_bound else {}
    invalid = form.errors if form.is_bound else {}

    def value(name: str) -> str:
        return escape(typed.get(name) or "")

    def marked(name: str) -> str:
        return ' aria-invalid="true"' if name in invalid else ""

    def select(label: str, name: str) -> str:
        current = typed.get(name)
        options = "".join(
            f'<option value="{escape(str(choice))}"{" selected" if choice == current else ""}>'
            f"{escape(str(text))}</option>"
            for choice, text in form.fields[name].choices
        )
        return f'  <label>{label} <select name="{name}" id="id_{name}"{marked(name)}>{options}</select></label>\n'

    ranges = "".join(
        f'      <label>{label} <input type="{kind}"{" " + attributes if attributes else ""} name="{name}" '
        f'value="{value(name)}" id="id_{name}"{marked(name)}></label>\n'
        for label, name, kind, attributes in RANGES
    )
    opened = " open" if any(typed.get(name) for _, name, _, _ in RANGES) else ""
    action = escape(action)
    return mark_safe(  # every typed value and choice escaped above
        f'<form class="filters explorer-filters" method="get" action="{action}" role="search"\n'
        f'      hx-get="{action}" hx-target="#results" hx-push-url="true"\n'
        '      hx-trigger="submit, change from:select">\n'
        f'  <label>Search <input type="search" name="q" value="{value("q")}" maxlength="200"\n'
        '         placeholder="words in tasks, tools, arguments, observations"></label>\n'
        + "".join(select(label, name) for label, name in SELECTS)
        + "".join(
            f'  <label>{label} <input type="text" name="{name}" value="{value(name)}" {attributes}></label>\n'
            for label, name, attributes in TEXTS
        )
        + '  <button type="submit">Filter</button>\n'
        f'  <a href="{action}">Clear</a>\n'
        f'  <details class="more-filters"{opened}>\n'
        "    <summary>Time, score, duration, cost and steps</summary>\n"
        '    <div class="range-filters">\n'
        f"{ranges}"
        "    </div>\n"
        "  </details>\n"
        "</form>"
    )
