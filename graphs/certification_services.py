"""Certified uplift for graph revisions (issue 26): every write of a certification.

A graph revision's certificate (uplift) pairs the same validation tasks measured under the candidate and under the
control: the workspace's active revision (the graph agents receive), or no graph at all when nothing is active. It
is taken at one of two moments:

* **When an evolution round accepts the candidate**, inside the transaction that records the round
  (graphs.evolution.stores.RunRejectionStore): when the graph the round retained is the active revision (same
  digest), the round's two evaluations — the retained graph's and the candidate's, on the run's validation tasks —
  are the pair and the certificate is issued there, measuring nothing again. Otherwise the run's last accepted
  candidate gets a certification evaluation, queued in the transaction that ends the run (run_ended_in_transaction):
  a candidate a later round superseded spends no evaluation and no decision on the split.
* **On demand** (`graph_certify`: the `certify` command, the API, a re-certification): a certification
  evaluation of the candidate against the workspace's active revision (the active revision itself against what its
  last certificate measured it against, or no graph).

A certification evaluation is a leased Celery step (graphs.tasks.certification_step → `certification_step`): it
measures each arm with the evaluator (agents answer jobs; the step waits for them like an evolution run does),
keeps each arm's evaluation on the row as soon as it is measured (a step that dies after measuring one arm does not
measure it again), and issues the certificate in the durable transaction that finishes the row — under the lease,
so a worker killed anywhere finishes it once and the certificate is issued once.

Every evolution round that scored a candidate on the validation tasks also records one decision on their split
(uplift's reuse ledger), in the round's transaction: the split's error budget counts it exactly once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Q, Subquery
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.module_loading import import_string

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common import leases
from common.fixed_queries import FixedQuery
from common.leases import RELEASED, LeaseLost, lease_claim, lease_clear, lease_free, lease_release, lease_write
from common.statements import Statement
from graphs.core.certify import pair_evaluations, run_ids
from graphs.core.evaluation import Evaluation, EvaluationPending
from graphs.core.rejections import ACCEPTED, RejectionEntry
from uplift.selectors import latest_certificate
from uplift.services import DecisionToRecord, SplitExhausted, certificate_issue

from .models import EvolutionRound, EvolutionRun, GraphCertification, Revision, Workspace

log = logging.getLogger(__name__)

KIND = "graph_revision"  # the promotable kind (graphs.promotable) whose certificates these are
GRAPH = Revision.Kind.GRAPH
Status = GraphCertification.Status
Source = GraphCertification.Source
MAX_ATTEMPTS = 5
ROUND_ALPHA = 0.0  # an evolution gate takes no interval at any level: its ledger row records none


class CertificationRefused(ValueError):
    """A certification cannot be started as asked; the message says why. Nothing was written."""


def lease_seconds() -> int:
    from .evolution.services import lease_seconds as evolution_lease

    return evolution_lease()


def actor_of(certification: GraphCertification) -> Actor:
    return Actor(user=certification.requested_by) if certification.requested_by_id else Actor.system()


# -- the round --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundParts:
    """What an evolution round's record sends about its candidate with its own writes, in their round trip: the
    round's decision on the validation split (when it scored a candidate there: a statement, on PostgreSQL) and, for
    an accepted round, the read of the active revision its candidate's certification compares with."""

    decision: DecisionToRecord | None
    active: FixedQuery | None

    @property
    def statements(self) -> list[Statement]:
        return [self.decision.statement] if self.decision is not None and self.decision.statement else []

    @property
    def reads(self) -> list[FixedQuery]:
        return [self.active] if self.active is not None else []


def round_parts(*, run: EvolutionRun, workspace: Workspace, entry: RejectionEntry) -> RoundParts:
    """The parts of the round whose rejection-memory entry is `entry` (round_recorded_in_transaction writes it)."""
    validation = entry.validation
    if validation is None or not validation.per_task:
        return RoundParts(None, None)
    decision = DecisionToRecord(
        actor=_starter(run),
        kind=KIND,
        parent_key=workspace.slug,
        task_ids=[outcome.task_id for outcome in validation.per_task],
        drawn_at=run.created_at,
        what="evolution_round",
        subject=f"evolution_run:{run.pk}:round:{entry.iteration}",
        alpha=ROUND_ALPHA,
        passed=entry.kind == ACCEPTED,
    )
    return RoundParts(decision, _active_query(workspace.pk) if entry.kind == ACCEPTED else None)


def round_recorded_in_transaction(
    *,
    run: EvolutionRun,
    workspace: Workspace,
    entry: RejectionEntry,
    round_row: EvolutionRound,
    retained: dict[str, Any] | None,
    parts: RoundParts,
    results: list[list[tuple[Any, ...]]],
) -> GraphCertification | None:
    """Inside the transaction that records an evolution round, after its `parts` were sent (`results`: the rows of
    their statements, then of their reads): its decision on the validation split and, for an accepted round whose
    retained graph (`retained`: its evaluation document) is the active revision, its candidate's certificate, issued
    from the round's two evaluations. Another accepted round's candidate is certified when the run ends, if no later
    round superseded it (run_ended_in_transaction)."""
    if parts.decision is None:
        return None
    rows = iter(results)
    decided = next(rows) if parts.statements else None
    parts.decision.recorded(decided[0] if decided else None)
    if entry.kind != ACCEPTED or round_row.graph_revision_id is None:
        return None
    active = next(rows)
    control = Revision.from_db(Revision.objects.db, ACTIVE_COLUMNS, active[0]) if active else None
    retained_ref = (retained or {}).get("ref")
    if control is None or retained is None or retained_ref != control.digest:
        return None
    if entry.baseline_ref not in (None, retained_ref):
        return None
    certification = GraphCertification.objects.create(
        **_round_fields(run, round_row, control),
        source=Source.ROUND,
        status=Status.RUNNING,
        candidate_evaluation=entry.validation.to_document(),
        control_evaluation=retained,
    )
    issue_in_transaction(certification, actor=parts.decision.actor)
    return certification


def run_ended_in_transaction(*, run: EvolutionRun) -> GraphCertification | None:
    """Inside the transaction that ends an evolution run (any way it ends): the certification of its last accepted
    candidate, queued when its round did not certify it (its retained graph was not the active one). A candidate a
    later round of the run superseded is not certified: it would spend agents' evaluations and a decision on the
    validation split on a revision nobody is asked to activate (an operator may still certify it on demand)."""
    last = (
        EvolutionRound.objects.filter(run=run, outcome=ACCEPTED, graph_revision__isnull=False)
        .select_related("graph_revision")
        .order_by("-iteration")
        .first()
    )
    if last is None or GraphCertification.objects.filter(candidate_id=last.graph_revision_id).exists():
        return None
    control = _active_of(run.workspace_id)
    certification = GraphCertification.objects.create(
        **_round_fields(run, last, control), source=Source.EVALUATION, status=Status.QUEUED
    )
    _queued(
        certification,
        actor=_starter(run),
        why="the run's last accepted candidate; its round's retained graph was not active",
    )
    return certification


def _starter(run: EvolutionRun) -> Actor:
    """Who a run's certification acts for: the operator who started the run, else the system."""
    return Actor(user=run.started_by) if run.started_by_id else Actor.system()


def _round_fields(run: EvolutionRun, round_row: EvolutionRound, control: Revision | None) -> dict[str, Any]:
    return {
        "workspace_id": run.workspace_id,
        "candidate": round_row.graph_revision,
        "control": control,
        "evaluator": run.evaluator,
        "evolution_run": run,
        "iteration": round_row.iteration,
        "requested_by_id": run.started_by_id,
        "config": _run_config(run),
    }


_ACTIVE: OrderedDict[int, FixedQuery] = OrderedDict()
ACTIVE_COLUMNS = [field.attname for field in Revision._meta.concrete_fields if field.name != "document"]


def _active_of(workspace_id: int) -> Revision | None:
    rows = _active_query(workspace_id).rows()
    return Revision.from_db(Revision.objects.db, ACTIVE_COLUMNS, rows[0]) if rows else None


def _active_query(workspace_id: int) -> FixedQuery:
    """The read of the workspace's active revision, its document deferred, compiled by the ORM once per workspace
    and thread (common/fixed_queries.py; every accepted round of a run reads it)."""
    query = _ACTIVE.get(workspace_id)
    if query is None:
        active_id = Workspace.objects.filter(pk=workspace_id).order_by().values("active_revision_id")[:1]
        active = Revision.objects.filter(pk=Subquery(active_id)).order_by()
        query = _ACTIVE[workspace_id] = FixedQuery(lambda: active.values_list(*ACTIVE_COLUMNS))
        while len(_ACTIVE) > 16:
            _ACTIVE.popitem(last=False)
    _ACTIVE.move_to_end(workspace_id)
    return query


def _run_config(run: EvolutionRun) -> dict[str, Any]:
    config: dict[str, Any] = {"drawn_at": run.created_at.isoformat()}
    if run.config.get("validation_tasks"):
        config["validation_tasks"] = list(run.config["validation_tasks"])
    return config


def _queued(certification: GraphCertification, *, actor: Actor, why: str) -> None:
    if certification.control_id is None and not can_evaluate_without_graph(certification.evaluator):
        _close(
            certification,
            Status.REFUSED,
            f"the {certification.evaluator} evaluator cannot measure an agent without a graph "
            "(evaluates_without_graph): nothing is active to compare with",
        )
    audit_record(
        actor=actor,
        verb="graph_certification.queue",
        target=certification,
        after={
            "candidate": certification.candidate.label,
            "control": certification.control.label if certification.control else None,
            "evaluator": certification.evaluator,
            "status": certification.status,
            "why": why,
        },
    )
    if certification.status == Status.QUEUED:
        enqueue_on_commit(certification.pk)


def enqueue_on_commit(certification_id: int, countdown: float | None = None) -> None:
    def send() -> None:
        from .tasks import certification_step

        if countdown:
            certification_step.apply_async((certification_id,), countdown=countdown)
        else:
            certification_step.delay(certification_id)

    transaction.on_commit(send)


def can_evaluate_without_graph(evaluator: str) -> bool:
    from .evolution.sources import AGENTS, TWO_HOP, configured_evaluators, evaluates_without_graph

    if evaluator in (AGENTS, TWO_HOP):
        return True
    path = configured_evaluators().get(evaluator)
    if path is None:
        return False
    try:
        return evaluates_without_graph(import_string(path))
    except ImportError:
        return False


# -- issuing ----------------------------------------------------------------------------------------------------------


def _close(certification: GraphCertification, status: str, error: str = "") -> None:
    now = timezone.now()
    certification.status = status
    certification.error = error[:4000]
    lease_clear(certification)
    certification.finished_at = certification.updated_at = now
    certification.save()


def _task_models(control: Evaluation, candidate: Evaluation) -> dict[str, str]:
    """Each task's agent model: its candidate run's `metadata.model`, else its control run's (one query, none
    when no run answered)."""
    candidate_runs, control_runs = run_ids(candidate), run_ids(control)
    if not candidate_runs and not control_runs:
        return {}
    from trajectories.selectors import run_models

    models = run_models([*candidate_runs.values(), *control_runs.values()])
    found: dict[str, str] = {}
    for task_id in {*candidate_runs, *control_runs}:
        model = models.get(candidate_runs.get(task_id, -1)) or models.get(control_runs.get(task_id, -1))
        if model:
            found[task_id] = model
    return found


def _drawn_at(certification: GraphCertification) -> datetime:
    text = (certification.config or {}).get("drawn_at")
    parsed = parse_datetime(text) if isinstance(text, str) else None
    return parsed or certification.created_at


def issue_in_transaction(certification: GraphCertification, *, actor: Actor) -> GraphCertification:
    """Inside the caller's transaction, with both arms' evaluations on the row: pair them, issue the certificate
    (one decision on the split of their tasks) and close the row done — or refused, when the pairs cannot be
    made or the split is exhausted. Audited."""
    control = Evaluation.from_document(certification.control_evaluation)
    candidate = Evaluation.from_document(certification.candidate_evaluation)
    control_revision, candidate_revision = certification.control, certification.candidate
    try:
        tasks = pair_evaluations(control, candidate, models=_task_models(control, candidate))
    except ValueError as error:
        tasks, refusal = [], str(error)
    else:
        refusal = "the evaluator reported no task one by one: there is nothing to pair"
    if tasks:
        against = f"the active revision {control_revision.label}" if control_revision else "no graph at all"
        try:
            row = certificate_issue(
                actor=actor,
                kind=KIND,
                parent_key=certification.workspace.slug,
                candidate_id=str(candidate_revision.pk),
                replaces_id=str(control_revision.pk) if control_revision else None,
                tasks=tasks,
                drawn_at=_drawn_at(certification),
                provenance={
                    "graph_certification": certification.pk,
                    "source": certification.source,
                    "evaluator": certification.evaluator,
                    "evolution_run": certification.evolution_run_id,
                    "round": certification.iteration,
                    "candidate": {"seq": candidate_revision.seq, "digest": candidate_revision.digest},
                    "control": (
                        {"seq": control_revision.seq, "digest": control_revision.digest} if control_revision else None
                    ),
                },
                against=against,
            )
        except SplitExhausted as exhausted:
            refusal = str(exhausted)
        else:
            refusal = ""
            certification.certificate_id = row.pk
            certification.passed = row.passed
    _close(certification, Status.REFUSED if refusal else Status.DONE, refusal)
    # (certificate_issue tells the kind, whose certification_changed drops the workspace card on commit: a new
    # certificate of the active revision reaches agents.)
    audit_record(
        actor=actor,
        verb="graph_certification.finish",
        target=certification,
        after={
            "status": certification.status,
            "certificate": certification.certificate_id,
            "passed": certification.passed,
            "source": certification.source,
            "error": certification.error[:500],
        },
    )
    return certification


# -- on demand --------------------------------------------------------------------------------------------------------


def _control_for(workspace: Workspace, revision: Revision) -> Revision | None:
    """What the candidate would replace: the active revision; for the active revision itself, what its last
    certificate measured it against (or no graph)."""
    if workspace.active_revision_id is None:
        return None
    if workspace.active_revision_id != revision.pk:
        return Revision.objects.defer("document").get(pk=workspace.active_revision_id)
    last = latest_certificate(KIND, str(revision.pk))
    replaced = int(last.replaces_id) if last is not None and last.replaces_id.isdigit() else None
    return Revision.objects.defer("document").filter(pk=replaced, workspace=workspace, kind=GRAPH).first()


def fresh_validation_tasks(
    workspace: Workspace, *, after: datetime | None, model: str | None, limit: int = 20
) -> list[dict[str, str]]:
    """Validation tasks for the agents evaluator from the newest production runs the workspace guided that were
    received after `after` (and made by `model`, when given): one per distinct task, newest first."""
    from trajectories.selectors import runs_guided_by

    _, total = runs_guided_by(workspace.slug, offset=0, limit=0)
    runs, _ = runs_guided_by(workspace.slug, offset=max(0, total - 1000), limit=1000)
    tasks: dict[str, dict[str, str]] = {}
    for run in reversed(runs):
        if after is not None and run.created_at <= after:
            continue
        if model is not None and (run.metadata or {}).get("model") != model:
            continue
        if run.task and run.task not in tasks:
            tasks[run.task] = {"task_id": run.external_id or f"run-{run.pk}", "task": run.task}
        if len(tasks) >= limit:
            break
    return list(tasks.values())


def _evaluator_for(
    workspace: Workspace,
    revision: Revision,
    evaluator: str | None,
    *,
    after: datetime | None = None,
    model: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The evaluator key and its config: the one named, else the one of the run that accepted the revision, else
    of the workspace's latest run; agents get the run's validation tasks (or the workspace's stored tasks; fresh
    ones — received after `after`, of `model` — for a re-certification)."""
    from .evolution.services import _validation_tasks
    from .evolution.sources import AGENTS, UnknownEvaluator, check_evaluator

    accepted = EvolutionRound.objects.filter(graph_revision=revision, outcome=ACCEPTED).select_related("run").first()
    run = accepted.run if accepted is not None else EvolutionRun.objects.filter(workspace=workspace).first()
    key = evaluator or (run.evaluator if run is not None else None)
    if not key:
        raise CertificationRefused(
            f"name an evaluator: workspace {workspace.slug!r} has no evolution run to take one from"
        )
    try:
        check_evaluator(key)
    except UnknownEvaluator as error:
        raise CertificationRefused(str(error)) from None
    same_run = run is not None and run.evaluator == key
    config = _run_config(run) if same_run else {"drawn_at": timezone.now().isoformat()}
    if after is not None or model is not None:
        if key != AGENTS and model is not None:
            raise CertificationRefused(
                f"the {key} evaluator measures its own tasks: it cannot measure runs of {model}; use agents"
            )
        config.update({"fresh_after": after.isoformat() if after else None, "model": model})
        if key == AGENTS:
            config["drawn_at"] = timezone.now().isoformat()
            config["validation_tasks"] = fresh_validation_tasks(workspace, after=after, model=model)
            if not config["validation_tasks"]:
                of_model = f" of {model}" if model else ""
                since = f" received after {after:%Y-%m-%d %H:%M} UTC" if after else ""
                raise CertificationRefused(f"no stored run{of_model} of this workspace{since} has a task")
    if key == AGENTS and not config.get("validation_tasks"):
        config["validation_tasks"] = _validation_tasks(workspace)
        if not config["validation_tasks"]:
            raise CertificationRefused("the agents evaluator needs tasks: no stored run of this workspace has one")
    return key, config


def graph_certify(
    *,
    actor: Actor,
    revision: Revision,
    evaluator: str | None = None,
    after: datetime | None = None,
    model: str | None = None,
) -> tuple[GraphCertification, bool]:
    """Queue a certification evaluation of `revision` against what it would replace; (certification, created).
    A certification of the revision already under way is returned as it is (created False). `after` and `model`
    (a re-certification) measure fresh tasks: the agents evaluator's tasks from runs received after `after`, of
    `model`. CertificationRefused says why one cannot start (nothing written)."""
    require_role(actor, Role.OPERATOR, doing="certifying a graph revision", system=True)
    if revision.kind != GRAPH:
        raise CertificationRefused("only graph revisions are certified")
    try:
        with transaction.atomic(durable=True):
            workspace = Workspace.objects.select_for_update().get(pk=revision.workspace_id)
            under_way = GraphCertification.objects.filter(candidate=revision, status__in=GraphCertification.OPEN)
            if (found := under_way.first()) is not None:
                return found, False
            control = _control_for(workspace, revision)
            if control is not None and control.digest == revision.digest:
                raise CertificationRefused(
                    f"revision {revision.label} is the same graph as {control.label}: there is nothing to compare"
                )
            key, config = _evaluator_for(workspace, revision, evaluator, after=after, model=model)
            if control is None and not can_evaluate_without_graph(key):
                raise CertificationRefused(
                    f"the {key} evaluator cannot measure an agent without a graph (evaluates_without_graph), "
                    "and nothing else is there to compare with"
                )
            certification = GraphCertification.objects.create(
                workspace=workspace,
                candidate=revision,
                control=control,
                source=Source.EVALUATION,
                evaluator=key,
                config=config,
                requested_by=actor.user,
            )
            _queued(certification, actor=actor, why="asked for")
    except IntegrityError:  # another request queued one meanwhile
        found = GraphCertification.objects.filter(candidate=revision, status__in=GraphCertification.OPEN).first()
        if found is None:
            raise
        return found, False
    return certification, True


# -- the leased step --------------------------------------------------------------------------------------------------


def _claim(certification_id: int, worker: str, now: datetime) -> GraphCertification | None:
    taken = lease_claim(
        GraphCertification.objects.filter(pk=certification_id, status__in=GraphCertification.OPEN),
        owner=worker,
        seconds=lease_seconds(),
        now=now,
        status=Status.RUNNING,
        attempts=F("attempts") + 1,
        updated_at=now,
    )
    if not taken:
        return None
    return GraphCertification.objects.select_related("workspace", "candidate", "control", "requested_by").get(
        pk=certification_id
    )


def _update_owned(certification: GraphCertification, worker: str, **fields: Any) -> None:
    fields.setdefault("updated_at", timezone.now())
    held = GraphCertification.objects.filter(pk=certification.pk, status=Status.RUNNING)
    lease_write(held, owner=worker, what=f"certification {certification.pk}", **fields)
    for key, value in fields.items():
        setattr(certification, key, value)


def lease_wait(certification_id: int) -> float | None:
    """Seconds until the lease of an open certification runs out (None: finished or free)."""
    return leases.lease_wait(GraphCertification.objects.filter(pk=certification_id, status__in=GraphCertification.OPEN))


def measure_arm(certification: GraphCertification, evaluator: Any, arm: str) -> Evaluation:
    """One arm's evaluation: the candidate, or the control (no graph when it has none)."""
    from .evolution.sources import evaluates_without_graph
    from .selectors import graph_of

    revision = certification.candidate if arm == "candidate" else certification.control
    if revision is None and not evaluates_without_graph(evaluator):
        raise CertificationRefused(f"the {certification.evaluator} evaluator cannot measure an agent without a graph")
    graph = graph_of(revision) if revision is not None else None
    return evaluator.evaluate(revision.digest if revision else None, graph, iteration=0, purpose=arm)


def certification_step(*, certification_id: int, worker: str, now: datetime | None = None) -> GraphCertification | None:
    """Measure what is left of a certification and finish it if it is free; None when another worker holds it or
    it has ended. Waits (status waiting, lease released) while agents have jobs to answer."""
    from common.retry import TRANSIENT_ERRORS

    from .evolution.jobs import certification_prefix
    from .evolution.sources import certification_evaluator

    certification = _claim(certification_id, worker, now or timezone.now())
    if certification is None:
        return None
    if certification.attempts > MAX_ATTEMPTS:
        last = f": {certification.error}" if certification.error else " (the worker died; see its logs)"
        return _end(certification, worker, Status.FAILED, f"gave up after {MAX_ATTEMPTS} attempts{last}")
    try:
        evaluator = certification_evaluator(
            workspace=certification.workspace,
            evaluator=certification.evaluator,
            config=certification.config or {},
            subject_prefix=certification_prefix(certification.pk),
        )
        pending: list[str] = []
        for arm in ("candidate", "control"):
            field = f"{arm}_evaluation"
            if getattr(certification, field) is not None:
                continue
            try:
                evaluation = measure_arm(certification, evaluator, arm)
            except EvaluationPending as waiting:
                pending.append(f"{arm}: {waiting}")
                continue
            renewed = leases.lease_until(lease_seconds())
            _update_owned(
                certification, worker, **{field: evaluation.to_document()}, attempts=0, lease_expires_at=renewed
            )
        if pending:
            _update_owned(
                certification,
                worker,
                status=Status.WAITING,
                error="; ".join(pending)[:4000],
                attempts=0,
                **RELEASED,
            )
            return certification
        return _finish(certification, worker)
    except LeaseLost:
        log.warning("certification %s: lease lost, another worker goes on", certification_id)
        return None
    except CertificationRefused as refused:
        return _end(certification, worker, Status.REFUSED, str(refused))
    except TRANSIENT_ERRORS as error:  # Celery retries with backoff
        lease_release(
            GraphCertification.objects.filter(pk=certification.pk),
            owner=worker,
            error=f"{type(error).__name__}: {error}"[:4000],
        )
        raise
    except Exception as error:  # an evaluator that failed for good: recorded, no certificate
        log.exception("certification %s failed", certification_id)
        return _end(certification, worker, Status.FAILED, f"{type(error).__name__}: {error}")


def _finish(certification: GraphCertification, worker: str) -> GraphCertification:
    """Issue the certificate and close the row, in one durable transaction, once: only while `worker` holds it."""
    with transaction.atomic(durable=True):
        locked = (
            GraphCertification.objects.select_for_update(of=("self",))
            .select_related("workspace", "candidate", "control", "requested_by")
            .get(pk=certification.pk)
        )
        if locked.lease_owner != worker or locked.status != Status.RUNNING:
            return locked
        return issue_in_transaction(locked, actor=actor_of(locked))


def _end(certification: GraphCertification, worker: str, status: str, error: str) -> GraphCertification:
    with transaction.atomic(durable=True):
        locked = (
            GraphCertification.objects.select_for_update(of=("self",))
            .select_related("workspace", "candidate", "control")
            .get(pk=certification.pk)
        )
        if locked.lease_owner != worker or not locked.is_open:
            return locked
        _close(locked, status, error)
        audit_record(
            actor=Actor.system(),
            verb="graph_certification.finish",
            target=locked,
            after={"status": status, "error": locked.error[:500]},
        )
    return locked


# -- the reaper and the take-over of dead workers' leases --------------------------------------------------------------


def certifications_to_resume(now: datetime | None = None) -> list[int]:
    """Open certifications nobody holds: a running one whose lease ran out (its worker died), a queued one whose
    message was lost (queued for over a minute). Waiting ones go on when their jobs are answered or expire."""
    now = now or timezone.now()
    lapsed = Q(status=Status.RUNNING) & lease_free(now)
    lost = Q(status=Status.QUEUED, created_at__lt=now - timedelta(minutes=1), lease_expires_at__isnull=True)
    return list(GraphCertification.objects.filter(lapsed | lost).values_list("pk", flat=True)[:100])


def take_over(certification_ids: list[int]) -> None:
    """The leases of these certifications' dead workers ended (common.leases): their steps go on now."""
    for certification_id in certification_ids:
        enqueue_on_commit(certification_id)


__all__ = [
    "KIND",
    "CertificationRefused",
    "certification_step",
    "certifications_to_resume",
    "graph_certify",
    "issue_in_transaction",
    "round_parts",
    "round_recorded_in_transaction",
    "run_ended_in_transaction",
]
