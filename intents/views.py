"""Intent pages: proposal runs (with the start form), one proposal run, the candidates.

Every page reads through intents.selectors in a fixed number of queries. Starting and cancelling proposal runs need
the operator role (the services refuse others: 403 with the page and the reason, accounts.roles.refusal_shown);
every logged-in user reads. An open run's page and
the runs list refresh their live part by htmx polling (the fragment is rendered without the trigger once nothing is
open, which stops the polling).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.roles import refusal_shown
from accounts.services import Actor
from common.cursors import InvalidCursor

from . import selectors
from .core.candidates import IntentKind
from .forms import StartProposalForm
from .models import IntentCandidateRecord, IntentProposalBatch, IntentProposalRun
from .services import ProposalRefused, intent_proposal_cancel, intent_proposal_start

POLL_SECONDS = 2
STATUS_BADGES = {
    "succeeded": "badge-succeeded",
    "failed": "badge-failed",
    "cancelled": "badge-unknown",
    "malformed": "badge-failure",
    "pending": "badge-unknown",
}
KIND_BADGES = {"declared": "badge-success", "inferred": "badge-unknown", "hindsight": "badge-warning"}


def badge(status: str) -> str:
    return STATUS_BADGES.get(status, "badge-running")


# -- proposal runs and start ------------------------------------------------------------------------------------------


def _list_page(
    request: HttpRequest, *, form: StartProposalForm | None = None, error: str = "", status: int = 200
) -> HttpResponse:
    cursor = request.GET.get("cursor") or None
    try:
        page = selectors.proposal_page(cursor=cursor)
    except InvalidCursor:
        page, error, status = selectors.proposal_page(), "That page of runs does not exist; showing the newest.", 400
    context = {
        "rows": [(run, badge(run.status)) for run in page.runs],
        "next_cursor": page.next_cursor,
        "polling": any(not run.is_finished for run in page.runs),
        "poll_seconds": POLL_SECONDS,
        "form": form or StartProposalForm(),
        "can_operate": request.user.may_operate,
        "error": error,
    }
    if request.htmx and request.method == "GET":
        return render(request, "intents/list.html#runs", context, status=status)
    return render(request, "intents/list.html", context, status=status)


def _list_refused(request: HttpRequest, reason: str) -> HttpResponse:
    return _list_page(request, error=reason)


@login_required
@require_http_methods(["GET", "POST"])
@refusal_shown(_list_refused)
def list_view(request: HttpRequest) -> HttpResponse:
    """GET: the proposal runs and, for operators, the start form. POST: start a run (operators)."""
    if request.method == "GET":
        return _list_page(request)
    form = StartProposalForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form=form, status=422)
    try:
        run = intent_proposal_start(actor=Actor.of_request(request), **form.start_arguments())
    except ProposalRefused as refused:
        form.add_error(None, str(refused))
        return _list_page(request, form=form, status=422)
    messages.success(
        request, f"Intent proposal run {run.pk} started: {run.runs_total} run(s) in {run.batches_total} batch(es)."
    )
    return redirect("intents:run", run_id=run.pk)


# -- one proposal run -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchRow:
    batch: IntentProposalBatch
    badge: str


def _run_page(request: HttpRequest, run: IntentProposalRun, *, error: str = "", status: int = 200) -> HttpResponse:
    batches = selectors.batches_of(run)
    context = {
        "run": run,
        "badge": badge(run.status),
        "batches": [BatchRow(item, badge(item.status)) for item in batches],
        "malformed": [item for item in batches if item.rejected_replies],
        "candidates": selectors.candidates_of_run(run),
        "kind_badges": KIND_BADGES,
        "polling": not run.is_finished,
        "poll_seconds": POLL_SECONDS,
        "can_operate": request.user.may_operate,
        "error": error,
    }
    if request.htmx and request.method == "GET":
        return render(request, "intents/run.html#live", context, status=status)
    return render(request, "intents/run.html", context, status=status)


@login_required
def run_view(request: HttpRequest, run_id: int) -> HttpResponse:
    return _run_page(request, selectors.proposal_of(run_id))


def _run_refused(request: HttpRequest, reason: str, run_id: int) -> HttpResponse:
    return _run_page(request, selectors.proposal_of(run_id), error=reason)


@login_required
@require_POST
@refusal_shown(_run_refused)
def cancel_view(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.proposal_of(run_id)
    try:
        run = intent_proposal_cancel(actor=Actor.of_request(request), run=run)
    except ProposalRefused as refused:
        return _run_page(request, selectors.proposal_of(run_id), error=str(refused), status=409)
    if run.is_finished:
        messages.success(request, f"Intent proposal run {run.pk} cancelled; the candidates it stored stay.")
    else:
        messages.info(request, f"Intent proposal run {run.pk} stops after its current batch.")
    return redirect("intents:run", run_id=run.pk)


# -- candidates -------------------------------------------------------------------------------------------------------


@login_required
def candidates_view(request: HttpRequest) -> HttpResponse:
    kind = request.GET.get("kind") or ""
    if kind not in IntentKind.__members__.values():
        kind = ""
    source = request.GET.get("source") or ""
    filters = selectors.CandidateFilters(
        kind=kind, label=(request.GET.get("label") or "")[:200], source=source if source in ("model", "client") else ""
    )
    status, error = 200, ""
    try:
        page = selectors.candidate_page(filters=filters, cursor=request.GET.get("cursor") or None)
    except InvalidCursor:
        page, status, error = (
            selectors.candidate_page(filters=filters),
            400,
            "That page does not exist; showing the newest.",
        )
    context = {
        "candidates": page.candidates,
        "next_cursor": page.next_cursor,
        "filters": filters,
        "kinds": [item.value for item in IntentKind],
        "kind_badges": KIND_BADGES,
        "error": error,
        "total_shown": len(page.candidates),
        "model_source": IntentCandidateRecord.MODEL_SOURCE,
    }
    return render(request, "intents/candidates.html", context, status=status)
