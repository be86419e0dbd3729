"""Every write in trajectories: `run_ingest_batch`, used by the ingest API, the importers and the demo seed."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from accounts.services import Actor, audit_record

from .core.redaction import Redactor
from .core.search import SearchStep, search_document
from .core.steps import normalize_steps
from .models import Run, Step
from .schemas import RunIn, StepIn

OBSERVATION_MAX_CHARS = 8000
_RUN_ITEMS = TypeAdapter(list[RunIn])
_NOT_FAMILY_CHARS = re.compile(r"[^a-z0-9_-]")


class IngestInvalid(ValueError):
    """The batch breaks the ingest format; `errors` lists each problem as {loc, msg, type}, loc starting at "runs"."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} invalid field(s), first: {errors[0]['loc']}: {errors[0]['msg']}")
        self.errors = errors


@dataclass(frozen=True)
class IngestResult:
    created_ids: list[int] = field(default_factory=list)
    existing_ids: list[int] = field(default_factory=list)
    step_count: int = 0

    @property
    def created(self) -> int:
        return len(self.created_ids)

    @property
    def existing(self) -> int:
        return len(self.existing_ids)


@functools.cache
def _redactor(patterns: tuple[str, ...]) -> Redactor:
    try:
        return Redactor(patterns)
    except ValueError as exc:
        raise ImproperlyConfigured(f"WAYMARK_REDACT_PATTERNS: {exc}") from exc


def current_redactor() -> Redactor:
    return _redactor(tuple(settings.WAYMARK_REDACT_PATTERNS or ()))


def validate_ingest_items(items: Sequence[Any]) -> list[RunIn]:
    """The items as run schemas, or IngestInvalid naming each bad item's index and field. Writes nothing."""
    if not isinstance(items, list | tuple):
        raise IngestInvalid([{"loc": ["runs"], "msg": "must be a list of runs", "type": "list_type"}])
    try:
        runs = _RUN_ITEMS.validate_python(list(items))
    except PydanticValidationError as exc:
        raise IngestInvalid(
            [{"loc": ["runs", *err["loc"]], "msg": err["msg"], "type": err["type"]} for err in exc.errors()]
        ) from None
    first_index: dict[tuple[str, str], int] = {}
    errors = []
    for index, run in enumerate(runs):
        key = (run.source, run.external_id)
        if key in first_index:
            errors.append(
                {
                    "loc": ["runs", index, "external_id"],
                    "msg": f"repeats runs[{first_index[key]}] (same source and external_id) in this batch",
                    "type": "duplicate",
                }
            )
        first_index.setdefault(key, index)
    if errors:
        raise IngestInvalid(errors)
    return runs


def _aware(moment: datetime | None) -> datetime | None:
    if moment is not None and timezone.is_naive(moment):
        return moment.replace(tzinfo=UTC)
    return moment


def _family(declared: str | None) -> str:
    return _NOT_FAMILY_CHARS.sub("", (declared or "").casefold())[:40]


def _step_rows(steps: list[StepIn], redactor: Redactor) -> list[Step]:
    events = [
        {
            "name": step.tool,
            "args": redactor.value(step.arguments),
            "ok": step.ok,
            "input_tokens": step.input_tokens,
            "cached_input_tokens": step.cached_input_tokens,
            "output_tokens": step.output_tokens,
            "cost": step.cost,
        }
        for step in steps
    ]
    rows = []
    for given, normal in zip(steps, normalize_steps(events), strict=True):
        rows.append(
            Step(
                run_id=None,  # set once the run has its id; passing it skips a costly FK default lookup
                ordinal=normal.ordinal,
                tool=normal.tool,
                action_family=_family(given.action_family) or normal.action_family,
                arguments=dict(normal.arguments),
                observation=redactor.text(given.observation)[:OBSERVATION_MAX_CHARS],
                ok=normal.ok,
                started_at=_aware(given.started_at),
                ended_at=_aware(given.ended_at),
                input_tokens=normal.input_tokens,
                cached_input_tokens=normal.cached_input_tokens,
                output_tokens=normal.output_tokens,
                cost=normal.cost,
            )
        )
    return rows


@dataclass
class _Prepared:
    run: Run
    steps: list[Step]


def _duration(started_at: datetime | None, ended_at: datetime | None) -> float | None:
    if started_at is None or ended_at is None:
        return None
    return max(0.0, (ended_at - started_at).total_seconds())


def _prepare(item: RunIn, redactor: Redactor, now: datetime) -> _Prepared:
    steps = _step_rows(item.steps, redactor)
    task = redactor.text(item.task)
    started_at, ended_at = _aware(item.started_at), _aware(item.ended_at)
    run = Run(
        source=item.source,
        external_id=item.external_id,
        task=task,
        intent=item.intent,
        outcome=item.outcome,
        score=item.score,
        graph_workspace=item.graph_workspace,
        graph_revision=item.graph_revision,
        metadata=redactor.value(item.metadata),
        started_at=started_at,
        ended_at=ended_at,
        duration_seconds=_duration(started_at, ended_at),
        created_at=now,
        step_count=len(steps),
        total_tokens=sum(s.input_tokens + s.cached_input_tokens + s.output_tokens for s in steps),
        cost=sum(s.cost for s in steps),
        tools=list(dict.fromkeys(s.tool for s in steps)),
        # what full-text search reads: the stored (redacted, normalized) texts, bounded
        search_document=search_document(task, [SearchStep(s.tool, s.arguments, s.observation) for s in steps]),
    )
    return _Prepared(run=run, steps=steps)


def _existing_ids(prepared: list[_Prepared]) -> dict[tuple[str, str], int]:
    by_source: dict[str, list[str]] = {}
    for item in prepared:
        by_source.setdefault(item.run.source, []).append(item.run.external_id)
    found = {}
    for source, external_ids in by_source.items():
        rows = Run.objects.filter(source=source, external_id__in=external_ids).values_list("external_id", "id")
        found.update({(source, external_id): pk for external_id, pk in rows})
    return found


def _write(*, actor: Actor, prepared: list[_Prepared]) -> IngestResult:
    with transaction.atomic(durable=True):
        existing = _existing_ids(prepared)
        new = [p for p in prepared if (p.run.source, p.run.external_id) not in existing]
        Run.objects.bulk_create([p.run for p in new])
        steps = []
        for item in new:
            for step in item.steps:
                step.run_id = item.run.pk
                steps.append(step)
        Step.objects.bulk_create(steps, batch_size=2000)
        result = IngestResult(
            created_ids=[p.run.pk for p in new],
            existing_ids=[existing[key] for p in prepared if (key := (p.run.source, p.run.external_id)) in existing],
            step_count=len(steps),
        )
        if new:
            audit_record(
                actor=actor,
                verb="trajectories.ingest",
                target=("trajectories.run", f"{result.created_ids[0]}..{result.created_ids[-1]}"),
                after={
                    "created": result.created,
                    "existing": result.existing,
                    "steps": result.step_count,
                    "sources": sorted({p.run.source for p in new}),
                },
            )
    return result


def run_ingest_batch(*, actor: Actor, items: Sequence[Any]) -> IngestResult:
    """Store a batch of runs (ingest API format), all or nothing. Idempotent on (source, external_id): a run that
    exists already is left exactly as it is and reported in `existing_ids`. Raises IngestInvalid before any write."""
    runs = validate_ingest_items(items)
    redactor = current_redactor()
    now = timezone.now()
    try:
        return _write(actor=actor, prepared=[_prepare(run, redactor, now) for run in runs])
    except IntegrityError:
        # A concurrent batch stored some of these runs between our check and our insert: look again.
        return _write(actor=actor, prepared=[_prepare(run, redactor, now) for run in runs])
