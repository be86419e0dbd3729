"""A run page's waterfall and step timeline built in Python (trajectories/run_markup.py): every value from the run
escaped, long observations folded, evidence marked, untimed steps said so."""

from datetime import UTC, datetime, timedelta

from trajectories.models import Run, Step
from trajectories.run_markup import OBSERVATION_FOLD, step_timeline, waterfall_svg
from trajectories.selectors import run_waterfall

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOSTILE = '<img src=x onerror="alert(1)">'


def steps() -> list[Step]:
    return [
        Step(ordinal=0, tool=HOSTILE, action_family="act", arguments={"q": HOSTILE, "n": 3}, observation=HOSTILE,
             ok=True, started_at=T0, ended_at=T0 + timedelta(seconds=1.5), input_tokens=1200, output_tokens=34),
        Step(ordinal=1, tool="notify", action_family="act", observation="x" * (OBSERVATION_FOLD + 1), ok=False),
        Step(ordinal=2, tool="noop", action_family="act"),
    ]  # fmt: skip


def test_the_timeline_escapes_folds_and_marks_evidence():
    html = str(step_timeline(steps(), frozenset({1}), "/trajectories/"))
    assert "<img" not in html and html.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") == 3
    assert 'href="/trajectories/?tool=%3Cimg%20src%3Dx%20onerror%3D%22alert%281%29%22%3E"' in html
    assert '<li id="step-0" class="timeline-step step-ok">' in html
    assert '<li id="step-1" class="timeline-step step-failed step-evidence">' in html
    assert '<li id="step-2" class="timeline-step step-unknown">' in html
    assert html.count("rubric evidence") == 1
    assert "1,234 tokens (in 1200, cached 0, out 34) · 1.50 s · <time datetime=" in html
    assert f"Observation ({OBSERVATION_FOLD + 1} characters)" in html
    assert "<dt>n</dt><dd><code>3</code></dd>" in html


def test_the_waterfall_draws_timed_steps_and_names_the_others():
    run = Run(pk=7, started_at=T0)
    drawing = run_waterfall(run, steps())
    svg = str(waterfall_svg(drawing, 7))
    assert svg.count('<rect class="wf-bar"') == 1 and svg.count(">not timed</text>") == 2
    assert "<img" not in svg and "&lt;img src=x" in svg
    assert "Step durations of run #7 over 1.50 seconds" in svg
    assert ": 1.500 s, starting at +0.000 s</title>" in svg
