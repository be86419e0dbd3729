"""A run page's waterfall and step timeline as HTML, built in Python.

Through the template engine these two took most of a run page's time (bench/pages.py: about 10 ms for ten steps,
a lookup, a filter or a localized number per value). Here each row is one f-string in which every value from the
run passes through `html.escape`, exactly what Django's autoescaping applies; the markup is the template's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from html import escape
from urllib.parse import quote

from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from common.formats import fixed, truncate

from .models import Step
from .selectors import WaterfallDrawing

OBSERVATION_FOLD = 240  # longer observations are folded into a <details>


def _status(ok: bool | None) -> str:
    return "step-ok" if ok is True else "step-failed" if ok is False else "step-unknown"


def waterfall_svg(drawing: WaterfallDrawing, run_pk: int) -> SafeString:
    """The `<svg>` of the waterfall: one row per step, a bar for each timed one."""
    rows = []
    for row in drawing.rows:
        step = row.step
        label = f'<text x="4" y="{row.text_y}">{step.ordinal} {escape(truncate(step.tool, 28))}</text>'
        if row.x is not None:
            mark = (
                f'<rect class="wf-bar" x="{row.x}" y="{row.y}" width="{row.width}" height="16" rx="2"><title>'
                f"{escape(step.tool)}: {fixed(row.duration, 3)} s, starting at +{fixed(row.offset, 3)} s</title></rect>"
            )
        else:
            mark = f'<text class="wf-untimed" x="{drawing.label_width + 6}" y="{row.text_y}">not timed</text>'
        rows.append(f'    <g class="wf-row {_status(step.ok)}">\n      {label}\n      {mark}\n    </g>\n')
    span = fixed(drawing.span, 2)
    return mark_safe(  # every value from the run escaped above
        f'<svg viewBox="0 0 {drawing.width} {drawing.height}" width="100%" role="img" '
        'aria-labelledby="waterfall-title" preserveAspectRatio="xMinYMin meet">\n'
        f'    <title id="waterfall-title">Step durations of run #{run_pk} over {span} seconds</title>\n'
        f'    <line class="wf-axis" x1="{drawing.label_width}" y1="0" x2="{drawing.label_width}" '
        f'y2="{drawing.height}"></line>\n' + "".join(rows) + "  </svg>"
    )


def _moment(started: datetime) -> str:
    local = timezone.localtime(started)
    return f'<time datetime="{local.isoformat()}">{local:%H:%M:%S}</time>'


def _step(position: int, step: Step, evidence: bool, list_url: str) -> str:
    classes = _status(step.ok) + (" step-evidence" if evidence else "")
    badge = (
        '<span class="badge badge-success">ok</span>'
        if step.ok is True
        else '<span class="badge badge-failure">failed</span>'
        if step.ok is False
        else '<span class="badge badge-unknown">unknown</span>'
    )
    meta = f"{step.tokens:,} tokens"
    if step.input_tokens or step.output_tokens:
        meta += f" (in {step.input_tokens}, cached {step.cached_input_tokens}, out {step.output_tokens})"
    if step.duration is not None:
        meta += f" · {fixed(step.duration, 2)} s"
    if step.started_at:
        meta += f" · {_moment(step.started_at)}"
    arguments = ""
    if step.arguments:
        pairs = "".join(
            f"<dt>{escape(str(key))}</dt><dd><code>{escape(str(value))}</code></dd>"
            for key, value in step.arguments.items()
        )
        arguments = f'    <dl class="arguments">{pairs}</dl>\n'
    observation = ""
    if len(step.observation) > OBSERVATION_FOLD:
        observation = (
            f"    <details><summary>Observation ({len(step.observation):,} characters)</summary>"
            f'<pre class="observation">{escape(step.observation)}</pre></details>\n'
        )
    elif step.observation:
        observation = f'    <pre class="observation">{escape(step.observation)}</pre>\n'
    evidence_badge = '<span class="badge evidence-badge">rubric evidence</span>' if evidence else ""
    return (
        f'  <li id="step-{position}" class="timeline-step {classes}">\n'
        "    <header>\n"
        f'      <span class="ordinal">{step.ordinal}</span>\n'
        f'      <a href="{escape(list_url)}?tool={escape(quote(step.tool))}"><code>{escape(step.tool)}</code></a>\n'
        f'      <span class="family">{escape(step.action_family)}</span>\n'
        f"      {evidence_badge}\n"
        f"      {badge}\n"
        f'      <span class="meta">{meta}</span>\n'
        "    </header>\n"
        f"{arguments}{observation}"
        "  </li>\n"
    )


def step_timeline(steps: Sequence[Step], evidence_steps: Collection[int], list_url: str) -> SafeString:
    """The `<li>` of each step, in order (position `n` is `#step-n`, where rubric evidence links point)."""
    items = (_step(position, step, position in evidence_steps, list_url) for position, step in enumerate(steps))
    return mark_safe("".join(items))  # every value from the run escaped in _step
