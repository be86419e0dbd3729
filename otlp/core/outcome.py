"""A run's outcome from its spans' statuses (docs/integrations/opentelemetry.md, "The outcome rule"):

1. ERROR on the root span, on the run span or on any agent span of the trace → failure (an agent invocation
   that raised failed the run, even under a root that says OK — the OpenAI Agents SDK's trace span always does);
2. OK on the root span (or on the run span) → success;
3. both UNSET: `waymark.outcome` when it is success, failure or unknown;
4. UNSET with an `error.type` attribute or an `exception` event on the root or run span → failure;
5. UNSET with a completed agent span (it ended, and the root span arrived) → success, recorded as inferred;
6. otherwise unknown, recorded as inferred.

An explicit `waymark.outcome` never overrides an OK or ERROR status.
"""

from __future__ import annotations

from typing import Any

from .spans import STATUS_ERROR, STATUS_OK, SpanRecord

OUTCOMES = ("success", "failure", "unknown")


def outcome(
    *,
    root: SpanRecord | None,
    run_span: SpanRecord | None,
    agents: list[SpanRecord],
    declared: Any,
    inferred: dict[str, str],
) -> str:
    heads = [s for s in (root, run_span) if s is not None]
    if any(s.status_code == STATUS_ERROR for s in heads):
        return "failure"
    failed_agent = next((a for a in agents if a.status_code == STATUS_ERROR), None)
    if failed_agent is not None:
        if not any(s.status_code == STATUS_OK for s in heads):
            return "failure"
        inferred["outcome"] = f"agent span {failed_agent.name!r} ended in ERROR under a root span that says OK"
        return "failure"
    if any(s.status_code == STATUS_OK for s in heads):
        return "success"
    if isinstance(declared, str) and declared.strip().lower() in OUTCOMES:
        return declared.strip().lower()
    errored = next(
        (s for s in heads if s.attributes.get("error.type") or any(e["name"] == "exception" for e in s.events)), None
    )
    if errored is not None:
        inferred["outcome"] = f"span {errored.name!r} UNSET but carries an error (error.type or an exception event)"
        return "failure"
    completed = next((a for a in agents if a.end_ns > 0), None) if root is not None else None
    if completed is not None:
        inferred["outcome"] = f"root span UNSET with a completed agent span ({completed.name!r})"
        return "success"
    if root is None:
        inferred["outcome"] = "the root span never arrived and no span says how the run ended"
    elif not agents:
        inferred["outcome"] = "root span UNSET and no agent span (set the root span's status or waymark.outcome)"
    else:
        inferred["outcome"] = "no span says how the run ended"
    return "unknown"
