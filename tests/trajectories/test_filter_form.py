"""The explorer's filter form built in Python (trajectories/filter_form.py): what was typed is kept and escaped,
the chosen options are selected, invalid fields are marked, and the range fields open when one is set."""

import re

from django.http import QueryDict

from trajectories.filter_form import RANGES, filter_form_html
from trajectories.forms import RunFilterForm

ACTION = "/trajectories/"


def html_of(query: str | None) -> str:
    form = RunFilterForm(QueryDict(query)) if query is not None else RunFilterForm()
    if form.is_bound:
        form.is_valid()
    return str(filter_form_html(form, ACTION))


def test_an_empty_form_selects_nothing_and_keeps_the_ranges_closed():
    html = html_of(None)
    assert " selected" not in html and '<details class="more-filters">' in html
    assert len(re.findall(r'name="\w+" value=""', html)) == 4 + len(RANGES)  # search, source, tool, intent, ranges
    assert "aria-invalid" not in html
    assert html.startswith('<form class="filters explorer-filters" method="get" action="/trajectories/"')
    assert html.endswith("  </details>\n</form>")
    assert html.index('<button type="submit">Filter</button>') < html.index('<details class="more-filters">')


def test_typed_values_are_kept_and_escaped():
    html = html_of("q=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E&source=a%26b&tool=t%27x&intent=refund")
    assert "<script>" not in html
    assert 'name="q" value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in html
    assert 'name="source" value="a&amp;b"' in html and 'name="tool" value="t&#x27;x"' in html
    assert 'name="intent" value="refund"' in html


def test_the_chosen_options_are_selected():
    html = html_of("kind=evaluation&outcome=failure&sort=cost_desc")
    selected = re.findall(r'<option value="([^"]*)" selected>', html)
    assert selected == ["evaluation", "failure", "cost_desc"]


def test_invalid_fields_are_marked_and_keep_what_was_typed():
    html = html_of("score_min=abc&steps_max=99999&outcome=nonsense")
    for name in ("score_min", "steps_max", "outcome"):
        assert re.search(rf'name="{name}"[^>]*aria-invalid="true"', html), name
    assert 'name="score_min" value="abc"' in html and 'name="steps_max" value="99999"' in html
    assert not re.search(r'name="score_max"[^>]*aria-invalid', html)


def test_a_set_range_opens_the_range_fields():
    assert '<details class="more-filters" open>' in html_of("received_from=2026-01-02")
    assert '<details class="more-filters">' in html_of("source=x")
