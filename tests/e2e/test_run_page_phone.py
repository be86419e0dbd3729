"""In Chromium, 390 px wide: a run's page is readable (issue 24, smaller findings): no text cut off at the screen's
edge, the rubric's dimensions reflowed into blocks, the waterfall drawn at a readable size in a box of its own that
scrolls sideways, the step timeline inside the screen."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from accounts.models import User
from rubrics.models import RubricAssessmentRow

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}
# Elements whose box reaches past the screen's right edge (or its left), among the page's visible text holders,
# outside boxes that scroll sideways on purpose.
OUTSIDE = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (el) => el.closest(".waterfall-scroll, pre, .table-wrap");
  const hidden = (el) => el.closest("thead") && getComputedStyle(el.closest("thead")).position === "absolute";
  return Array.from(document.querySelectorAll("main td, main th, main li, main dd, main p, main code, main a"))
    .filter((el) => el.getClientRects().length && !scrolls(el) && !hidden(el))
    .filter((el) => { const r = el.getBoundingClientRect(); return r.right > width + 1 || r.left < -1; })
    .map((el) => `${el.tagName.toLowerCase()}.${el.className}: ${el.textContent.trim().slice(0, 40)}`);
}"""
# The waterfall's step labels as drawn: their font size on screen (the SVG scales with its width).
WATERFALL = """() => {
  const box = document.querySelector(".waterfall-scroll");
  const svg = box.querySelector("svg");
  const label = svg.querySelector("text");
  return {
    fontPx: label.getBoundingClientRect().height,
    scrolls: box.scrollWidth > box.clientWidth,
    focusable: box.tabIndex === 0,
    boxRight: box.getBoundingClientRect().right,
  };
}"""


@pytest.fixture
def demo(live_server, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    return live_server


def test_a_run_page_is_readable_on_a_phone(page_as, demo):
    assessed = RubricAssessmentRow.objects.filter(user__username="rita").order_by("run_id").first()
    assert assessed is not None, "the demo has rita's assessments"
    page = page_as(User.objects.get(username="rita"), "/")
    page.set_viewport_size(PHONE)
    page.goto(f"/trajectories/{assessed.run_id}/")
    page.wait_for_selector("table.rubric-dimensions")

    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    assert page.evaluate(OUTSIDE) == []

    cells = page.evaluate(
        """() => Array.from(document.querySelectorAll("table.rubric-dimensions tbody td"))
             .map((td) => ({right: td.getBoundingClientRect().right, width: td.getBoundingClientRect().width}))"""
    )
    assert cells and all(cell["right"] <= 390 for cell in cells)
    assert min(cell["width"] for cell in cells) >= 250  # a block per value, not a squeezed column

    drawn = page.evaluate(WATERFALL)
    assert drawn["fontPx"] >= 9.5, drawn  # about 11 px, not the 4 px of a 1,000-unit drawing squeezed to 366 px
    assert drawn["scrolls"] and drawn["focusable"] and drawn["boxRight"] <= 390

    steps = page.evaluate(
        """() => Array.from(document.querySelectorAll("ol.timeline > li")).map((li) => {
             const style = getComputedStyle(li);
             const outline = parseFloat(style.outlineWidth) + parseFloat(style.outlineOffset);
             return li.getBoundingClientRect().right + (style.outlineStyle === "none" ? 0 : Math.max(0, outline));
           })"""
    )
    assert steps and max(steps) <= 390  # evidence outlines included
