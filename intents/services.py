"""Every write of intents: proposal runs (start, one batch per step, cancel, schedule, reap), the candidates and
vectors API clients post.

A proposal run is resolved into batches when it starts. A Celery step claims the run's lease, sends its next pending
batch to the model (role "intents", every call through RecordedChatModel with the batch as subject), parses the reply
with intents.core.parse_intent_reply, and settles the batch in one transaction: its candidates and their label
embeddings, the run's counts, the lease released and the next step enqueued on commit. A malformed reply is written to
the batch at once (raw text and error) and the batch is asked again once with the error fed back; a second malformed
reply marks the batch malformed and stores nothing from it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common import leases
from common.leases import LeaseLost, RunCancelled, lease_claim, lease_clear, lease_free, lease_heartbeat, lease_release
from common.text import plain_identifier_error
from llm.core import ChatModel, MalformedModelOutput, ModelError, ModelRequest, ScriptedChatModel
from llm.factory import get_chat_model, model_is_scripted
from llm.recording import RecordedChatModel
from llm.services import model_call_note_rejected_output
from trajectories.selectors import as_trajectory_run
from trajectories.services import current_redactor

from . import selectors
from .core.candidates import IntentCandidate, parse_intent_candidates, parse_intent_reply
from .core.normalize import normalize_intent
from .core.prompts import MAX_TOKENS, SYSTEM, RunBrief, render_batch, retry_part, stand_in_reply
from .embeddings import MAX_DIMENSIONS, as_bytes, get_embedder, missing_embeddings, text_digest
from .models import Embedding, IntentBatchRun, IntentCandidateRecord, IntentProposalBatch, IntentProposalRun

log = logging.getLogger(__name__)

Status = IntentProposalRun.Status
BatchStatus = IntentProposalBatch.Status
ROLE = "intents"
DEFAULT_BATCH_SIZE = 5
MAX_BATCH_SIZE = 50
MAX_RUNS = 5000
MAX_CRASHES = 5
MAX_BATCH_CLAIMS = 3
STAND_IN_MODEL_ID = "scripted-intents"


class ProposalRefused(ValueError):
    """A proposal run cannot be started or changed as asked; the message says why. Nothing was written."""


class InputRejected(ValueError):
    """A client's candidates or vectors were refused; nothing was written. `status` is the HTTP status to answer."""

    def __init__(self, message: str, *, code: str = "invalid", status: int = 422, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.details = details


def lease_seconds() -> int:
    return int(getattr(settings, "WAYMARK_INTENT_LEASE_SECONDS", 300))


# -- start and cancel -------------------------------------------------------------------------------------------------


def intent_proposal_start(
    *,
    actor: Actor,
    window_from: datetime | None = None,
    window_to: datetime | None = None,
    intent: str = "",
    failed_only: bool = False,
    only_new: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    scheduled: bool = False,
    enqueue: bool = True,
    source: str = "",
) -> IntentProposalRun:
    """Queue a proposal run over the selected stored runs (resolved into batches now); its first step is enqueued on
    commit. ProposalRefused when the selection is empty or too large, or a parameter is out of range. `source`
    keeps the selection to that source's runs (the demo's own: intents.demo).

    A scheduled run takes the oldest MAX_RUNS runs of a larger selection (the next schedule takes the rest)."""
    require_role(actor, Role.OPERATOR, doing="starting an intent analysis run", system=True)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ProposalRefused(f"the batch size must be a whole number from 1 to {MAX_BATCH_SIZE}")
    if window_from and window_to and window_from >= window_to:
        raise ProposalRefused("the window must end after it starts")
    intent = (intent or "").strip()
    if len(intent) > 200:
        raise ProposalRefused("the intent filter is longer than 200 characters")
    selection = selectors.runs_for_selection(
        window_from=window_from,
        window_to=window_to,
        intent=intent,
        failed_only=failed_only,
        only_new=only_new,
        source=source,
    )
    rows = list(selection.values_list("id", "source", "external_id")[: MAX_RUNS + 1])
    if not rows:
        raise ProposalRefused("no stored run matches this selection")
    if len(rows) > MAX_RUNS:
        if not scheduled:
            raise ProposalRefused(f"more than {MAX_RUNS} runs match; narrow the window or the filters")
        rows = rows[:MAX_RUNS]
    chunks = [rows[index : index + batch_size] for index in range(0, len(rows), batch_size)]
    run = IntentProposalRun(
        started_by=actor.user,
        scheduled=scheduled,
        window_from=window_from,
        window_to=window_to,
        intent_filter=intent,
        failed_only=failed_only,
        only_new=only_new,
        batch_size=batch_size,
        scripted=model_is_scripted(),
        runs_total=len(rows),
        batches_total=len(chunks),
    )
    with transaction.atomic(durable=True):
        run.save()
        batches = IntentProposalBatch.objects.bulk_create(
            [
                IntentProposalBatch(
                    run=run, seq=number, trajectory_ids=[f"{source}:{external}" for _, source, external in chunk]
                )
                for number, chunk in enumerate(chunks, start=1)
            ]
        )
        IntentBatchRun.objects.bulk_create(
            [
                IntentBatchRun(batch=batch, trajectory_run_id=run_id)
                for batch, chunk in zip(batches, chunks, strict=True)
                for run_id, _, _ in chunk
            ]
        )
        audit_record(
            actor=actor,
            verb="intent_proposal.start",
            target=run,
            after={
                "runs": len(rows),
                "batches": len(chunks),
                "batch_size": batch_size,
                "window_from": window_from.isoformat() if window_from else None,
                "window_to": window_to.isoformat() if window_to else None,
                "intent": intent,
                "failed_only": failed_only,
                "only_new": only_new,
                "scheduled": scheduled,
                **({"source": source} if source else {}),
            },
        )
        if enqueue:
            _enqueue_on_commit(run.pk)
    return run


def _enqueue_on_commit(run_id: int) -> None:
    def send() -> None:
        from .tasks import intent_proposal_step

        intent_proposal_step.delay(run_id)

    transaction.on_commit(send)


def intent_proposal_cancel(*, actor: Actor, run: IntentProposalRun) -> IntentProposalRun:
    """Stop a run: a queued run (or one nobody holds) stops now, a running one after its current batch. Candidates
    already stored stay."""
    require_role(actor, Role.OPERATOR, doing="cancelling an intent analysis run", system=True)
    with transaction.atomic(durable=True):
        locked = IntentProposalRun.objects.select_for_update().get(pk=run.pk)
        if locked.is_finished:
            raise ProposalRefused(f"proposal run {locked.pk} has ended already ({locked.status})")
        before = {"status": locked.status}
        if locked.status == Status.RUNNING and locked.lease_lives():
            locked.cancel_requested = True
            locked.save(update_fields=["cancel_requested"])
        else:
            _finish_fields(locked, Status.CANCELLED)
            locked.save()
            _cancel_pending_batches(locked)
        audit_record(
            actor=actor, verb="intent_proposal.cancel", target=locked, before=before, after={"status": locked.status}
        )
    return locked


def _cancel_pending_batches(run: IntentProposalRun) -> None:
    IntentProposalBatch.objects.filter(run=run, status__in=[BatchStatus.PENDING, BatchStatus.RUNNING]).update(
        status=BatchStatus.CANCELLED, finished_at=timezone.now()
    )


def _finish_fields(run: IntentProposalRun, status: str, error: str = "") -> None:
    run.status = status
    run.error = error[:4000]
    lease_clear(run)
    run.finished_at = timezone.now()
    run.updated_at = run.finished_at


# -- one step: one batch ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepResult:
    run: IntentProposalRun
    batch: IntentProposalBatch | None
    next_step: bool


def _claim(run_id: int, worker: str, now: datetime) -> IntentProposalRun | None:
    taken = lease_claim(
        IntentProposalRun.objects.filter(pk=run_id, status__in=IntentProposalRun.OPEN),
        owner=worker,
        seconds=lease_seconds(),
        now=now,
        status=Status.RUNNING,
        attempts=F("attempts") + 1,
        started_at=Coalesce(F("started_at"), Value(now)),
        updated_at=now,
    )
    if not taken:
        return None
    return IntentProposalRun.objects.get(pk=run_id)


def lease_wait(run_id: int) -> float | None:
    """Seconds until the lease of an open run runs out (None: finished, or nobody holds it)."""
    return leases.lease_wait(IntentProposalRun.objects.filter(pk=run_id, status__in=IntentProposalRun.OPEN))


def _heartbeat(run: IntentProposalRun, worker: str) -> None:
    """Renew the lease; LeaseLost when another worker took the run, RunCancelled when an operator asked to stop."""
    lease_heartbeat(
        IntentProposalRun.objects.filter(pk=run.pk, status=Status.RUNNING),
        owner=worker,
        seconds=lease_seconds(),
        what=f"proposal run {run.pk}",
        cancelled=Q(cancel_requested=True),
    )


def _release(run: IntentProposalRun, worker: str, error: str) -> None:
    lease_release(
        IntentProposalRun.objects.filter(pk=run.pk), owner=worker, error=error[:4000], updated_at=timezone.now()
    )


def _end(run: IntentProposalRun, worker: str, status: str, error: str = "") -> IntentProposalRun:
    with transaction.atomic(durable=True):
        locked = IntentProposalRun.objects.select_for_update().get(pk=run.pk)
        if locked.lease_owner != worker or locked.is_finished:
            return locked
        before = {"status": locked.status}
        _finish_fields(locked, status, error)
        locked.save()
        if status != Status.SUCCEEDED:
            _cancel_pending_batches(locked)
        audit_record(
            actor=Actor.system(),
            verb="intent_proposal.finish",
            target=locked,
            before=before,
            after={
                "status": status,
                "batches_done": locked.batches_done,
                "batches_malformed": locked.batches_malformed,
                "batches_failed": locked.batches_failed,
                "candidates": locked.candidates_count,
                "error": error[:500],
            },
        )
    return locked


def proposal_model(batch: IntentProposalBatch, briefs: Sequence[RunBrief]) -> ChatModel:
    """The model a batch is sent to: the configured one, or with no model key a deterministic stand-in that answers
    from the batch itself (each run's declared label; a hindsight intent for a failed run). Tests replace this."""
    if model_is_scripted():
        redactor = current_redactor()
        return ScriptedChatModel([stand_in_reply(briefs, redactor.text)], cycle=True, model_id=STAND_IN_MODEL_ID)
    return get_chat_model()


def intent_proposal_step(*, run_id: int, worker: str, now: datetime | None = None) -> StepResult | None:
    """Work on the run's next batch if the run is free; None when another worker holds it or it has ended."""
    run = _claim(run_id, worker, now or timezone.now())
    if run is None:
        return None
    if run.attempts > MAX_CRASHES:
        reason = f"gave up after {MAX_CRASHES} attempts in a row without progress"
        last = f": {run.error}" if run.error else " (the worker died; see its logs)"
        return StepResult(_end(run, worker, Status.FAILED, reason + last), None, False)
    if run.cancel_requested:
        return StepResult(_end(run, worker, Status.CANCELLED), None, False)
    batch = (
        IntentProposalBatch.objects.filter(run=run, status__in=[BatchStatus.PENDING, BatchStatus.RUNNING])
        .order_by("seq")
        .first()
    )
    if batch is None:  # every batch settled: a run with a failed batch has failed (its other batches' work stays)
        status = Status.FAILED if run.batches_failed else Status.SUCCEEDED
        return StepResult(_end(run, worker, status, _summary(run)), None, False)
    try:
        outcome = _work(run, batch, worker)
    except LeaseLost:
        log.warning("intent proposal %s: lease lost, another worker goes on", run_id)
        return None
    except RunCancelled:
        return StepResult(_end(run, worker, Status.CANCELLED), batch, False)
    except OSError as error:  # transient (model timeouts and outages too): Celery retries the step with backoff
        _release(run, worker, f"{type(error).__name__}: {error}")
        raise
    return _settle(run, batch, worker, outcome)


def _summary(run: IntentProposalRun) -> str:
    """What went wrong in a run whose batches have all settled, with the counts: the first failed batch's reason,
    and what the others kept (their candidates are stored: each batch settles on its own)."""
    problems = []
    if run.batches_failed:
        seq, error = run.batches.filter(status=BatchStatus.FAILED).order_by("seq").values_list("seq", "error")[0]
        problems.append(f"{run.batches_failed} of {run.batches_total} batches failed (batch {seq}: {error})")
    if run.batches_malformed:
        problems.append(f"{run.batches_malformed} batch(es) malformed twice")
    if problems:
        answered = run.batches_done - run.batches_failed - run.batches_malformed
        kept = f"{run.candidates_count} candidate{'' if run.candidates_count == 1 else 's'} kept"
        problems.append(f"{answered} succeeded: {kept}")
    return "; ".join(problems)


@dataclass
class BatchOutcome:
    status: str
    candidates: tuple[IntentCandidate, ...] = ()
    call_ids: list[int] = field(default_factory=list)
    error: str = ""
    run_ids: dict[str, int] = field(default_factory=dict)
    embeddings: list[Embedding] = field(default_factory=list)


def _claim_batch(batch: IntentProposalBatch) -> None:
    """Another attempt: the previous one's transient error (if any) is no longer the batch's reason."""
    IntentProposalBatch.objects.filter(pk=batch.pk).update(
        status=BatchStatus.RUNNING, attempts=F("attempts") + 1, error=""
    )
    batch.status = BatchStatus.RUNNING
    batch.attempts += 1
    batch.error = ""


def _record_rejection(batch: IntentProposalBatch, *, attempt: int, call_id: int | None, text: str, error: str) -> None:
    """Keep a malformed reply on the batch at once (its own transaction), so nothing is lost if the worker dies."""
    entry = {"attempt": attempt, "model_call_id": call_id, "error": error[:2000], "text": text}
    batch.rejected_replies = [*batch.rejected_replies, entry]
    batch.raw_reply = text
    batch.error = error[:4000]
    with transaction.atomic(durable=True):
        IntentProposalBatch.objects.filter(pk=batch.pk).update(
            rejected_replies=batch.rejected_replies, raw_reply=batch.raw_reply, error=batch.error
        )
        IntentProposalRun.objects.filter(pk=batch.run_id).update(malformed_replies=F("malformed_replies") + 1)
    if call_id is not None:
        model_call_note_rejected_output(call_id=call_id, error=error)


def _note_transient(batch: IntentProposalBatch, call_id: int | None, error: BaseException) -> None:
    """A transient model error (a timeout, 429/5xx past the SDK's retries, a body that is no reply): the step is
    retried, so keep the reason and the call on the batch now; if its claims run out, the batch fails with it."""
    batch.error = f"{type(error).__name__}: {error}"[:4000]
    if call_id is not None:
        batch.model_call_ids = [*batch.model_call_ids, call_id]
    with transaction.atomic(durable=True):
        IntentProposalBatch.objects.filter(pk=batch.pk).update(error=batch.error, model_call_ids=batch.model_call_ids)


def _work(run: IntentProposalRun, batch: IntentProposalBatch, worker: str) -> BatchOutcome:
    if batch.attempts >= MAX_BATCH_CLAIMS:
        if batch.error:  # each claim's step raised a transient error (_note_transient): its retries are exhausted
            return BatchOutcome(BatchStatus.FAILED, error=f"gave up after {batch.attempts} attempts: {batch.error}")
        return BatchOutcome(BatchStatus.FAILED, error=f"the batch was claimed {batch.attempts} times without an end")
    _claim_batch(batch)
    stored = selectors.batch_runs(batch)
    if not stored:
        return BatchOutcome(BatchStatus.FAILED, error="the batch's runs no longer exist")
    briefs = [RunBrief(as_trajectory_run(item), task=item.task, declared_intent=item.intent) for item in stored]
    cores = [brief.run for brief in briefs]
    run_ids = {brief.run.trajectory_id: item.pk for brief, item in zip(briefs, stored, strict=True)}
    redactor = current_redactor()
    first_part = render_batch(briefs, redactor.text)
    recorded = RecordedChatModel(proposal_model(batch, briefs), ROLE, subject=batch)
    call_ids: list[int] = []
    parts: tuple[str, ...] = (first_part,)
    for attempt in (1, 2):
        request = ModelRequest(role=ROLE, system=SYSTEM, parts=parts, max_tokens=MAX_TOKENS)
        try:
            response = recorded.complete(request)
        except ModelError as error:
            if isinstance(error, OSError):
                _note_transient(batch, recorded.last_call.pk if recorded.last_call else None, error)
                raise
            if recorded.last_call is not None:
                call_ids.append(recorded.last_call.pk)
            return BatchOutcome(BatchStatus.FAILED, call_ids=call_ids, error=f"{type(error).__name__}: {error}")
        call_ids.append(recorded.last_call.pk)
        _heartbeat(run, worker)
        try:
            candidates = parse_intent_reply(cores, response.text)
        except MalformedModelOutput as error:
            _record_rejection(batch, attempt=attempt, call_id=call_ids[-1], text=response.text, error=str(error))
            parts = (first_part, retry_part(str(error), response.text))
            continue
        embeddings = missing_embeddings(get_embedder(), [candidate.intent for candidate in candidates])
        return BatchOutcome(
            BatchStatus.SUCCEEDED, candidates, call_ids, batch.error, run_ids=run_ids, embeddings=embeddings
        )
    return BatchOutcome(BatchStatus.MALFORMED, call_ids=call_ids, error=batch.error)


def _evidence_rows(candidate: IntentCandidate, run_ids: Mapping[str, int]) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run_ids.get(item.trajectory_id),
            "trajectory_id": item.trajectory_id,
            "start": item.start,
            "end": item.end,
        }
        for item in candidate.evidence
    ]


def _candidate_row(
    candidate: IntentCandidate, run_ids: Mapping[str, int], *, source: str, batch=None, submitted_by=None
) -> IntentCandidateRecord:
    return IntentCandidateRecord(
        source=source,
        candidate_id=candidate.candidate_id,
        intent=candidate.intent,
        normalized=normalize_intent(candidate.intent)[:300],
        kind=candidate.kind.value,
        evidence=_evidence_rows(candidate, run_ids),
        actual_outcome=candidate.actual_outcome,
        limitations=list(candidate.limitations),
        schema_version=candidate.schema_version,
        batch=batch,
        submitted_by=submitted_by,
    )


def _store_candidates(rows: list[IntentCandidateRecord], source: str) -> tuple[list[str], list[str]]:
    """Insert the candidates new to `source`; (created ids, existing ids). Candidates are never rewritten."""
    existing = set(
        IntentCandidateRecord.objects.filter(
            source=source, candidate_id__in=[row.candidate_id for row in rows]
        ).values_list("candidate_id", flat=True)
    )
    new = [row for row in rows if row.candidate_id not in existing]
    IntentCandidateRecord.objects.bulk_create(new, ignore_conflicts=True)
    return [row.candidate_id for row in new], sorted(existing)


def _settle(run: IntentProposalRun, batch: IntentProposalBatch, worker: str, outcome: BatchOutcome) -> StepResult:
    """Record the batch's end, its candidates and their embeddings, and hand the run to its next step (one
    transaction, written only while we hold the lease)."""
    now = timezone.now()
    created: list[str] = []
    with transaction.atomic(durable=True):
        held = IntentProposalRun.objects.select_for_update().filter(pk=run.pk, lease_owner=worker).first()
        if held is None or held.is_finished:
            log.warning("intent proposal %s: lease lost before batch %s settled", run.pk, batch.seq)
            return StepResult(held or run, batch, False)
        if outcome.status == BatchStatus.SUCCEEDED:
            rows = [
                _candidate_row(item, outcome.run_ids, source=IntentCandidateRecord.MODEL_SOURCE, batch=batch)
                for item in outcome.candidates
            ]
            created, _ = _store_candidates(rows, IntentCandidateRecord.MODEL_SOURCE)
            Embedding.objects.bulk_create(outcome.embeddings, ignore_conflicts=True)
        IntentProposalBatch.objects.filter(pk=batch.pk).update(
            status=outcome.status,
            model_call_ids=[*batch.model_call_ids, *outcome.call_ids],
            candidates_count=len(outcome.candidates),
            error=outcome.error[:4000],
            finished_at=now,
        )
        held.batches_done += 1
        held.candidates_count += len(created)
        held.batches_malformed += outcome.status == BatchStatus.MALFORMED
        held.batches_failed += outcome.status == BatchStatus.FAILED
        held.attempts = 0
        held.error = ""
        lease_clear(held)
        held.updated_at = now
        held.save(
            update_fields=[
                "batches_done",
                "candidates_count",
                "batches_malformed",
                "batches_failed",
                "attempts",
                "error",
                "lease_owner",
                "lease_expires_at",
                "updated_at",
            ]
        )
        _enqueue_on_commit(run.pk)
    batch.refresh_from_db()
    return StepResult(held, batch, True)


# -- the schedule and the reaper --------------------------------------------------------------------------------------


def propose_every_minutes() -> int:
    return int(getattr(settings, "WAYMARK_INTENT_PROPOSE_EVERY_MINUTES", 60) or 0)


def intent_proposals_schedule() -> IntentProposalRun | None:
    """The beat's job: start a proposal run over the stored runs no proposal has covered yet. None when the
    schedule is off (WAYMARK_INTENT_PROPOSE_EVERY_MINUTES = 0), a scheduled run is still open, or nothing is new."""
    if propose_every_minutes() <= 0 or selectors.open_scheduled_run() is not None:
        return None
    try:
        return intent_proposal_start(actor=Actor.system(), only_new=True, scheduled=True)
    except ProposalRefused:
        return None


def intent_proposals_to_resume(now: datetime | None = None) -> list[int]:
    """Open runs nobody holds: a running run whose lease lapsed (its worker died), a queued run whose message was
    lost (queued for over a minute with no lease)."""
    now = now or timezone.now()
    lapsed = Q(status=Status.RUNNING) & lease_free(now)
    lost = Q(status=Status.QUEUED, created_at__lt=now - timedelta(minutes=1), lease_expires_at__isnull=True)
    return list(IntentProposalRun.objects.filter(lapsed | lost).values_list("pk", flat=True)[:100])


# -- what API clients post --------------------------------------------------------------------------------------------

CANDIDATE_KEYS = {"intent", "kind", "evidence", "actual_outcome", "limitations"}
MAX_CLIENT_CANDIDATES = 200
MAX_CLIENT_EVIDENCE = 2000
EMBEDDER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


def client_source(actor: Actor) -> str:
    return f"client:{actor.user.pk}" if actor.user is not None else "client:system"


@dataclass(frozen=True)
class SubmitResult:
    created: list[str]
    existing: list[str]
    records: list[IntentCandidateRecord]


def _evidence_ids(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    ids: list[str] = []
    for row in rows:
        evidence = row.get("evidence")
        if isinstance(evidence, list):
            ids.extend(
                item["trajectory_id"]
                for item in evidence
                if isinstance(item, dict) and isinstance(item.get("trajectory_id"), str)
            )
    return ids


def intent_candidates_submit(*, actor: Actor, rows: Sequence[Any]) -> SubmitResult:
    """A client's own labeled intents, validated exactly as model output (spec §2.3) against the stored runs they
    cite. InputRejected (422) names the first bad item; nothing is written then. Candidates this client posted
    before are reported as existing and left as they were. Evidence must cite production runs (an evaluation run
    is unknown here: intents.selectors.runs_by_trajectory_ids)."""
    # Labels and vectors come from agents, reviewers and operators (and the system), as the scope intents:write says.
    require_role(
        actor, Role.REVIEWER, Role.OPERATOR, agents=True, system=True, doing="posting intent labels and vectors"
    )
    if not isinstance(rows, list | tuple) or not rows:
        raise InputRejected("intents must be a non-empty list", details={"index": None})
    if len(rows) > MAX_CLIENT_CANDIDATES:
        raise InputRejected(f"at most {MAX_CLIENT_CANDIDATES} intents per request", details={"index": None})
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputRejected(f"intents[{index}] must be an object", details={"index": index})
        unknown = sorted(set(row) - CANDIDATE_KEYS)
        if unknown:
            raise InputRejected(
                f"intents[{index}] has unknown fields: {', '.join(unknown)}",
                details={"index": index, "fields": unknown},
            )
        label = row.get("intent")
        if isinstance(label, str) and (problem := plain_identifier_error(label.strip())):  # labels name intents
            raise InputRejected(f"intents[{index}].intent {problem}", details={"index": index, "field": "intent"})
    trajectory_ids = _evidence_ids(rows)
    if len(trajectory_ids) > MAX_CLIENT_EVIDENCE:
        raise InputRejected(f"at most {MAX_CLIENT_EVIDENCE} evidence items per request", details={"index": None})
    stored = selectors.runs_by_trajectory_ids(trajectory_ids)
    cores = [as_trajectory_run(item) for item in stored]
    run_ids = {core.trajectory_id: item.pk for core, item in zip(cores, stored, strict=True)}
    for index, row in enumerate(rows):
        try:
            parse_intent_candidates(cores, {"intents": [row]})
        except MalformedModelOutput as error:
            raise InputRejected(f"intents[{index}]: {error}", details={"index": index, "error": str(error)}) from None
    candidates = parse_intent_candidates(cores, {"intents": list(rows)})
    source = client_source(actor)
    embeddings = missing_embeddings(get_embedder(), [candidate.intent for candidate in candidates])
    records = [_candidate_row(item, run_ids, source=source, submitted_by=actor.user) for item in candidates]
    with transaction.atomic(durable=True):
        created, existing = _store_candidates(records, source)
        Embedding.objects.bulk_create(embeddings, ignore_conflicts=True)
        audit_record(
            actor=actor,
            verb="intent_candidates.submit",
            target=("intents.intentcandidaterecord", source),
            after={"created": created, "existing": existing},
        )
    kept = {
        row.candidate_id: row
        for row in IntentCandidateRecord.objects.filter(
            source=source, candidate_id__in=[item.candidate_id for item in candidates]
        )
    }
    return SubmitResult(
        created, existing, [kept[item.candidate_id] for item in candidates if item.candidate_id in kept]
    )


@dataclass(frozen=True)
class VectorsResult:
    embedder: str
    dimensions: int
    created: int
    existing: int


def client_embedder_name(actor: Actor, name: str) -> str:
    """Client vectors live under `client:<user id>:<name>`, so no client writes into another's or Waymark's space."""
    owner = actor.user.pk if actor.user is not None else "system"
    return f"client:{owner}:{name}"


def intent_vectors_submit(*, actor: Actor, embedder: str, items: Sequence[Mapping[str, Any]]) -> VectorsResult:
    """A client's own vectors for texts under its own embedder name. All of one embedder's vectors share one
    dimension count; each (text, embedder) is stored once and never changed. InputRejected: 422 for a bad name,
    vector or dimension count, 409 for a text stored before with a different vector, 403 for a person without a
    role; nothing is written then."""
    # Labels and vectors come from agents, reviewers and operators (and the system), as the scope intents:write says.
    require_role(
        actor, Role.REVIEWER, Role.OPERATOR, agents=True, system=True, doing="posting intent labels and vectors"
    )
    if not isinstance(embedder, str) or not EMBEDDER_NAME.match(embedder):
        raise InputRejected(
            "the embedder name must be 1 to 80 letters, digits, dots, dashes or underscores", details={"index": None}
        )
    if not items:
        raise InputRejected("items must be a non-empty list", details={"index": None})
    name = client_embedder_name(actor, embedder)
    vectors: dict[str, tuple[str, bytes]] = {}
    dimensions: int | None = None
    for index, item in enumerate(items):
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputRejected(f"items[{index}].text must be a non-blank string", details={"index": index})
        try:
            vector = np.asarray(item.get("vector"), dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise InputRejected(f"items[{index}].vector must be a list of numbers", details={"index": index}) from None
        if vector.ndim != 1 or not 1 <= vector.size <= MAX_DIMENSIONS:
            raise InputRejected(
                f"items[{index}].vector must hold 1 to {MAX_DIMENSIONS} numbers", details={"index": index}
            )
        if dimensions is None:
            dimensions = int(vector.size)
        elif vector.size != dimensions:
            raise InputRejected(
                f"items[{index}].vector has {vector.size} dimensions; the first item has {dimensions}",
                details={"index": index},
            )
        with np.errstate(over="ignore", invalid="ignore"):
            as32 = vector.astype(np.float32)
        if not np.isfinite(as32).all():
            raise InputRejected(f"items[{index}].vector must be finite (as float32)", details={"index": index})
        if not np.any(as32):
            raise InputRejected(f"items[{index}].vector must not be all zeros", details={"index": index})
        digest = text_digest(text)
        packed = as_bytes(as32)
        if digest in vectors and vectors[digest][1] != packed:
            raise InputRejected(f"items[{index}] repeats a text with a different vector", details={"index": index})
        vectors[digest] = (text, packed)
    known_dimensions = (
        Embedding.objects.filter(embedder=name).values_list("dimensions", flat=True).order_by("id").first()
    )
    if known_dimensions is not None and known_dimensions != dimensions:
        raise InputRejected(
            f"embedder {embedder!r} has {known_dimensions}-dimensional vectors; these have {dimensions}",
            details={"index": None, "dimensions": known_dimensions},
        )
    with transaction.atomic(durable=True):
        stored = {
            row.text_digest: bytes(row.vector)
            for row in Embedding.objects.filter(embedder=name, text_digest__in=list(vectors))
        }
        for index, item in enumerate(items):
            digest = text_digest(item["text"])
            if digest in stored and stored[digest] != vectors[digest][1]:
                raise InputRejected(
                    f"items[{index}]: this text has a different vector under {embedder!r} already; vectors are "
                    "immutable (use a new embedder name for a new model)",
                    code="vector_conflict",
                    status=409,
                    details={"index": index},
                )
        new = [
            Embedding(
                text_digest=digest,
                embedder=name,
                dimensions=dimensions,
                vector=packed,
                text=text,
                submitted_by=actor.user,
            )
            for digest, (text, packed) in vectors.items()
            if digest not in stored
        ]
        Embedding.objects.bulk_create(new, ignore_conflicts=True)
        audit_record(
            actor=actor,
            verb="intent_vectors.submit",
            target=("intents.embedding", name),
            after={"created": len(new), "existing": len(vectors) - len(new), "dimensions": dimensions},
        )
    return VectorsResult(name, int(dimensions or 0), len(new), len(vectors) - len(new))
