"""The calls page's rows as HTML, built in Python, as the explorer's are (trajectories/run_rows.py): 50 rows of nine
cells, each with a few template filters, were most of the page's time once its totals stopped reading the whole ledger
(bench/pages.py). Every value from a call passes through `html.escape`, what Django's autoescaping applies; numbers
print as `intcomma` and `floatformat` print them in English (common/formats.py)."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_UP
from html import escape

from django.contrib.humanize.templatetags.humanize import naturaltime
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from common.formats import truncate

from .models import ModelCall
from .selectors import COST_PLACES

DASH = "–"
ERROR_HEAD_CHARS = 80
REPLY_HEAD_CHARS = 300


def call_rows(calls: Iterable[ModelCall]) -> SafeString:
    """The table rows of `calls` (each read with its reply's head, `reply_head`: llm.selectors.model_call_page)."""
    return mark_safe("".join(_row(call) for call in calls))


def _row(call: ModelCall) -> str:
    started = timezone.localtime(call.started_at)
    tokens = f"{call.input_tokens:,} / {call.cached_input_tokens:,} / {call.output_tokens:,}"
    latency = f"{call.latency_ms:,} ms" if call.latency_ms is not None else DASH
    if call.cost is not None:
        cost = "$" + format(call.cost.quantize(COST_PLACES, ROUND_HALF_UP), "f")
    elif call.status == ModelCall.Status.SUCCEEDED:
        cost = '<span class="muted">unpriced</span>'
    else:
        cost = DASH
    subject = (
        f"{escape(call.subject_type)} {escape(call.subject_id)}"
        if call.subject_type
        else f'<span class="muted">{DASH}</span>'
    )
    status = escape(call.status)
    return (
        f'<tr><td><time datetime="{started.isoformat()}" title="{started:%Y-%m-%d %H:%M:%S %Z}">'
        f"{escape(naturaltime(call.started_at))}</time></td>"
        f"<td>{escape(call.role)}</td>"
        f'<td>{escape(call.model_id)} <small class="muted">{escape(call.provider)}</small></td>'
        f'<td><span class="badge badge-{status}">{status}</span></td>'
        f'<td class="num">{tokens}</td><td class="num">{latency}</td><td class="num">{cost}</td>'
        f"<td>{subject}</td><td>{_details(call)}</td></tr>\n"
    )


def _details(call: ModelCall) -> str:
    error = f' · <span class="error">{escape(truncate(call.error, ERROR_HEAD_CHARS))}</span>' if call.error else ""
    parts = [
        f"<details><summary><code>{escape(call.request_digest[:12])}</code>{error}</summary>",
        f"<p><strong>Request</strong></p><pre>{escape(call.request_preview)}</pre>",
    ]
    reply = getattr(call, "reply_head", "")
    if reply:
        stop = f" ({escape(call.stop_reason)})" if call.stop_reason else ""
        parts.append(f"<p><strong>Reply</strong>{stop}</p><pre>{escape(truncate(reply, REPLY_HEAD_CHARS))}</pre>")
    if call.error:
        parts.append(f"<p><strong>Error</strong></p><pre>{escape(call.error)}</pre>")
    if call.diagnostics:
        items = "".join(
            f"<dt>{escape(str(key))}</dt><dd><code>{escape(str(value))}</code></dd>"
            for key, value in call.diagnostics.items()
        )
        parts.append(f'<p><strong>Diagnostics</strong></p><dl class="diagnostics">{items}</dl>')
    parts.append("</details>")
    return "".join(parts)
