"""Every write in trajectories: `run_ingest_batch`, used by the ingest API, OTLP, the importers and the demo seed,
and `run_record_job_answer`, the one writer of runs in the evaluation namespace (trajectories.job_services).

The evaluation namespace is Waymark's own: runs whose source starts with "waymark-" (EVALUATION_SOURCE is
"waymark-evaluation") and runs whose external id has the job protocol's shape "job-<digits>". Ingest refuses both,
so a run that gate evidence reads was written as the answer of a claimed job, by the token that claimed it, in the
transaction that marked the job done (docs/decisions.md, "Evidence only through the job that asked for it").
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from accounts.services import Actor, audit_record

from . import copy_ingest, rollup
from .core.redaction import Redactor
from .core.search import SearchStep, search_document
from .core.steps import DEFAULT_FAMILY_MAP, normalize_tool, safe_arguments
from .models import EVALUATION_SOURCE, Run, Step
from .schemas import RunIn, StepIn

OBSERVATION_MAX_CHARS = 8000
_RUN_ITEMS = TypeAdapter(list[RunIn])
_NOT_FAMILY_CHARS = re.compile(r"[^a-z0-9_-]")
RESERVED_SOURCE_PREFIX = "waymark-"
_JOB_ID_SHAPE = re.compile(r"job-[0-9]+", re.IGNORECASE)


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


def _validated(items: Sequence[Any]) -> list[RunIn]:
    """The items as run schemas, or IngestInvalid naming each bad item's index and field (duplicates included)."""
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


def _folded(text: str) -> str:
    """`text` as it reads: compatibility forms folded (NFKC: full-width letters and digits), case folded, every
    dash-like character a hyphen-minus. Two ids that fold alike look alike on a page."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if folded.isascii():
        return folded
    return "".join("-" if unicodedata.category(char) == "Pd" else char for char in folded)


@functools.lru_cache(maxsize=1024)
def is_reserved_source(source: str) -> bool:
    """Sources starting with "waymark-" (as they read: any case, full-width forms, any dash) are Waymark's own."""
    return _folded(source).startswith(RESERVED_SOURCE_PREFIX)


def has_job_id_shape(external_id: str) -> bool:
    """The shape of the job protocol's answer ids, "job-<digits>" (as it reads)."""
    return _JOB_ID_SHAPE.fullmatch(_folded(external_id)) is not None


def _reserved_identity_errors(runs: Sequence[RunIn]) -> list[dict[str, Any]]:
    errors = []
    for index, run in enumerate(runs):
        if is_reserved_source(run.source):
            errors.append(
                {
                    "loc": ["runs", index, "source"],
                    "msg": f"the source {run.source!r} is reserved: sources starting with "
                    f"{RESERVED_SOURCE_PREFIX!r} are Waymark's own ({EVALUATION_SOURCE!r} holds the answers of "
                    "evaluation jobs, which only POST /api/v1/jobs/{id}/result writes)",
                    "type": "reserved_source",
                }
            )
        if has_job_id_shape(run.external_id):
            errors.append(
                {
                    "loc": ["runs", index, "external_id"],
                    "msg": f"the external_id {run.external_id!r} has the shape of an evaluation job's answer "
                    '("job-<number>"), which only POST /api/v1/jobs/{id}/result writes: name the run otherwise',
                    "type": "reserved_external_id",
                }
            )
    return errors


def validate_ingest_items(items: Sequence[Any]) -> list[RunIn]:
    """The items as run schemas, or IngestInvalid naming each bad item's index and field. Writes nothing. The
    evaluation namespace (a "waymark-" source, a "job-<digits>" external id) is refused here: only
    `run_record_job_answer` writes it."""
    runs = _validated(items)
    errors = _reserved_identity_errors(runs)
    if errors:
        raise IngestInvalid(errors)
    return runs


def _aware(moment: datetime | None) -> datetime | None:
    if moment is not None and timezone.is_naive(moment):
        return moment.replace(tzinfo=UTC)
    return moment


def _family(declared: str | None) -> str:
    return _NOT_FAMILY_CHARS.sub("", (declared or "").casefold())[:40]


# The stored columns, in the order of the prepared row tuples (both writers take them from here).
RUN_COLUMNS = (
    "source",
    "external_id",
    "task",
    "intent",
    "outcome",
    "score",
    "graph_workspace",
    "graph_revision",
    "procedure_revision",
    "metadata",
    "started_at",
    "ended_at",
    "duration_seconds",
    "created_at",
    "step_count",
    "total_tokens",
    "cost",
    "tools",
    "search_document",
)
STEP_COLUMNS = (
    "ordinal",
    "tool",
    "action_family",
    "arguments",
    "observation",
    "ok",
    "started_at",
    "ended_at",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "cost",
)


def _step_rows(steps: list[StepIn], redactor: Redactor) -> list[tuple[Any, ...]]:
    """The steps as row tuples (STEP_COLUMNS order), normalized as `normalize_steps` does for validated input: the
    schema already guarantees real bools, non-negative integer token counts and finite non-negative costs, so only
    the tool name, the action family and the arguments need the core's cleaning (a test holds the two equal)."""
    rows = []
    for ordinal, step in enumerate(steps):
        tool = normalize_tool(step.tool or "unknown")
        rows.append(
            (
                ordinal,
                tool,
                _family(step.action_family) or DEFAULT_FAMILY_MAP.get(tool, "other"),
                dict(safe_arguments(redactor.value(step.arguments))),
                redactor.text(step.observation)[:OBSERVATION_MAX_CHARS],
                step.ok,
                _aware(step.started_at),
                _aware(step.ended_at),
                step.input_tokens,
                step.cached_input_tokens,
                step.output_tokens,
                float(step.cost),
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class _Prepared:
    key: tuple[str, str]  # (source, external_id)
    run: tuple[Any, ...]  # RUN_COLUMNS order
    steps: list[tuple[Any, ...]]  # STEP_COLUMNS order


def _duration(started_at: datetime | None, ended_at: datetime | None) -> float | None:
    if started_at is None or ended_at is None:
        return None
    return max(0.0, (ended_at - started_at).total_seconds())


def _prepare(item: RunIn, redactor: Redactor, now: datetime) -> _Prepared:
    steps = _step_rows(item.steps, redactor)
    task = redactor.text(item.task)
    started_at, ended_at = _aware(item.started_at), _aware(item.ended_at)
    tools = list(dict.fromkeys(row[1] for row in steps))
    run = (
        item.source,
        item.external_id,
        task,
        item.intent,
        item.outcome,
        None if item.score is None else float(item.score),
        item.graph_workspace,
        item.graph_revision,
        item.procedure_revision,
        redactor.value(item.metadata),
        started_at,
        ended_at,
        _duration(started_at, ended_at),
        now,
        len(steps),
        sum(row[8] + row[9] + row[10] for row in steps),
        float(sum(row[11] for row in steps)),
        tools,
        # what full-text search reads: the stored (redacted, normalized) texts, bounded
        search_document(task, [SearchStep(row[1], row[3], row[4]) for row in steps]),
    )
    return _Prepared(key=(item.source, item.external_id), run=run, steps=steps)


def _existing_ids(prepared: Sequence[_Prepared]) -> dict[tuple[str, str], int]:
    by_source: dict[str, list[str]] = {}
    for item in prepared:
        by_source.setdefault(item.key[0], []).append(item.key[1])
    found = {}
    for source, external_ids in by_source.items():
        rows = Run.objects.filter(source=source, external_id__in=external_ids).values_list("external_id", "id")
        found.update({(source, external_id): pk for external_id, pk in rows})
    return found


def _uses_copy() -> bool:
    """PostgreSQL writes by INSERT … ON CONFLICT and COPY (trajectories.copy_ingest); SQLite by bulk_create."""
    return connection.vendor == "postgresql"


def _insert_orm(new: list[_Prepared]) -> dict[tuple[str, str], int]:
    """The portable writer (SQLite): bulk_create. A run stored meanwhile by a concurrent batch raises IntegrityError."""
    runs = [Run(**dict(zip(RUN_COLUMNS, item.run, strict=True))) for item in new]
    Run.objects.bulk_create(runs)
    steps = [
        Step(run_id=run.pk, **dict(zip(STEP_COLUMNS, row, strict=True)))
        for run, item in zip(runs, new, strict=True)
        for row in item.steps
    ]
    Step.objects.bulk_create(steps, batch_size=2000)
    return {item.key: run.pk for run, item in zip(runs, new, strict=True)}


def _insert_copy(new: list[_Prepared]) -> dict[tuple[str, str], int]:
    return copy_ingest.insert_runs(
        run_columns=RUN_COLUMNS,
        step_columns=STEP_COLUMNS,
        runs=[item.run for item in new],
        steps=[item.steps for item in new],
    )


class _Raced(Exception):
    """A run skipped as existing could not be found afterwards: write the batch again."""


def _write(*, actor: Actor, prepared: list[_Prepared], use_copy: bool) -> IngestResult:
    with transaction.atomic(durable=True):
        existing = _existing_ids(prepared)
        new = [p for p in prepared if p.key not in existing]
        created = (_insert_copy if use_copy else _insert_orm)(new) if new else {}
        if len(created) < len(new):
            # COPY path: a concurrent batch committed some of these runs after our look; ON CONFLICT skipped them.
            skipped = [p for p in new if p.key not in created]
            found = _existing_ids(skipped)
            if len(found) < len(skipped):
                raise _Raced
            existing.update(found)
            new = [p for p in new if p.key in created]
        rollup.record(dict(zip(RUN_COLUMNS, p.run, strict=True)) for p in new)
        result = IngestResult(
            created_ids=[created[p.key] for p in new],
            existing_ids=[existing[p.key] for p in prepared if p.key in existing],
            step_count=sum(len(p.steps) for p in new),
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
                    "sources": sorted({p.key[0] for p in new}),
                },
            )
    return result


def run_ingest_batch(*, actor: Actor, items: Sequence[Any]) -> IngestResult:
    """Store a batch of runs (ingest API format), all or nothing. Idempotent on (source, external_id): a run that
    exists already is left exactly as it is and reported in `existing_ids`. Raises IngestInvalid before any write."""
    runs = validate_ingest_items(items)
    redactor = current_redactor()
    now = timezone.now()
    prepared = [_prepare(run, redactor, now) for run in runs]
    use_copy = _uses_copy()
    try:
        return _write(actor=actor, prepared=prepared, use_copy=use_copy)
    except IntegrityError:
        if use_copy:  # ON CONFLICT already settles concurrent batches: this is a value the database refused
            raise
        # A concurrent batch stored some of these runs between our check and our insert: look again.
        return _write(actor=actor, prepared=prepared, use_copy=use_copy)
    except _Raced:
        return _write(actor=actor, prepared=prepared, use_copy=use_copy)


class AnswerIdentityTaken(Exception):
    """A run already holds the identity of a job's answer without being that job's answer (it was stored before
    ingest refused the evaluation namespace): it is never counted, and the job cannot be answered."""


def validate_job_answer(item: Any) -> RunIn:
    """The run answering a job (its reserved identity set by trajectories.job_services), or IngestInvalid naming the
    bad fields. Writes nothing."""
    return _validated([item])[0]


def run_record_job_answer(*, actor: Actor, run: RunIn) -> int:
    """Store the run answering an evaluation job (as `validate_job_answer` gave it) and return its id. Only
    trajectories.job_services calls it, inside the transaction that marks the job done under the job's row lock, so
    a run in the evaluation namespace exists exactly when its job is done, written by the answering token.
    AnswerIdentityTaken when a run holds the identity already."""
    if not connection.in_atomic_block:
        raise RuntimeError("run_record_job_answer must run inside the transaction that marks the job done")
    if run.source != EVALUATION_SOURCE or not has_job_id_shape(run.external_id):
        raise ValueError(f"a job answer is stored under ({EVALUATION_SOURCE!r}, 'job-<id>'), not {run.source!r}")
    prepared = [_prepare(run, current_redactor(), timezone.now())]
    if _existing_ids(prepared):
        raise AnswerIdentityTaken(
            f"a run named {prepared[0].key[0]}/{prepared[0].key[1]} exists and is not this job's answer"
        )
    created = _insert_orm(prepared)  # one run: the portable writer on every database
    rollup.record(dict(zip(RUN_COLUMNS, p.run, strict=True)) for p in prepared)
    run_id = created[prepared[0].key]
    audit_record(
        actor=actor,
        verb="trajectories.ingest",
        target=("trajectories.run", f"{run_id}..{run_id}"),
        after={"created": 1, "existing": 0, "steps": len(prepared[0].steps), "sources": [EVALUATION_SOURCE]},
    )
    return run_id
