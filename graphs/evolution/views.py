"""Evolution pages of a workspace: the runs (with the start form), one run, one round, the rejection memory.

Every page reads through graphs.evolution.selectors in a fixed number of queries. Starting and cancelling runs need
the operator role (the services refuse others: 403 with the page and the reason, accounts.roles.refusal_shown);
everything else is readable by any member. An open
run's page and the runs list refresh their live part by htmx polling (the fragment is rendered without the trigger
once the run has ended, which stops the polling).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from accounts.roles import refusal_shown
from accounts.services import Actor
from common.cursors import InvalidCursor
from common.parsing import int_or_none
from graphs.core import Graph, to_mermaid, unified_diff
from graphs.core.objectives import render_decision
from reviews.selectors import pending_requests_for

from .. import revisions
from ..diff_lines import diff_lines
from ..models import EvolutionRound, EvolutionRun, Revision, Workspace
from ..promotable import KIND as PROMOTION_KIND
from ..selectors import workspace_by_slug
from . import selectors
from .forms import StartRunForm
from .services import EvolutionRefused, evolution_cancel, evolution_start

POLL_SECONDS = 2
DRAW_LIMIT = 150
RECENT_RUNS = 10

STATUS_BADGES = {
    "succeeded": "badge-succeeded",
    "failed": "badge-failed",
    "cancelled": "badge-unknown",
    "budget_exhausted": "badge-warning",
}
OUTCOME_BADGES = {
    "accepted": "badge-success",
    "rejected": "badge-rejected",
    "structural_failure": "badge-failure",
    "duplicate_candidate": "badge-unknown",
    "no_action": "badge-unknown",
}


def status_badge(run: EvolutionRun) -> str:
    return STATUS_BADGES.get(run.status, "badge-running")


def edit_summary(counts: dict[str, Any] | None) -> str:
    """`+a −b nodes +c −d edges`."""
    c = {key: int((counts or {}).get(key) or 0) for key in ("add_nodes", "delete_nodes", "add_edges", "delete_edges")}
    return f"+{c['add_nodes']} −{c['delete_nodes']} nodes +{c['add_edges']} −{c['delete_edges']} edges"


@dataclass(frozen=True)
class RoundRow:
    round: EvolutionRound
    badge: str
    edits: str


def _round_rows(rounds: list[EvolutionRound]) -> list[RoundRow]:
    return [
        RoundRow(item, OUTCOME_BADGES.get(item.outcome, "badge-unknown"), edit_summary(item.edit_counts))
        for item in rounds
    ]


# -- charts -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundScores:
    label: str
    retained: float | None
    candidate: float | None
    outcome: str


def _round_scores(run: EvolutionRun, rounds: list[EvolutionRound]) -> list[RoundScores]:
    """The baseline, then per round the score retained after it and the candidate's score (None: not measured)."""
    if run.baseline_score is None and not rounds:
        return []
    retained = run.baseline_score
    rows = [RoundScores("baseline", retained, None, "")]
    for item in rounds:
        if item.outcome == "accepted" and item.candidate_score is not None:
            retained = item.candidate_score
        rows.append(RoundScores(f"round {item.iteration}", retained, item.candidate_score, item.outcome))
    return rows


def _rounds_chart(rows: list[RoundScores]) -> dict[str, Any]:
    return {
        "labels": [row.label for row in rows],
        "x_title": "round",
        "y_title": "validation score",
        "series": [
            {"label": "retained after the round", "data": [row.retained for row in rows], "stepped": True},
            {"label": "candidate", "data": [row.candidate for row in rows], "points_only": True},
        ],
    }


@dataclass(frozen=True)
class RunScores:
    run_id: int
    baseline: float | None
    final: float | None
    best_candidate: float | None
    rounds: int
    accepted: int


def _run_scores(series: list[dict[str, Any]]) -> list[RunScores]:
    """Per recent run: baseline, the retained score after its last round, its best candidate, rounds, accepts."""
    rows = []
    for item in series:
        final = item["baseline"]
        candidates = [r["candidate_score"] for r in item["rounds"] if r["candidate_score"] is not None]
        accepted = [r for r in item["rounds"] if r["outcome"] == "accepted"]
        for row in accepted:
            if row["candidate_score"] is not None:
                final = row["candidate_score"]
        rows.append(
            RunScores(
                item["run"], item["baseline"], final, max(candidates, default=None), len(item["rounds"]), len(accepted)
            )
        )
    return rows


def _runs_chart(rows: list[RunScores]) -> dict[str, Any]:
    return {
        "labels": [f"run {row.run_id}" for row in rows],
        "x_title": "evolution run",
        "y_title": "validation score",
        "series": [
            {"label": "baseline", "data": [row.baseline for row in rows]},
            {"label": "retained at the end", "data": [row.final for row in rows]},
            {"label": "best candidate", "data": [row.best_candidate for row in rows], "points_only": True},
        ],
    }


# -- runs list and start ----------------------------------------------------------------------------------------------


def _list_page(
    request: HttpRequest,
    workspace: Workspace,
    *,
    form: StartRunForm | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    cursor = request.GET.get("cursor") or None
    try:
        page = selectors.run_page(workspace, cursor=cursor)
    except InvalidCursor:
        page, error, status = (
            selectors.run_page(workspace),
            "That page of runs does not exist; showing the newest.",
            400,
        )
    rows = [(run, status_badge(run)) for run in page.runs]
    context = {
        "workspace": workspace,
        "rows": rows,
        "next_cursor": page.next_cursor,
        "polling": any(not run.is_finished for run in page.runs),
        "poll_seconds": POLL_SECONDS,
        "form": form or StartRunForm(),
        "can_operate": request.user.may_operate,
        "error": error,
    }
    if request.htmx and request.method == "GET":
        return render(request, "graphs/evolution/list.html#runs", context, status=status)
    return render(request, "graphs/evolution/list.html", context, status=status)


def _list_refused(request: HttpRequest, reason: str, slug: str) -> HttpResponse:
    return _list_page(request, workspace_by_slug(slug), error=reason)


@login_required
@require_http_methods(["GET", "POST"])
@refusal_shown(_list_refused)
def list_view(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the workspace's runs and, for operators, the start form. POST: start a run (operators)."""
    workspace = workspace_by_slug(slug)
    if request.method == "GET":
        return _list_page(request, workspace)
    form = StartRunForm(request.POST)
    if not form.is_valid():
        return _list_page(request, workspace, form=form, status=422)
    try:
        run = evolution_start(actor=Actor.of_request(request), workspace=workspace, **form.start_arguments())
    except EvolutionRefused as refused:
        form.add_error(None, str(refused))
        return _list_page(request, workspace, form=form, status=422)
    messages.success(request, f"Evolution run {run.pk} started: {run.rounds_planned} round(s), {run.evaluator}.")
    return redirect("graphs:evolution", slug=workspace.slug, run_id=run.pk)


# -- one run ----------------------------------------------------------------------------------------------------------


def _accepted_head(rounds: list[EvolutionRound]) -> Revision | None:
    """The last revision this run's gate accepted (the head the run leaves behind)."""
    accepted = [item.graph_revision for item in rounds if item.outcome == "accepted" and item.graph_revision]
    return accepted[-1] if accepted else None


def _run_page(request: HttpRequest, workspace: Workspace, run: EvolutionRun, *, error: str = "", status: int = 200):
    rounds = selectors.rounds_of(run)
    round_scores = _round_scores(run, rounds)
    runs = _run_scores(selectors.score_series(workspace, runs=RECENT_RUNS))
    head = _accepted_head(rounds)
    pending = pending_requests_for(kind=PROMOTION_KIND, parent_key=workspace.slug) if head else {}
    meter = run.meter or {}
    context = {
        "workspace": workspace,
        "run": run,
        "badge": status_badge(run),
        "rounds": _round_rows(rounds),
        "meter": meter,
        "ceilings": meter.get("ceilings") or run.budget or {},
        "polling": not run.is_finished,
        "poll_seconds": POLL_SECONDS,
        "can_operate": request.user.may_operate,
        "can_propose": request.user.may_propose,
        "accepted_head": head,
        "head_is_active": head is not None and head.pk == workspace.active_revision_id,
        "head_request": pending.get(str(head.pk)) if head else None,
        "promotion_kind": PROMOTION_KIND,
        "round_scores": round_scores,
        "rounds_chart": _rounds_chart(round_scores),
        "run_scores": runs,
        "runs_chart": _runs_chart(runs),
        "error": error,
    }
    if request.htmx and request.method == "GET":
        return render(request, "graphs/evolution/run.html#live", context, status=status)
    return render(request, "graphs/evolution/run.html", context, status=status)


@login_required
def run_view(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    workspace = workspace_by_slug(slug)
    return _run_page(request, workspace, selectors.run_of(workspace, run_id))


def _run_refused(request: HttpRequest, reason: str, slug: str, run_id: int) -> HttpResponse:
    workspace = workspace_by_slug(slug)
    return _run_page(request, workspace, selectors.run_of(workspace, run_id), error=reason)


@login_required
@require_POST
@refusal_shown(_run_refused)
def cancel_view(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    workspace = workspace_by_slug(slug)
    run = selectors.run_of(workspace, run_id)
    try:
        run = evolution_cancel(actor=Actor.of_request(request), run=run)
    except EvolutionRefused as refused:
        run.refresh_from_db()
        return _run_page(request, workspace, run, error=str(refused), status=409)
    if run.is_finished:
        messages.success(request, f"Evolution run {run.pk} cancelled; everything it recorded stays.")
    else:
        messages.info(request, f"Evolution run {run.pk} stops at its next stage; everything it recorded stays.")
    return redirect("graphs:evolution", slug=workspace.slug, run_id=run.pk)


# -- one round --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drawing:
    label: str
    graph: Graph
    mermaid: str | None


def _drawing(label: str, graph: Graph | None) -> Drawing | None:
    """A graph drawn top to bottom, so that two fit side by side at a readable size (graph.mmd runs left to right)."""
    if graph is None:
        return None
    if len(graph.nodes) > DRAW_LIMIT:
        return Drawing(label, graph, None)
    text = to_mermaid(graph)
    if text.startswith("flowchart LR"):
        text = "flowchart TB" + text[len("flowchart LR") :]
    return Drawing(label, graph, text)


def _base_of(workspace: Workspace, item: EvolutionRound) -> tuple[Graph, str]:
    """The round's base graph and its name (`#seq digest12`, or the skeleton for an empty base)."""
    found = revisions.get(workspace, Revision.Kind.GRAPH, item.base_digest) if item.base_digest else None
    if found is not None:
        return Graph.from_document(found.document), f"#{found.seq} {found.short_digest}"
    return selectors.base_graph(workspace, item), "the skeleton"


def _decision_context(decision: dict[str, Any] | None) -> dict[str, Any]:
    """Objective decisions: the rendered lines, the metrics table and the reasons. Scalar ones: the scores and any
    further feedback (the paired gate's interval, a reason)."""
    if not decision:
        return {"decision_kind": "none"}
    if "disposition" in decision:
        metrics = [report for report in decision.get("metrics") or [] if isinstance(report, dict)]
        constraints = decision.get("constraints") or {}
        return {
            "decision_kind": "objective",
            "decision_lines": render_decision(decision),
            "metrics": metrics,
            "constraints": sorted(constraints.items()) if isinstance(constraints, dict) else [],
            "reasons": [str(reason) for reason in decision.get("reasons") or []],
            "disposition": decision.get("disposition"),
        }
    shown = ("accepted", "best_score", "candidate_score")
    return {
        "decision_kind": "scalar",
        "scalar": {key: decision.get(key) for key in shown},
        "extra": sorted((key, value) for key, value in decision.items() if key not in shown),
    }


@login_required
def round_view(request: HttpRequest, slug: str, run_id: int, iteration: int) -> HttpResponse:
    workspace = workspace_by_slug(slug)
    run = selectors.run_of(workspace, run_id)
    item = selectors.round_of(run, iteration)
    candidate = selectors.candidate_graph(item)
    base, base_name = _base_of(workspace, item)
    accepted = item.graph_revision
    if accepted is not None:
        candidate_name = f"#{accepted.seq} {accepted.short_digest}"
    else:
        candidate_name = item.short_candidate or "none"
    diff = (
        unified_diff(base, candidate, fromfile=f"base {base_name}", tofile=f"candidate {candidate_name}")
        if candidate
        else ""
    )
    edits = item.edits or {}
    first = run.first_iteration or iteration
    context = {
        "workspace": workspace,
        "run": run,
        "round": item,
        "badge": OUTCOME_BADGES.get(item.outcome, "badge-unknown"),
        "edit_summary": edit_summary(item.edit_counts),
        "edits": {
            key: list(edits.get(key) or []) for key in ("add_nodes", "delete_nodes", "add_edges", "delete_edges")
        },
        "edits_json": json.dumps(edits, indent=2, ensure_ascii=False, sort_keys=True),
        "base": _drawing(f"base {base_name}", base),
        "candidate": _drawing(f"candidate {candidate_name}", candidate),
        "base_name": base_name,
        "candidate_name": candidate_name,
        "diff": diff_lines(diff),
        "has_diff": candidate is not None,
        "previous": iteration - 1 if iteration > first else None,
        "next": iteration + 1 if iteration + 1 < first + run.rounds_done else None,
        "run_url": reverse("graphs:evolution", args=[workspace.slug, run.pk]),
        **_decision_context(item.decision),
    }
    return render(request, "graphs/evolution/round.html", context)


# -- the rejection memory ---------------------------------------------------------------------------------------------

DEFAULT_FULL = 5
MAX_FULL = 100
CHAR_CAP = 30_000


@login_required
def rejections_view(request: HttpRequest, slug: str) -> HttpResponse:
    """The rejection memory as the refiner reads it (R_k, capped) and the operator's markdown view."""
    workspace = workspace_by_slug(slug)
    memory = selectors.rejection_memory(workspace)
    full = int_or_none(request.GET.get("full"), max_digits=3)
    full = DEFAULT_FULL if full is None else max(0, min(full, MAX_FULL))
    context = {
        "workspace": workspace,
        "memory": memory,
        "counts": memory.counts(),
        "full": full,
        "char_cap": CHAR_CAP,
        "refiner_view": memory.render_for_refiner(full_entries=full, char_cap=CHAR_CAP),
        "markdown": memory.render_markdown(),
    }
    return render(request, "graphs/evolution/rejections.html", context)
