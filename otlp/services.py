"""Every write of the OTLP ingest: spans received (`otlp_export`) and quiet traces completed (`otlp_traces_sweep`).

A trace becomes a run once, through `trajectories.services.run_ingest_batch` (the JSON ingest's own service, so
validation, redaction, size limits, NFC identity and idempotency are the same), when it completes:

- its root span (no parent) has arrived — in the same request as the rest of the trace (then nothing is kept), or
  after other spans of it were kept as pending spans;
- or, without a root span, when no span of it arrived for WAYMARK_OTLP_QUIET_SECONDS (`otlp_traces_sweep`, beat).

The trace row then says `written` (with the run id and the span ids the run was made of) or `discarded` (not a run).
Spans arriving after that are refused and reported in partial_success — runs are immutable — except resends of spans
the run was already made of, which are accepted and change nothing (docs/decisions.md).
"""

from __future__ import annotations

import logging
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from accounts.services import Actor, audit_record
from llm.core import Usage as ModelUsage
from llm.pricing import cost_of
from trajectories import copy_ingest
from trajectories.normal_form import normal_runs
from trajectories.selectors import run_ids_by_identity
from trajectories.services import IngestInvalid, run_ingest_batch

from .core.mapping import TraceMapping, Usage, map_trace
from .core.spans import DecodedSpans, SpanRecord
from .models import PendingSpan, Trace, TraceStatus

logger = logging.getLogger("waymark.otlp")
MAX_REPORTED_PROBLEMS = 10


@dataclass
class ExportOutcome:
    """What one export request did: spans received and refused, runs written, and what to tell the sender."""

    received: int = 0
    rejected: int = 0
    problems: list[str] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return self.received - self.rejected

    @property
    def message(self) -> str:
        shown = self.problems[:MAX_REPORTED_PROBLEMS]
        more = len(self.problems) - len(shown)
        return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def model_price(model: str, spent: Usage) -> float | None:
    """A model call's cost from the model price table (llm/pricing.py), as the ledger prices Waymark's own calls;
    None when the model has no known price. The JSON ingest takes the cost the agent states; an OTLP model call
    that states none (`waymark.cost`, `llm.cost.total`) is priced here from its model id and tokens."""
    cost = cost_of(
        model,
        ModelUsage(
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cached_input_tokens=spent.cached_input_tokens,
        ),
    )
    return float(cost) if cost is not None else None


def _map(spans: Iterable[SpanRecord]) -> TraceMapping:
    return map_trace(list(spans), price=model_price)


def _group(spans: Iterable[SpanRecord]) -> dict[str, dict[str, SpanRecord]]:
    traces: dict[str, dict[str, SpanRecord]] = defaultdict(dict)
    for span in spans:
        traces[span.trace_id].setdefault(span.span_id, span)
    return traces


def _refuse_late(trace: Trace, spans: dict[str, SpanRecord], outcome: ExportOutcome, late: dict[int, int]) -> None:
    """Spans of a written (or discarded) trace: resends of its spans are accepted as no-ops, new ones refused."""
    known = set(trace.span_ids or ())
    new = [span_id for span_id in spans if span_id not in known]
    if not new:
        return
    outcome.rejected += len(new)
    late[trace.pk] = late.get(trace.pk, 0) + len(new)
    if trace.status == TraceStatus.WRITTEN:
        outcome.problems.append(
            f"trace {trace.trace_id}: its run (id {trace.run_id}) is already written; {len(new)} span(s) arriving "
            "after it were not stored"
        )
    else:
        outcome.problems.append(f"trace {trace.trace_id}: it was discarded (not a run); {len(new)} span(s) refused")


def otlp_export(*, actor: Actor, decoded: DecodedSpans, now: datetime | None = None) -> ExportOutcome:
    """Receive the spans of one OTLP export request: complete traces become runs now, the others wait as pending
    spans. Never raises for the content of the spans: what cannot be stored or mapped is counted and reported."""
    now = now or timezone.now()
    outcome = ExportOutcome(received=len(decoded.spans) + decoded.rejected, rejected=decoded.rejected)
    outcome.problems.extend(decoded.problems)
    traces = _group(decoded.spans)
    duplicates = len(decoded.spans) - sum(len(spans) for spans in traces.values())
    if duplicates:
        outcome.problems.append(f"{duplicates} span(s) repeated in this request were counted once")
    known = {trace.trace_id: trace for trace in Trace.objects.filter(trace_id__in=list(traces))}
    direct: dict[str, dict[str, SpanRecord]] = {}
    buffered: dict[str, dict[str, SpanRecord]] = {}
    late: dict[int, int] = {}
    for trace_id, spans in traces.items():
        trace = known.get(trace_id)
        if trace is not None and trace.status != TraceStatus.PENDING:
            _refuse_late(trace, spans, outcome, late)
        elif trace is None and any(span.is_root for span in spans.values()):
            direct[trace_id] = spans
        else:
            buffered[trace_id] = spans
    ready = _buffer(actor=actor, traces=buffered, now=now, outcome=outcome, late=late) if buffered else []
    mappings = [_map(spans.values()) for spans in direct.values()]
    mappings += _map_pending(ready)
    sizes = {trace_id: len(spans) for trace_id, spans in traces.items()}
    _complete(actor=actor, mappings=mappings, direct=set(direct), now=now, outcome=outcome, sizes=sizes, late=late)
    return outcome


def _buffer(
    *,
    actor: Actor,
    traces: dict[str, dict[str, SpanRecord]],
    now: datetime,
    outcome: ExportOutcome,
    late: dict[int, int],
) -> list[str]:
    """Keep the spans of incomplete traces (at most WAYMARK_OTLP_MAX_SPANS_PER_TRACE per trace; resends ignored).
    Returns the trace ids whose root span has now arrived."""
    limit = settings.WAYMARK_OTLP_MAX_SPANS_PER_TRACE
    sender = actor.user if actor.user is not None and actor.user.pk else None
    ready: list[str] = []
    with transaction.atomic():
        Trace.objects.bulk_create(
            [Trace(trace_id=t, sender=sender, first_seen_at=now, last_seen_at=now) for t in traces],
            ignore_conflicts=True,
        )
        rows = {t.trace_id: t for t in Trace.objects.select_for_update().filter(trace_id__in=list(traces))}
        have: dict[int, set[str]] = defaultdict(set)
        for trace_pk, span_id in PendingSpan.objects.filter(trace__in=list(rows.values())).values_list(
            "trace_id", "span_id"
        ):
            have[trace_pk].add(span_id)
        new_rows, touched, refused = [], [], 0
        for trace_id, spans in traces.items():
            trace = rows[trace_id]
            if trace.status != TraceStatus.PENDING:  # completed by another request meanwhile
                _refuse_late(trace, spans, outcome, late)
                continue
            kept = have[trace.pk]
            new = [s for s in spans.values() if s.span_id not in kept]
            room = max(0, limit - len(kept))
            # The root span always gets in (one past the bound at most): it is what completes the trace.
            roots, others = [s for s in new if s.is_root], [s for s in new if not s.is_root]
            room = max(0, room - len(roots))
            keep, over = roots + others[:room], others[room:]
            if over:
                refused += len(over)
                outcome.rejected += len(over)
                outcome.problems.append(f"trace {trace_id}: more than {limit} spans; {len(over)} span(s) refused")
            new_rows += [
                PendingSpan(trace=trace, span_id=s.span_id, payload=s.to_dict(), received_at=now) for s in keep
            ]
            trace.span_count = len(kept) + len(keep)
            trace.last_seen_at = now
            trace.root_received = trace.root_received or any(s.is_root for s in keep)
            touched.append(trace)
            if trace.root_received:
                ready.append(trace_id)
        PendingSpan.objects.bulk_create(new_rows, ignore_conflicts=True)
        if touched:
            Trace.objects.bulk_update(touched, ["span_count", "last_seen_at", "root_received"])
            audit_record(
                actor=actor,
                verb="otlp.spans_keep",
                target=("otlp.trace", touched[0].trace_id if len(touched) == 1 else f"{len(touched)} traces"),
                after={"traces": len(touched), "spans": len(new_rows), "refused": refused},
            )
    return ready


def _map_pending(trace_ids: Sequence[str]) -> list[TraceMapping]:
    if not trace_ids:
        return []
    spans: dict[str, list[SpanRecord]] = defaultdict(list)
    for trace_id, payload in PendingSpan.objects.filter(trace__trace_id__in=list(trace_ids)).values_list(
        "trace__trace_id", "payload"
    ):
        spans[trace_id].append(SpanRecord.from_dict(payload))
    return [_map(spans[trace_id]) for trace_id in trace_ids if spans[trace_id]]


def _ingest(actor: Actor, mappings: list[TraceMapping], outcome: ExportOutcome) -> dict[str, int]:
    """Write the mapped runs in one batch; an item the ingest refuses is dropped (and reported) and the rest written.
    Returns trace id → run id for the runs now stored (created, or existing already)."""
    pending = [m for m in mappings if m.run is not None]
    for _attempt in range(3):
        if not pending:
            return {}
        try:
            # runs the mapping built in the schema's normal form skip pydantic's Python validators, the rest not
            result = run_ingest_batch(actor=actor, items=normal_runs([m.run for m in pending]))
            break
        except IngestInvalid as exc:
            bad = {e["loc"][1] for e in exc.errors if len(e["loc"]) > 1 and isinstance(e["loc"][1], int)}
            if not bad:
                bad = set(range(len(pending)))
            for index in sorted(bad):
                first = next((e for e in exc.errors if len(e["loc"]) > 1 and e["loc"][1] == index), exc.errors[0])
                where = ".".join(str(part) for part in first["loc"][2:]) or "the run"
                outcome.problems.append(
                    f"trace {pending[index].trace_id}: the run was refused by the ingest ({where}: {first['msg']})"
                )
            pending = [m for index, m in enumerate(pending) if index not in bad]
    else:
        return {}
    if not result.existing:  # all created: created_ids follow the items' order
        return {m.trace_id: pk for m, pk in zip(pending, result.created_ids, strict=True)}
    return _run_ids(pending)


def _run_ids(mappings: list[TraceMapping]) -> dict[str, int]:
    wanted = {
        (unicodedata.normalize("NFC", m.run["source"]).strip(), m.trace_id): m.trace_id
        for m in mappings
        if m.run is not None
    }
    return {wanted[identity]: pk for identity, pk in run_ids_by_identity(wanted).items()}


def _complete(
    *,
    actor: Actor,
    mappings: list[TraceMapping],
    direct: set[str],
    now: datetime,
    outcome: ExportOutcome,
    sizes: dict[str, int],
    late: dict[int, int],
) -> None:
    """Write the runs of completed traces, then mark the traces written or discarded and drop their pending spans."""
    for mapping in mappings:
        outcome.problems.extend(mapping.problems)
    run_ids = _ingest(actor, mappings, outcome) if mappings else {}
    outcome.run_ids.extend(run_ids[m.trace_id] for m in mappings if m.trace_id in run_ids)
    for mapping in mappings:
        if mapping.trace_id not in run_ids:  # not a run, or refused by the ingest: this request's spans of it too
            outcome.rejected += sizes.get(mapping.trace_id, 0)
    if not mappings and not late:
        return
    sender = actor.user if actor.user is not None and actor.user.pk else None
    with transaction.atomic():
        _insert_traces(
            [
                (
                    mapping.trace_id,
                    (TraceStatus.WRITTEN if mapping.trace_id in run_ids else TraceStatus.DISCARDED).value,
                    sender.pk if sender is not None else None,
                    True,
                    len(mapping.span_ids),
                    now,
                    now,
                    now,
                    run_ids.get(mapping.trace_id),
                    list(mapping.span_ids),
                    0,
                    list(mapping.problems),
                )
                for mapping in mappings
                if mapping.trace_id in direct
            ]
        )
        finished = [m for m in mappings if m.trace_id not in direct]
        for mapping in finished:
            written = mapping.trace_id in run_ids
            Trace.objects.filter(trace_id=mapping.trace_id, status=TraceStatus.PENDING).update(
                status=TraceStatus.WRITTEN if written else TraceStatus.DISCARDED,
                run_id=run_ids.get(mapping.trace_id),
                span_ids=list(mapping.span_ids),
                problems=list(mapping.problems),
                completed_at=now,
            )
        if finished:
            # Spans kept after the mapping read them (a concurrent request) are late: count them, drop them all.
            ids = [m.trace_id for m in finished]
            mapped = {(m.trace_id, span_id) for m in finished for span_id in m.span_ids}
            stray: dict[str, int] = defaultdict(int)
            for trace_id, span_id in PendingSpan.objects.filter(trace__trace_id__in=ids).values_list(
                "trace__trace_id", "span_id"
            ):
                if (trace_id, span_id) not in mapped:
                    stray[trace_id] += 1
            PendingSpan.objects.filter(trace__trace_id__in=ids).delete()
            for trace_id, count in stray.items():
                Trace.objects.filter(trace_id=trace_id).update(late_spans=F("late_spans") + count)
        for trace_pk, count in late.items():
            Trace.objects.filter(pk=trace_pk).update(late_spans=F("late_spans") + count)
        written_ids = sorted(run_ids.values())
        audit_record(
            actor=actor,
            verb="otlp.traces_complete",
            target=("otlp.trace", mappings[0].trace_id if len(mappings) == 1 else f"{len(mappings)} traces"),
            after={
                "written": len(run_ids),
                "discarded": len(mappings) - len(run_ids),
                "late_spans": sum(late.values()),
                "run_ids": written_ids[:20],
            },
        )


# The columns of a completed trace row, in the order of _insert_traces' tuples.
TRACE_COLUMNS = (
    "trace_id",
    "status",
    "sender_id",
    "root_received",
    "span_count",
    "first_seen_at",
    "last_seen_at",
    "completed_at",
    "run_id",
    "span_ids",
    "late_spans",
    "problems",
)


def _insert_traces(rows: list[tuple[Any, ...]]) -> None:
    """The rows of traces completed in the request that brought them (no pending row exists, unless a concurrent
    request just kept spans of it: that row is left alone). One INSERT … ON CONFLICT DO NOTHING on PostgreSQL, a
    bulk_create elsewhere."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        copy_ingest.insert_ignoring_conflicts(model=Trace, columns=TRACE_COLUMNS, rows=rows, conflict=("trace_id",))
        return
    traces = [Trace(**dict(zip(TRACE_COLUMNS, row, strict=True))) for row in rows]  # sender_id: the attname
    Trace.objects.bulk_create(traces, ignore_conflicts=True)


def otlp_traces_sweep(*, now: datetime | None = None, limit: int = 200) -> int:
    """Complete the pending traces no span arrived for in WAYMARK_OTLP_QUIET_SECONDS (beat, every minute): their runs
    are written with the spans that came, in the name of the agent that sent them. Returns how many were completed."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.WAYMARK_OTLP_QUIET_SECONDS)
    quiet = list(
        Trace.objects.filter(status=TraceStatus.PENDING, last_seen_at__lt=cutoff)
        .select_related("sender")
        .order_by("last_seen_at")[:limit]
    )
    by_sender: dict[int | None, list[Trace]] = defaultdict(list)
    for trace in quiet:
        by_sender[trace.sender_id].append(trace)
    completed = 0
    for traces in by_sender.values():
        sender = traces[0].sender
        actor = Actor(user=sender) if sender is not None else Actor.system()
        ids = [trace.trace_id for trace in traces]
        mappings = _map_pending(ids)
        mapped = {m.trace_id for m in mappings}
        empty = [trace_id for trace_id in ids if trace_id not in mapped]
        if empty:  # a pending trace with no span left (should not happen): close it
            with transaction.atomic():
                Trace.objects.filter(trace_id__in=empty, status=TraceStatus.PENDING).update(
                    status=TraceStatus.DISCARDED, completed_at=now, problems=["no span was kept"]
                )
                audit_record(
                    actor=actor,
                    verb="otlp.traces_complete",
                    target=("otlp.trace", f"{len(empty)} traces"),
                    after={"written": 0, "discarded": len(empty), "late_spans": 0, "run_ids": []},
                )
        outcome = ExportOutcome()
        _complete(actor=actor, mappings=mappings, direct=set(), now=now, outcome=outcome, sizes={}, late={})
        if outcome.problems:
            logger.info("otlp: quiet traces completed with problems: %s", outcome.message)
        completed += len(ids)
    return completed
