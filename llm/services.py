"""Every write of llm: the ModelCall ledger.

A ledger row is itself the record of a call, so these services write no separate audit event (docs/decisions.md);
the reaper's `modelcall.reaped` is audited (`model_calls_abandon_stuck`, registered with common/reaper.py). Each
service is one durable transaction, so a model call can never be recorded from inside someone else's transaction, with
one exception: `model_call_succeed_statement` gives a reply's write to the caller that first uses it, to send with its
own durable write (an evolution round's checkpoint), so the reply is on record exactly when it is used; the call's row
itself is always written before the call, in its own transaction.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from django.db import models, transaction
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone

from accounts.services import Actor, audit_record
from common.statements import Statement, update_statement
from llm.core import ModelRequest, ModelResponse
from llm.pricing import cost_of

from .models import LedgerMark, LedgerTotal, ModelCall

REQUEST_PREVIEW_CHARS = 2000
ERROR_CHARS = 4000
REAP_BATCH = 500
# A reply is still recorded on a call the reaper abandoned for this long after the call began (its tokens were spent);
# after that the call no longer changes, and the ledger's totals count it for good (model_call_totals_roll).
LATE_REPLY = timedelta(days=1)
# The totals take in only calls begun this long ago: an id below theirs is committed (each call's row commits alone).
SETTLED = timedelta(minutes=10)
Subject = models.Model | tuple[str, str | int] | None


def request_digest(request: ModelRequest, model_id: str) -> str:
    """SHA-256 of the canonical JSON of what was asked: identical requests share a digest."""
    canonical = json.dumps(
        {
            "model": model_id,
            "role": request.role,
            "system": request.system,
            "parts": list(request.parts),
            "max_tokens": request.max_tokens,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _preview(request: ModelRequest) -> str:
    text = "\n\n".join([request.system, *request.text_parts]).strip()
    return text if len(text) <= REQUEST_PREVIEW_CHARS else text[: REQUEST_PREVIEW_CHARS - 1] + "…"


def _subject_key(subject: Subject) -> tuple[str, str]:
    if subject is None:
        return "", ""
    if isinstance(subject, models.Model):
        return subject._meta.label_lower, str(subject.pk)
    subject_type, subject_id = subject
    return str(subject_type)[:80], str(subject_id)[:120]


def _provider(provider: str) -> str:
    if provider not in ModelCall.Provider.values:
        raise ValueError(f"unknown model provider {provider!r}; expected one of {', '.join(ModelCall.Provider.values)}")
    return provider


def model_call_start(
    *, role: str, model_id: str, provider: str, request: ModelRequest, subject: Subject = None
) -> ModelCall:
    """Record a call about to be made, in `running`."""
    subject_type, subject_id = _subject_key(subject)
    _alone()
    return ModelCall.objects.create(
        role=role[:60],
        model_id=model_id[:100],
        provider=_provider(provider),
        status=ModelCall.Status.RUNNING,
        max_tokens=request.max_tokens,
        request_digest=request_digest(request, model_id),
        request_preview=_preview(request),
        subject_type=subject_type,
        subject_id=subject_id,
    )


def _alone() -> None:
    """Refuse to write inside a caller's transaction, as `atomic(durable=True)` does: the one INSERT that follows then
    commits by itself (autocommit), without the round trips of a BEGIN and a COMMIT."""
    with transaction.atomic(durable=True):
        pass


def _finish(call_id: int, started_at: datetime, fields: dict) -> ModelCall:
    now = timezone.now()
    fields.setdefault("latency_ms", max(0, int((now - started_at).total_seconds() * 1000)))
    with transaction.atomic(durable=True):
        # A reply that arrives after the reaper marked the call abandoned is still recorded: the tokens were spent.
        _finishable(call_id, now).update(finished_at=now, **fields)
        return ModelCall.objects.get(pk=call_id)


def _finishable(call_id: int, now: datetime) -> models.QuerySet[ModelCall]:
    """The call, while a reply may still be recorded on it: running, or abandoned by the reaper less than LATE_REPLY
    after it began."""
    late = Q(status=ModelCall.Status.ABANDONED, started_at__gte=now - LATE_REPLY)
    return ModelCall.objects.filter(Q(status=ModelCall.Status.RUNNING) | late, pk=call_id)


def _succeeded(call: ModelCall, response: ModelResponse) -> dict:
    return {
        "status": ModelCall.Status.SUCCEEDED,
        "input_tokens": response.usage.input_tokens,
        "output_tokens": response.usage.output_tokens,
        "cached_input_tokens": response.usage.cached_input_tokens,
        "cost": cost_of(call.model_id, response.usage),
        "response_text": response.text,
        "response_id": (response.response_id or "")[:120],
        "stop_reason": (response.stop_reason or "")[:40],
    }


def model_call_succeed(*, call: ModelCall, response: ModelResponse, latency_ms: int | None = None) -> ModelCall:
    """Record the reply, its usage and its cost (None for a model without a known price)."""
    fields = _succeeded(call, response)
    if latency_ms is not None:
        fields["latency_ms"] = latency_ms
    return _finish(call.pk, call.started_at, fields)


def model_call_succeed_statement(
    *, call: ModelCall, response: ModelResponse, latency_ms: int, finished_at: datetime
) -> Statement:
    """model_call_succeed's write, not sent: the one exception to "one durable transaction a service", for a caller
    that sends a reply with the durable write that first uses it (an evolution round's checkpoint #1,
    graphs/evolution/services.py: one statement for both, common/statements.py), so the reply is on record exactly
    when it is used. The call's `running` row was written by model_call_start before the call, as always. `call`
    gets the reply's fields at once (the caller's write failing leaves the row as if the worker died)."""
    fields = {**_succeeded(call, response), "latency_ms": latency_ms, "finished_at": finished_at}
    for name, value in fields.items():
        setattr(call, name, value)
    # As _finish: a reply that arrives after the reaper marked the call abandoned is still recorded.
    return update_statement(_finishable(call.pk, finished_at), **fields)


def model_call_fail(*, call: ModelCall, error: BaseException | str, latency_ms: int | None = None) -> ModelCall:
    """Record that the call produced no usable reply, with the error. A ModelError's diagnostics are kept, and so is
    what came back (`partial`: an HTML page, a reply cut short), with the tokens it spent and their cost."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    fields = {"status": ModelCall.Status.FAILED, "error": text[:ERROR_CHARS]}
    fields["diagnostics"] = dict(getattr(error, "diagnostics", None) or {})
    partial = getattr(error, "partial", None)
    if isinstance(partial, ModelResponse):
        fields.update(
            input_tokens=partial.usage.input_tokens,
            output_tokens=partial.usage.output_tokens,
            cached_input_tokens=partial.usage.cached_input_tokens,
            cost=cost_of(call.model_id, partial.usage) if partial.usage.total_tokens else None,
            response_text=partial.text,
            response_id=(partial.response_id or "")[:120],
            stop_reason=(partial.stop_reason or "")[:40],
        )
    if latency_ms is not None:
        fields["latency_ms"] = latency_ms
    return _finish(call.pk, call.started_at, fields)


def model_call_note_rejected_output(*, call_id: int, error: BaseException | str) -> ModelCall:
    """A parser rejected the reply of a succeeded call (MalformedModelOutput): keep its diagnostics on the row."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    with transaction.atomic(durable=True):
        call = ModelCall.objects.select_for_update().get(pk=call_id)
        call.error = text[:ERROR_CHARS]
        call.save(update_fields=["error"])
    return call


def model_calls_abandon_stuck(*, cutoff: datetime) -> int:
    """The reaper's service (registered in LlmConfig.ready): calls still running that started before `cutoff`
    become abandoned, up to REAP_BATCH per run, each with an audit event from the system actor. Rows a finishing
    worker holds are skipped (SKIP LOCKED) and the update is conditional on the row still being running and old,
    so reaping again changes nothing. Returns how many calls it abandoned."""
    stuck = {"status": ModelCall.Status.RUNNING, "started_at__lt": cutoff}
    with transaction.atomic(durable=True):
        calls = list(
            ModelCall.objects.select_for_update(skip_locked=True)
            .filter(**stuck)
            .order_by("started_at", "pk")[:REAP_BATCH]
        )
        if not calls:
            return 0
        reaped = ModelCall.objects.filter(pk__in=[call.pk for call in calls], **stuck).update(
            status=ModelCall.Status.ABANDONED
        )
        for call in calls:
            audit_record(
                actor=Actor.system(),
                verb="modelcall.reaped",
                target=call,
                before={"status": ModelCall.Status.RUNNING},
                after={
                    "status": ModelCall.Status.ABANDONED,
                    "running_since": call.started_at.isoformat(),
                    "cutoff": cutoff.isoformat(),
                },
            )
    return reaped


def model_call_totals_roll(*, now: datetime | None = None) -> int:
    """Count the calls that can no longer change into the ledger's totals (LedgerTotal) and move the mark past them:
    every call from the mark up to the first that is still running, or abandoned less than LATE_REPLY ago, among
    those begun more than SETTLED ago. Beat, every ten minutes (llm.tasks); the calls page then reads the totals and
    the calls above the mark only. Two at once wait for each other (the mark's row lock). Returns how many calls it
    counted."""
    now = now or timezone.now()
    with transaction.atomic(durable=True):
        mark, _ = LedgerMark.objects.select_for_update().get_or_create(pk=1)
        above = ModelCall.objects.filter(pk__gte=mark.below_id).order_by()
        changing = Q(status=ModelCall.Status.RUNNING) | Q(
            status=ModelCall.Status.ABANDONED, started_at__gte=now - LATE_REPLY
        )
        first_changing = above.filter(changing).aggregate(first=Min("pk"))["first"]
        last_settled = above.filter(started_at__lt=now - SETTLED).aggregate(last=Max("pk"))["last"]
        if last_settled is None:
            return 0
        upto = last_settled + 1 if first_changing is None else min(first_changing, last_settled + 1)
        if upto <= mark.below_id:
            return 0
        groups = (
            above.filter(pk__lt=upto)
            .values("role", "model_id", "status")
            .annotate(
                n=Count("id"),
                input=Sum("input_tokens"),
                output=Sum("output_tokens"),
                cached=Sum("cached_input_tokens"),
                priced=Sum("cost"),
                no_price=Count("id", filter=Q(cost__isnull=True, status=ModelCall.Status.SUCCEEDED)),
            )
        )
        known = {(row.role, row.model_id, row.status): row for row in LedgerTotal.objects.all()}
        new, changed, counted = [], [], 0
        for group in groups:
            key = (group["role"], group["model_id"], group["status"])
            row = known.get(key)
            if row is None:
                row = LedgerTotal(role=key[0], model_id=key[1], status=key[2])
                new.append(row)
            else:
                changed.append(row)
            row.calls += group["n"]
            row.input_tokens += group["input"] or 0
            row.output_tokens += group["output"] or 0
            row.cached_input_tokens += group["cached"] or 0
            row.cost += group["priced"] or 0
            row.unpriced += group["no_price"]
            counted += group["n"]
        LedgerTotal.objects.bulk_create(new)
        LedgerTotal.objects.bulk_update(
            changed, ["calls", "input_tokens", "output_tokens", "cached_input_tokens", "cost", "unpriced"]
        )
        mark.below_id, mark.rolled_at = upto, now
        mark.save(update_fields=["below_id", "rolled_at"])
    return counted
