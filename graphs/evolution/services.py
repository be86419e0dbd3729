"""Every write of an evolution run: start, one step, cancel, reap.

A run advances one step at a time. The first step takes the baseline (the reference loop with max_rounds=0);
each later step runs exactly one round (max_rounds=1, the retained evaluation passed as the baseline). Everything a
round writes goes to the workspace's revision chains through the reference stores, checkpoints included, in three
transactions a round (graphs/evolution/stores.py: after the refiner, after the evaluation, and the record), so a step
that dies anywhere is finished by the next one: it resumes the round from its checkpoints with no second model call
after checkpoint #1, no second evaluation and no second accept. What the next step reads from the run row (the
baseline and retained best, the meter, the rounds done) is written in the transaction of the write that makes it
true, and a step first ends a run whose last recorded round called for it, so a resumed run decides exactly as it
would have without the crash. A step holds the run's lease (heartbeat at every stage and model call, at most once a
second) until its round's record, which gives it up; a redelivered message or the reaper re-enqueues a run whose
lease ran out. The task that ran a step takes the next one itself while its time slice lasts (StepsHere), else sends it
as a message.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common import leases, statements
from common.fixed_queries import FixedQuery
from common.leases import RELEASED, LeaseLost, RunCancelled, lease_clear, lease_free, lease_transaction
from graphs.core.budget import Budget, HookedModel, Hooks, Meter
from graphs.core.evaluation import Evaluation, EvaluationPending
from graphs.core.evolve import EvolveConfig, evolve
from graphs.core.gates import ObjectiveGate, PairedGate, StrictImprovementGate, TieAcceptingGate
from graphs.core.objectives import ObjectiveContext, ObjectiveSpec
from graphs.core.stores import HeadMoved
from llm.core import ModelRequest, ModelResponse, ScriptedChatModel
from llm.factory import get_chat_model, model_is_scripted
from llm.recording import RecordedChatModel
from llm.selectors import calls_for_subject_prefix
from llm.services import model_call_succeed_statement

from ..models import EvolutionRound, EvolutionRun, Workspace
from .sources import TWO_HOP, DeclaredContext, build_sources, check_evaluator
from .stores import (
    REJECTIONS,
    ROUND_SUBJECT,
    DbCheckpointStore,
    DbRevisionStore,
    RunBaselineRecorder,
    RunCheckpointStore,
    RunGraphStore,
    RunRejectionStore,
    RunTraceStore,
    round_subject,
    run_heads_query,
)

log = logging.getLogger(__name__)

Status = EvolutionRun.Status
OPEN = (Status.QUEUED, Status.RUNNING, Status.WAITING)
MAX_ROUNDS = 50
MAX_CRASHES = 5
HEARTBEAT_SECONDS = 1.0
GATE_KINDS = ("tie", "strict", "paired", "objective")
HOST_KEYS = ("stride", "validation_tasks", "script")
CONFIG_KEYS = {
    "task_description": str,
    "max_rejected_streak": int,
    "cycle_policy": str,
    "role_retries": int,
    "stale_trace_policy": str,
    "failing_sample": int,
    "passing_sample": int,
    "success_threshold": float,
    "seed": int,
    "stride": int,
    "refiner_context_cap": int,
}


class EvolutionRefused(ValueError):
    """A run cannot be started or changed as asked; the message says why. Nothing was written."""


def lease_seconds() -> int:
    return int(getattr(settings, "WAYMARK_EVOLUTION_LEASE_SECONDS", 300))


# -- start ------------------------------------------------------------------------------------------------------------


def _clean_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    config = dict(config or {})
    unknown = sorted(set(config) - set(CONFIG_KEYS) - {"validation_tasks"})
    if unknown:
        raise EvolutionRefused(f"unknown evolution settings: {', '.join(unknown)}")
    clean: dict[str, Any] = {}
    for key, kind in CONFIG_KEYS.items():
        value = config.get(key)
        if value is None or value == "":
            continue
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise EvolutionRefused(f"{key} must be a {kind.__name__}")
        clean[key] = value
    if "validation_tasks" in config:
        clean["validation_tasks"] = config["validation_tasks"]
    return clean


def build_gate(spec: Mapping[str, Any]):
    """The gate a run's stored gate document names (ValueError for a bad one)."""
    kind = spec.get("kind", "tie")
    params = {key: value for key, value in spec.items() if key not in ("kind", "objective", "context")}
    if kind == "tie":
        return TieAcceptingGate(**params)
    if kind == "strict":
        return StrictImprovementGate(**params)
    if kind == "paired":
        return PairedGate(**params)
    if kind == "objective":
        objective = ObjectiveSpec.from_document(spec["objective"])
        context = ObjectiveContext.from_document(spec["context"])
        return ObjectiveGate(objective, context)
    raise ValueError(f"unknown gate {kind!r}; choose one of {', '.join(GATE_KINDS)}")


def _config_for(run: EvolutionRun, *, max_rounds: int) -> EvolveConfig:
    values = {key: value for key, value in run.config.items() if key not in HOST_KEYS}
    values.setdefault("task_description", run.workspace.task_description or "tasks in this workspace")
    if run.evaluator == TWO_HOP:
        values.setdefault("cycle_policy", "allow")
        values.setdefault("role_retries", 0)
    objective = {}
    if run.gate.get("kind") == "objective":
        objective = {
            "objective": ObjectiveSpec.from_document(run.gate["objective"]),
            "objective_context": ObjectiveContext.from_document(run.gate["context"]),
        }
    return EvolveConfig(
        **values,
        **objective,
        max_rounds=max_rounds,
        workspace=run.workspace.slug,
        budget=Budget.from_document(run.budget or {}),
    )


def _validation_tasks(workspace: Workspace, limit: int = 20) -> list[dict[str, str]]:
    from trajectories.selectors import runs_guided_by

    runs, _ = runs_guided_by(workspace.slug, offset=0, limit=1000)
    tasks: dict[str, dict[str, str]] = {}
    for run in reversed(runs):
        if run.task and run.task not in tasks:
            tasks[run.task] = {"task_id": run.external_id or f"run-{run.pk}", "task": run.task}
        if len(tasks) >= limit:
            break
    return list(tasks.values())


def evolution_start(
    *,
    actor: Actor,
    workspace: Workspace,
    rounds: int,
    evaluator: str,
    gate: Mapping[str, Any] | None = None,
    budget: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    script: list[str] | None = None,
    enqueue: bool = True,
) -> EvolutionRun:
    """Queue a run of `rounds` rounds; its first step is enqueued on commit. EvolutionRefused says why not.

    `script` (seeding and tests only): scripted refiner replies, reply i for the run's round i, used when no model
    key is set. `enqueue=False` leaves the steps to the caller (seed_demo runs them in process)."""
    require_role(actor, Role.OPERATOR, doing="starting an evolution run", system=True)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise EvolutionRefused(f"rounds must be a whole number from 1 to {MAX_ROUNDS}")
    try:
        check_evaluator(evaluator)
        gate = dict(gate or {"kind": "tie"})
        build_gate(gate)
        budget_doc = Budget.from_document(dict(budget or {})).to_document()
    except Exception as error:  # any document a gate or budget cannot be built from is the caller's error
        raise EvolutionRefused(str(error)) from None
    clean = _clean_config(config)
    if script is not None:
        clean["script"] = [str(reply) for reply in script]
    if evaluator == "agents" and "validation_tasks" not in clean:
        clean["validation_tasks"] = _validation_tasks(workspace)
        if not clean["validation_tasks"]:
            raise EvolutionRefused("the agents evaluator needs tasks: no stored run of this workspace has a task")
    run = EvolutionRun(
        workspace=workspace,
        config=clean,
        gate=gate,
        budget=budget_doc,
        evaluator=evaluator,
        rounds_planned=rounds,
        started_by=actor.user,
    )
    try:
        _config_for(run, max_rounds=rounds)
    except (ValueError, TypeError) as error:
        raise EvolutionRefused(str(error)) from None
    try:
        with transaction.atomic(durable=True):
            run.save()
            audit_record(
                actor=actor,
                verb="evolution.start",
                target=run,
                after={"workspace": workspace.slug, "rounds": rounds, "evaluator": evaluator, "gate": gate["kind"]},
            )
            if enqueue:
                _enqueue_on_commit(run.pk)
    except IntegrityError:
        raise EvolutionRefused(
            f"workspace {workspace.slug!r} has a run in progress; wait for it or cancel it"
        ) from None
    return run


def slice_seconds() -> float:
    return float(getattr(settings, "WAYMARK_EVOLUTION_SLICE_SECONDS", 60))


class StepsHere:
    """A task's offer to take the next steps of the run it is stepping itself (graphs.tasks.evolution_step): while
    it is open and its time slice lasts, a step that hands the run on leaves the next step to the task instead of
    sending a message; the task takes it after the step returns, and sends it like any step once the slice is over."""

    _open = threading.local()

    def __init__(self, run_id: int, seconds: float) -> None:
        self.run_id = run_id
        self.until = time.monotonic() + seconds
        self.left = False

    def __enter__(self) -> StepsHere:
        self.outer, StepsHere._open.offer = getattr(StepsHere._open, "offer", None), self
        return self

    def __exit__(self, *exc: object) -> None:
        StepsHere._open.offer = self.outer

    def take(self) -> bool:
        """Whether the step that just returned left its run's next step here (said once)."""
        left, self.left = self.left, False
        return left

    @classmethod
    def keep(cls, run_id: int) -> bool:
        """Called as a step hands `run_id` on (after its commit): True when the open offer keeps the next step."""
        offer = getattr(cls._open, "offer", None)
        if offer is None or offer.run_id != run_id or offer.left or time.monotonic() >= offer.until:
            return False
        offer.left = True
        return True


def _enqueue_on_commit(run_id: int, countdown: float | None = None) -> None:
    """Hand the run to its next step once the transaction commits: a message, or the task that is stepping it
    (StepsHere)."""

    def send() -> None:
        from graphs.tasks import evolution_step

        if not countdown and StepsHere.keep(run_id):
            return
        if countdown:
            evolution_step.apply_async((run_id,), countdown=countdown)
        else:
            evolution_step.delay(run_id)

    transaction.on_commit(send)


# -- cancel -----------------------------------------------------------------------------------------------------------


def evolution_cancel(*, actor: Actor, run: EvolutionRun) -> EvolutionRun:
    """Stop a run between stages: queued or waiting runs stop now, a running step stops at its next stage."""
    from graphs.certification_services import run_ended_in_transaction
    from trajectories.job_services import jobs_expire

    require_role(actor, Role.OPERATOR, doing="cancelling an evolution run", system=True)

    with transaction.atomic(durable=True):
        locked = EvolutionRun.objects.select_for_update().get(pk=run.pk)
        if locked.is_finished:
            raise EvolutionRefused(f"run {locked.pk} has ended already ({locked.status})")
        before = {"status": locked.status}
        if locked.status == Status.RUNNING and locked.lease_lives():
            locked.cancel_requested = True
            locked.save(update_fields=["cancel_requested"])
        else:
            _finish_fields(locked, Status.CANCELLED, "cancelled")
            locked.save()
            _expire_jobs(locked.pk, jobs_expire)
            run_ended_in_transaction(run=locked)
        audit_record(
            actor=actor, verb="evolution.cancel", target=locked, before=before, after={"status": locked.status}
        )
    return locked


def _expire_jobs(run_id: int, jobs_expire) -> None:
    from trajectories.selectors import open_job_subjects

    from .jobs import SUBJECT_PREFIX

    for subject in open_job_subjects(f"{SUBJECT_PREFIX}{run_id}:"):
        jobs_expire(subject=subject)


def _finish_fields(run: EvolutionRun, status: str, reason: str, error: str = "") -> None:
    run.status = status
    run.stopped_reason = reason[:40]
    run.error = error[:4000]
    run.stage = ""
    lease_clear(run)
    run.finished_at = timezone.now()
    run.updated_at = run.finished_at


# -- one step ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    run: EvolutionRun
    heads: list[tuple[Any, ...]] | None  # the workspace's chains' heads (run_heads_query's rows), None: not read
    usage: dict[str, Any]  # the run's calls, output tokens and cost as the ledger holds them


def _claim(run_id: int, worker: str, now: datetime) -> Claimed | None:
    """Take the run and read it (with its workspace) in one statement, and in the same round trip the heads of its
    workspace's chains and its totals in the ledger; None when another worker holds it."""
    heads = run_heads_query(run_id)
    run, (usage, *read) = leases.lease_claim_row_reading(
        EvolutionRun.objects.filter(pk=run_id, status__in=OPEN),
        owner=worker,
        seconds=lease_seconds(),
        now=now,
        related=("workspace",),
        reads=[_usage_query(run_id), *([heads] if heads is not None else [])],
        status=Status.RUNNING,
        stage="claimed",
        attempts=F("attempts") + 1,
        started_at=Coalesce(F("started_at"), Value(now)),
        updated_at=now,
    )
    return Claimed(run, read[0] if read else None, _usage(usage)) if run is not None else None


def lease_wait(run_id: int) -> float | None:
    """Seconds until the lease of an open run runs out (None: the run is finished or free)."""
    return leases.lease_wait(EvolutionRun.objects.filter(pk=run_id, status__in=OPEN))


def _update_owned(run: EvolutionRun, worker: str, *, alone: bool = False, **fields: Any) -> None:
    """Write fields of a run we hold; LeaseLost when another worker took it over meanwhile. `alone`: committed by
    itself as a lease's own write (leases.lease_write_alone)."""
    fields.setdefault("updated_at", timezone.now())
    held = EvolutionRun.objects.filter(pk=run.pk, status=Status.RUNNING)
    write = leases.lease_write_alone if alone else leases.lease_write
    write(held, owner=worker, what=f"run {run.pk}", **fields)
    for key, value in fields.items():
        setattr(run, key, value)


class RunHooks(Hooks):
    """Stage hooks of one step: the run shows its stage, the lease is renewed, a cancel request stops the step, and
    the round's model calls are filed under the round in the ledger."""

    def __init__(self, run: EvolutionRun, worker: str, recorded: RecordedChatModel) -> None:
        self.run = run
        self.worker = worker
        self.recorded = recorded
        self.warnings: list[str] = []
        self.last_beat = time.monotonic()  # the claim just set the lease

    def _heartbeat(self, stage: str | None = None) -> None:
        """Renew the lease, show the stage and learn whether to stop, in one update; at most once a second (a
        cancel request is seen at the next stage after that), since a round's stages can follow each other fast."""
        now = time.monotonic()
        if now - self.last_beat < HEARTBEAT_SECONDS:
            return
        self.last_beat = now
        fields: dict[str, Any] = {"updated_at": timezone.now()}
        if stage is not None:
            fields["stage"] = stage
        with lease_transaction():
            leases.lease_heartbeat(
                EvolutionRun.objects.filter(pk=self.run.pk, status=Status.RUNNING),
                owner=self.worker,
                seconds=lease_seconds(),
                what=f"run {self.run.pk}",
                cancelled=Q(cancel_requested=True),
                why=f"cancelled before {stage or 'the next call'}",
                **fields,
            )

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._heartbeat(name)
        _, _, number = name.partition(":")
        if number.isdigit():
            self.recorded.subject = round_subject(self.run.pk, int(number))
        yield

    def on_model_call(self, role, request, response) -> None:
        self._heartbeat()

    def on_warning(self, message: str) -> None:
        self.warnings.append(message)


class RoundModel(RecordedChatModel):
    """The round's model on the ledger. Each call's `running` row is written before the call, in a transaction of its
    own as always (a worker that dies during the call leaves it for the reaper to mark abandoned, and the budget
    counts it); its reply is written in the statement of the step's next durable write (`store.writes_with`:
    checkpoint #1, where the loop first uses it, else the record or the step's last write), or before the round's
    next call, instead of in a commit of its own. So a reply is on record exactly when it is used, and a worker that
    dies between the reply and that write leaves the call as one that died during the call does."""

    def __init__(self, inner: Any, *, subject: tuple[str, str]) -> None:
        super().__init__(inner, subject=subject)
        self.replies: list[tuple[Any, ModelResponse, int, datetime]] = []  # (ledger row, reply, latency, at)

    def complete(self, request: ModelRequest) -> ModelResponse:
        if self.replies:  # the round asks again (a retry): the reply before goes on record first
            statements.send(self.reply_writes())
        return super().complete(request)

    def record_reply(self, call, response: ModelResponse, latency_ms: int):
        self.replies.append((call, response, latency_ms, timezone.now()))
        return call

    def reply_writes(self) -> list[statements.Statement]:
        """The writes of the replies not yet on record, handed over once (the caller sends them)."""
        replies, self.replies = self.replies, []
        return [
            model_call_succeed_statement(call=call, response=response, latency_ms=latency_ms, finished_at=finished_at)
            for call, response, latency_ms, finished_at in replies
        ]

    def write_replies_alone(self) -> None:
        """What a step that fails leaves of its replies, committed by themselves (their calls were paid for)."""
        if not self.replies:
            return
        try:
            statements.send(self.reply_writes())
        except Exception:  # the database itself failed: the rows stay `running`, as if the worker had died
            log.exception("evolution: the replies of a failing step could not be recorded")


def _model_for(run: EvolutionRun, iteration: int) -> RoundModel:
    """The configured model; with no API key the two-hop environment gets spec §10's scripted refiner replies (reply
    k for round k, whatever process runs the round) and other workspaces the demo model."""
    script = run.config.get("script")
    if model_is_scripted() and (script or run.evaluator == TWO_HOP):
        from graphs.core.twohop import SCRIPTED_REPLIES
        from llm.demo import DEMO_REPLIES

        if script:
            index = iteration - (run.first_iteration or iteration)
        else:
            script, index = SCRIPTED_REPLIES, iteration - 1
        reply = script[index] if 0 <= index < len(script) else DEMO_REPLIES["refiner"][0]
        inner = ScriptedChatModel([reply], cycle=True, model_id="scripted-two-hop")
    else:
        inner = get_chat_model()
    return RoundModel(inner, subject=round_subject(run.pk, iteration))


_USAGE: OrderedDict[int, FixedQuery] = OrderedDict()


def _usage_query(run_id: int) -> FixedQuery:
    """The ledger totals of a run's calls, compiled once per run and thread (every step of the run reads them)."""
    query = _USAGE.get(run_id)
    if query is None:
        calls = calls_for_subject_prefix(ROUND_SUBJECT, f"{run_id}:").order_by()
        totals = calls.values("subject_type").annotate(calls=Count("id"), output=Sum("output_tokens"), cost=Sum("cost"))
        query = _USAGE[run_id] = FixedQuery(lambda: totals.values_list("calls", "output", "cost"))
        while len(_USAGE) > 64:
            _USAGE.popitem(last=False)
    _USAGE.move_to_end(run_id)
    return query


def _ledger_usage(run_id: int) -> dict[str, Any]:
    """The run's model calls, output tokens and cost as the ledger holds them (one query)."""
    return _usage(_usage_query(run_id).rows())


def _usage(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    (calls, output, cost), *_ = rows or [(0, 0, None)]
    return {"model_calls": calls, "output_tokens": output or 0, "cost": cost or Decimal(0)}


@dataclass(frozen=True)
class StepResult:
    run: EvolutionRun
    next_step: bool


def evolution_step(*, run_id: int, worker: str, now: datetime | None = None) -> StepResult | None:
    """Advance the run by one step if it is free; None when another worker holds it or it has ended."""
    claimed = _claim(run_id, worker, now or timezone.now())
    if claimed is None:
        return None
    run = claimed.run
    if run.attempts > MAX_CRASHES:
        reason = f"gave up after {MAX_CRASHES} attempts in a row without progress"
        last = f": {run.error}" if run.error else " (the worker died; see its logs)"
        return StepResult(_end(run, worker, Status.FAILED, "crashed", reason + last), False)
    if run.cancel_requested:
        return StepResult(_end(run, worker, Status.CANCELLED, "cancelled"), False)
    try:
        return _advance(claimed, worker)
    except LeaseLost:
        log.warning("evolution run %s: lease lost, another worker goes on", run_id)
        return None
    except RunCancelled:
        return StepResult(_end(run, worker, Status.CANCELLED, "cancelled"), False)
    except EvaluationPending as pending:
        _update_owned(
            run,
            worker,
            status=Status.WAITING,
            stage=f"waiting: {pending}"[:40],
            attempts=0,
            **RELEASED,
        )
        return StepResult(run, False)
    except HeadMoved as moved:
        return StepResult(_end(run, worker, Status.FAILED, "head_moved", str(moved)), False)
    except (OSError, *_transient()) as error:  # transient (model timeouts too): Celery retries with backoff
        _release(run, worker, f"{type(error).__name__}: {error}")
        raise
    except Exception as error:  # an evaluator or model that failed for good: recorded, nothing half-written
        log.exception("evolution run %s failed", run_id)
        return StepResult(_end(run, worker, Status.FAILED, "error", f"{type(error).__name__}: {error}"), False)


def _transient() -> tuple[type[BaseException], ...]:
    from common.retry import TRANSIENT_ERRORS

    return tuple(error for error in TRANSIENT_ERRORS if error is not OSError)


def _release(run: EvolutionRun, worker: str, error: str) -> None:
    leases.lease_release(EvolutionRun.objects.filter(pk=run.pk), owner=worker, error=error[:4000], stage="")


def _end(run: EvolutionRun, worker: str, status: str, reason: str, error: str = "") -> EvolutionRun:
    from graphs.certification_services import run_ended_in_transaction
    from trajectories.job_services import jobs_expire

    with transaction.atomic(durable=True):
        locked = EvolutionRun.objects.select_for_update().get(pk=run.pk)
        if locked.lease_owner != worker or locked.is_finished:
            return locked
        before = {"status": locked.status}
        _finish_fields(locked, status, reason, error)
        locked.cost = _ledger_usage(locked.pk)["cost"]
        locked.save()
        _expire_jobs(locked.pk, jobs_expire)
        run_ended_in_transaction(run=locked)
        audit_record(
            actor=Actor.system(),
            verb="evolution.finish",
            target=locked,
            before=before,
            after={"status": status, "stopped_reason": reason, "error": error[:500]},
        )
    return locked


def _rejected_streak(run: EvolutionRun) -> int:
    streak = 0
    for outcome in EvolutionRound.objects.filter(run=run).order_by("-iteration").values_list("outcome", flat=True):
        if outcome == "accepted":
            break
        streak += 1
    return streak


def _next_iteration(store: DbRevisionStore, workspace: Workspace) -> int:
    """The round the workspace's next step runs: one past the last recorded (the rejection head's meta)."""
    meta = store.head_meta(workspace.slug, REJECTIONS)
    return int((meta or {}).get("iteration") or 0) + 1


def _advance(claimed: Claimed, worker: str) -> StepResult:
    run, usage = claimed.run, claimed.usage
    gate = build_gate(run.gate)
    workspace = run.workspace
    store = DbRevisionStore(workspace)
    store.read_heads(workspace.slug, claimed.heads)
    budget = Budget.from_document(run.budget or {})
    meter_used = {**(run.meter or {}), "model_calls": usage["model_calls"], "output_tokens": usage["output_tokens"]}
    meter = Meter(budget, used=meter_used)
    graph_store = RunGraphStore(store, workspace.slug, run=run)
    rejection_store = RunRejectionStore(store, workspace.slug, run=run, meter=meter, graphs=graph_store)
    checkpoint_store = RunCheckpointStore(store, workspace.slug, run=run, meter=meter)
    ending = _ending_on_record(run, gate, rejection_store, checkpoint_store)
    if ending is not None:
        return StepResult(_end(run, worker, *ending), False)
    iteration = _next_iteration(store, workspace)
    taking_baseline = run.best is None
    recorded = _model_for(run, iteration)
    store.writes_with.append(recorded.reply_writes)
    hooks = RunHooks(run, worker, recorded)
    sources = build_sources(workspace=workspace, evaluator=run.evaluator, run_id=run.pk, config=run.config)
    config = _config_for(run, max_rounds=0 if taking_baseline else 1)
    evaluator = sources.evaluator
    if config.objective_context is not None:
        evaluator = DeclaredContext(evaluator, config.objective_context)
    if taking_baseline:
        evaluator = RunBaselineRecorder(
            evaluator, run=run, meter=meter, first_iteration=iteration, objective_mode=config.objective_mode
        )
    # Appends wait for the round's next durable write (stores.py); what a step that fails leaves pending is done
    # again by the step that resumes the round.
    store.deferring = True
    try:
        report = evolve(
            config=config,
            model=HookedModel(recorded, meter, hooks),
            graph_store=graph_store,
            rejection_store=rejection_store,
            trace_source=sources.trace_source,
            evaluator=evaluator,
            gate=gate,
            trace_store=RunTraceStore(store, workspace.slug),
            checkpoint_store=checkpoint_store,
            hooks=hooks,
            baseline=None if taking_baseline else Evaluation.from_document(run.best),
            available_tools=list(sources.available_tools) if sources.available_tools else None,
        )
    except BaseException:
        store.discard_pending()
        recorded.write_replies_alone()
        raise
    if store.pending or recorded.replies:  # a seed, or anything a loop left unrecorded, before the step's end
        store.write_pending()
    return _settle(
        run, worker, report, meter, hooks, first_iteration=iteration, handed_over=rejection_store.handed_over
    )


def _ending_on_record(
    run: EvolutionRun, gate, rejections: RunRejectionStore, checkpoints: DbCheckpointStore
) -> tuple[str, str] | None:
    """The ending the run's last recorded round called for (spec §6 step 7, then the run's own limits). The step that
    recorded the round ends the run itself; when that step died first, its successor finds the ending here instead
    of running a round too many. The run's rounds are the last `rounds_done` entries of the workspace's rejection
    memory (one open run per workspace), written with `rounds_done` in one transaction."""
    if run.rounds_done == 0 or run.best is None:
        return None
    _, memory = rejections.load()
    if not memory.entries:
        return None
    last = memory.entries[-1]
    best = Evaluation.from_document(run.best)
    reason = "max_rounds"  # the step's loop ended with its one round
    if last.kind == "accepted" and gate.decide(best, best).stop:
        reason = "perfect"
    elif last.decision is not None:
        decision = checkpoints.decision(last.iteration)
        if decision is not None and decision.stop:
            reason = "gate_stop"
    return _ending(run, reason, run.rounds_done)


def _settle(
    run: EvolutionRun,
    worker: str,
    report,
    meter: Meter,
    hooks: RunHooks,
    *,
    first_iteration: int,
    handed_over: bool,
) -> StepResult:
    """Record what the step did on the run, then end the run or hand it to its next step. The rounds done and the
    cost are the run's own, kept by each round's record; a record also hands the run over (stores.RunRejectionStore:
    the lease given up), so after one the step writes only what the record did not say (warnings) before it sends
    the next step. The holder's name stays on a run given up, so the step still ends it under its lease; if another
    worker took the run meanwhile (the reaper sent it again), that worker's step ends it from the record instead."""
    fields: dict[str, Any] = {
        "meter": meter.to_dict(),
        "stage": "",
        "attempts": 0,
        "error": "",
    }
    warnings = (list(run.warnings) + list(report.warnings))[-50:]
    if warnings != list(run.warnings):
        fields["warnings"] = warnings
    if report.best is not None:
        best = report.best.to_document()
        if best != run.best:  # the record wrote an accepted round's best already
            fields["best"] = best
        if run.baseline is None:
            fields["baseline"] = report.best.to_document()
            fields["first_iteration"] = first_iteration
    ending = _ending(run, report.stopped_reason, run.rounds_done)
    if ending is not None:
        _update_owned(run, worker, **fields)
        return StepResult(_end(run, worker, *ending), False)
    if handed_over:
        if _counts(fields["meter"]) == _counts(run.meter):
            del fields["meter"]  # the record's meter stands: only its clock moved since, on the step's bookkeeping
        fields = {key: value for key, value in fields.items() if getattr(run, key) != value}
    if fields or not handed_over:  # the hand-over commits by itself (one statement), then the next step is sent
        _update_owned(run, worker, alone=True, **RELEASED, **fields)
    _enqueue_on_commit(run.pk)
    return StepResult(run, True)


def _counts(meter: Mapping[str, Any] | None) -> dict[str, Any]:
    """A meter's document without its clock."""
    return {key: value for key, value in (meter or {}).items() if key != "seconds"}


def _ending(run: EvolutionRun, reason: str, rounds_done: int) -> tuple[str, str] | None:
    """(status, stopped reason) when the run ends after this step, else None."""
    if reason == "budget_exhausted":
        return Status.BUDGET_EXHAUSTED, reason
    if reason in ("perfect", "gate_stop"):
        return Status.SUCCEEDED, reason
    streak_limit = run.config.get("max_rejected_streak")
    if streak_limit and _rejected_streak(run) >= streak_limit:
        return Status.SUCCEEDED, "rejected_streak"
    if rounds_done >= run.rounds_planned:
        return Status.SUCCEEDED, "max_rounds"
    return None


# -- the reaper and job answers ---------------------------------------------------------------------------------------


def evolution_runs_to_resume(now: datetime | None = None) -> list[int]:
    """Open runs nobody holds: a running run whose lease ran out (its worker died), a queued run whose message was
    lost (queued for over a minute with no lease). Celery beat re-enqueues their step."""
    now = now or timezone.now()
    lapsed = Q(status=Status.RUNNING) & lease_free(now)
    lost = Q(status=Status.QUEUED, created_at__lt=now - timedelta(minutes=1), lease_expires_at__isnull=True)
    return list(EvolutionRun.objects.filter(lapsed | lost).values_list("pk", flat=True)[:100])
