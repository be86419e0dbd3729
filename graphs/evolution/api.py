"""/api/v1/graphs/{ws}/evolutions: operators start and cancel evolution runs; readers list runs and read rounds.

Mounted by config/api.py. Starting and cancelling need the scope `evolutions:run` (operators only) and the token's
user must still be an operator; reading needs `graphs:read`. A refused start writes nothing.
"""

from __future__ import annotations

from decimal import Decimal

from django.http import HttpRequest
from ninja import Path, Query, Router, Status

from accounts.api_auth import scoped
from accounts.roles import Role, require_role
from accounts.services import Actor
from common.cursors import InvalidCursor
from common.errors import ApiError, Error
from graphs import selectors as graph_selectors

from . import selectors, services
from .schemas import EvolutionRoundListOut, EvolutionRunOut, EvolutionRunPageOut, EvolutionStartIn, RunPageIn

router = Router(tags=["evolutions"])

READ = scoped("graphs:read")
RUN = scoped("evolutions:run")
HIDDEN_CONFIG = ("script", "validation_tasks")


def _cost(value) -> str:
    return format(Decimal(value or 0).normalize(), "f")


def run_out(run) -> dict:
    return {
        "id": run.pk,
        "workspace": run.workspace.slug,
        "status": run.status,
        "stage": run.stage,
        "cancel_requested": run.cancel_requested,
        "rounds_planned": run.rounds_planned,
        "rounds_done": run.rounds_done,
        "first_iteration": run.first_iteration,
        "evaluator": run.evaluator,
        "gate": (run.gate or {}).get("kind", "tie"),
        "config": {key: value for key, value in (run.config or {}).items() if key not in HIDDEN_CONFIG},
        "budget": run.budget or {},
        "meter": run.meter or {},
        "cost": _cost(run.cost),
        "baseline_score": run.baseline_score,
        "best_score": run.best_score,
        "stopped_reason": run.stopped_reason,
        "error": run.error,
        "warnings": [str(warning) for warning in run.warnings or []],
        "started_by": run.started_by.username if run.started_by_id else None,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "updated_at": run.updated_at,
        "finished_at": run.finished_at,
    }


def round_out(round_) -> dict:
    accepted = round_.graph_revision
    return {
        "iteration": round_.iteration,
        "outcome": round_.outcome,
        "disposition": round_.disposition,
        "mode": round_.mode,
        "retained_score": round_.retained_score,
        "candidate_score": round_.candidate_score,
        "edit_counts": round_.edit_counts or {},
        "edits": round_.edits or {},
        "diagnostics": round_.diagnostics or [],
        "decision": round_.decision,
        "candidate_digest": round_.candidate_digest,
        "base_digest": round_.base_digest,
        "duplicate_of": round_.duplicate_of,
        "accepted_revision": {"seq": accepted.seq, "digest": accepted.digest} if accepted is not None else None,
        "model_calls": round_.model_calls,
        "cost": _cost(round_.cost),
        "created_at": round_.created_at,
    }


def _gate_document(body: EvolutionStartIn) -> dict:
    gate = body.gate.model_dump(exclude_none=True)
    if gate.get("kind") == "objective" and ("objective" not in gate or "context" not in gate):
        raise ApiError(422, "invalid_gate", "the objective gate needs both the objective and the context documents")
    try:
        services.build_gate(gate)
    except Exception as exc:  # any document the gate cannot be built from is the caller's error
        raise ApiError(422, "invalid_gate", f"the gate cannot be built: {exc}") from None
    return gate


@router.post(
    "",
    auth=RUN,
    response={201: EvolutionRunOut, 400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 422: Error},
    summary="Start an evolution run of the workspace's graph (operators)",
    description="201 with the queued run; its first step (the baseline) runs on a worker. 409 when the workspace "
    "has a run in progress; 422 for an unknown evaluator, a gate that cannot be built or settings the run refuses. "
    "A refused request starts nothing.",
)
def start_run(request: HttpRequest, ws: Path[str], body: EvolutionStartIn):
    require_role(Actor.of_request(request), Role.OPERATOR, doing="starting an evolution run")
    workspace = graph_selectors.workspace_by_slug(ws)
    gate = _gate_document(body)
    if selectors.open_run(workspace) is not None:
        raise ApiError(409, "run_in_progress", f"workspace {ws!r} has a run in progress; wait for it or cancel it")
    try:
        run = services.evolution_start(
            actor=Actor.of_request(request),
            workspace=workspace,
            rounds=body.rounds,
            evaluator=body.evaluator,
            gate=gate,
            budget=body.budget.model_dump(exclude_none=True),
            config=body.config.model_dump(exclude_none=True),
        )
    except services.EvolutionRefused as exc:
        if selectors.open_run(workspace) is not None:  # another request started one meanwhile
            raise ApiError(409, "run_in_progress", str(exc)) from None
        raise ApiError(422, "cannot_start", str(exc)) from None
    run.workspace = workspace
    return Status(201, run_out(run))


@router.get(
    "",
    auth=READ,
    response={200: EvolutionRunPageOut, 400: Error, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="The workspace's evolution runs, newest first (cursor pages)",
)
def list_runs(request: HttpRequest, ws: Path[str], page: Query[RunPageIn]):
    workspace = graph_selectors.workspace_by_slug(ws)
    try:
        found = selectors.run_page(workspace, cursor=page.cursor, limit=page.limit)
    except InvalidCursor as exc:
        raise ApiError(400, "bad_cursor", str(exc)) from None
    items = []
    for run in found.runs:
        run.workspace = workspace
        items.append(run_out(run))
    return Status(200, {"items": items, "next_cursor": found.next_cursor})


@router.get(
    "/{run_id}",
    auth=READ,
    response={200: EvolutionRunOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One evolution run: status, stage, round k of K, meter, cost, baseline and best scores",
)
def get_run(request: HttpRequest, ws: Path[str], run_id: int):
    workspace = graph_selectors.workspace_by_slug(ws)
    return Status(200, run_out(selectors.run_of(workspace, run_id)))


@router.post(
    "/{run_id}/cancel",
    auth=RUN,
    response={200: EvolutionRunOut, 401: Error, 403: Error, 404: Error, 409: Error, 422: Error},
    summary="Cancel a run (operators): a queued or waiting run stops now, a running one at its next stage",
    description="Everything the run recorded is kept. 409 when the run has ended already.",
)
def cancel_run(request: HttpRequest, ws: Path[str], run_id: int):
    require_role(Actor.of_request(request), Role.OPERATOR, doing="cancelling an evolution run")
    workspace = graph_selectors.workspace_by_slug(ws)
    run = selectors.run_of(workspace, run_id)
    try:
        cancelled = services.evolution_cancel(actor=Actor.of_request(request), run=run)
    except services.EvolutionRefused as exc:
        raise ApiError(409, "run_ended", str(exc)) from None
    cancelled.workspace = workspace
    cancelled.started_by = run.started_by
    return Status(200, run_out(cancelled))


@router.get(
    "/{run_id}/rounds",
    auth=READ,
    response={200: EvolutionRoundListOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="A run's rounds in order: outcome, disposition, scores, edits, diagnostics, decision, accepted revision",
)
def list_rounds(request: HttpRequest, ws: Path[str], run_id: int):
    workspace = graph_selectors.workspace_by_slug(ws)
    run = selectors.run_of(workspace, run_id)
    return Status(200, {"run": run.pk, "items": [round_out(round_) for round_ in selectors.rounds_of(run)]})
