"""Rubric pages: the list (propose from example runs), one rubric (dimensions, versions, promote), its agreement, and
the run page's panel (score, assessments with evidence, a person's assessment, "judge with models").

Everyone logged in reads; reviewers and operators act (the services answer NotAllowed → 403). Pages poll while a
proposal or a judging job is open.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.services import Actor
from common.parsing import int_or_none
from reviews.errors import NotAllowed, ReviewError

from . import selectors, services
from .promotable import KIND, dimension_rows
from .runs import run_or_none

POLL_SECONDS = 2
PANEL = "rubrics/run_panel.html"


def _refuse(exc: ReviewError) -> None:
    if isinstance(exc, NotAllowed):
        raise PermissionDenied(exc.message)


# --- list and propose ------------------------------------------------------------------------------------------------
def _list_page(request: HttpRequest, *, form: dict | None = None, error: str = "", status: int = 200):
    jobs = selectors.open_jobs(request.user)
    context = {
        "rubrics": selectors.rubric_list(request.user),
        "jobs": jobs,
        "polling": bool(jobs),
        "poll_seconds": POLL_SECONDS,
        "can_act": selectors.can_act(request.user),
        "form": form or {"key": "", "run_ids": "", "limit": services.DEFAULT_EXAMPLES},
        "error": error,
    }
    template = "rubrics/list.html#jobs" if request.htmx and request.method == "GET" else "rubrics/list.html"
    return render(request, template, context, status=status)


def _id_list(text: str) -> list[int] | None:
    """ "3, 5 8" → [3, 5, 8]; None when any item is not a positive integer."""
    ids = []
    for part in text.replace(",", " ").split():
        value = int_or_none(part, max_digits=18)
        if value is None or value < 1:
            return None
        ids.append(value)
    return ids


@login_required
def list_view(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _list_page(request)
    form = {
        "key": request.POST.get("key", "")[:200],
        "run_ids": request.POST.get("run_ids", "")[:500],
        "limit": request.POST.get("limit", "") or str(services.DEFAULT_EXAMPLES),
    }
    run_ids = _id_list(form["run_ids"])
    limit = int_or_none(form["limit"], max_digits=3)
    if run_ids is None or limit is None:
        return _list_page(request, form=form, error="run ids and the number of examples must be integers", status=422)
    try:
        job = services.rubric_propose_start(
            actor=Actor.of_request(request), key=form["key"], run_ids=run_ids, limit=limit
        )
    except ReviewError as exc:
        _refuse(exc)
        return _list_page(request, form=form, error=exc.message, status=exc.status)
    messages.success(request, f"Proposal queued: the model reads {len(job.example_run_ids)} example run(s).")
    return redirect("rubrics:detail", pk=job.rubric_id)


# --- one rubric ------------------------------------------------------------------------------------------------------
@login_required
def detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    rubric = selectors.rubric_for_user(request.user, pk)
    versions = selectors.rubric_versions(rubric)
    active = next((v for v in versions if v.pk == rubric.active_version_id), None)
    for version in versions:
        version.rows = dimension_rows(active if version.pk != rubric.active_version_id else None, version)
    jobs = selectors.recent_jobs(request.user, rubric=rubric)
    polling = any(job.is_open for job in jobs)
    context = {
        "rubric": rubric,
        "versions": versions,
        "active": active,
        "jobs": jobs,
        "polling": polling,
        "poll_seconds": POLL_SECONDS,
        "can_act": selectors.can_act(request.user),
        "kind": KIND,
        "history_url": reverse("reviews:history", kwargs={"kind": KIND, "parent_key": str(rubric.pk)}),
    }
    template = "rubrics/detail.html#live" if request.htmx else "rubrics/detail.html"
    return render(request, template, context)


@login_required
def agreement_view(request: HttpRequest, pk: int) -> HttpResponse:
    rubric = selectors.rubric_for_user(request.user, pk)
    version = selectors.version_for_user(request.user, rubric, int_or_none(request.GET.get("version", "")))
    report = selectors.agreement_for(request.user, rubric, version)
    versions = list(rubric.versions.order_by("-number").values_list("pk", "number"))
    return render(request, "rubrics/agreement.html", {"rubric": rubric, "report": report, "versions": versions})


# --- the run page's panel --------------------------------------------------------------------------------------------
def _run(run_id: int):
    run = run_or_none(run_id)
    if run is None:
        raise Http404(f"no run {run_id}")
    return run


def _panel(request: HttpRequest, run, *, error: str = "", form: dict | None = None, status: int = 200):
    panel = selectors.run_panel(request.user, run, error=error, form=form)
    return render(request, PANEL, {"rubric_panel": panel, "poll_seconds": POLL_SECONDS}, status=status)


def _back(run_id: int) -> str:
    return reverse("trajectories:detail", args=[run_id]) + "#rubric"


@login_required
def panel_view(request: HttpRequest, run_id: int) -> HttpResponse:
    selectors.require_member(request.user)
    response = _panel(request, _run(run_id))
    if request.GET.get("poll") and b'hx-trigger="every' not in response.content:
        response["HX-Refresh"] = "true"  # judging ended: reload so the timeline highlights the new evidence
    return response


@login_required
@require_POST
def assess_view(request: HttpRequest, run_id: int) -> HttpResponse:
    """A person's assessment: for each dimension with a score, its confidence, evidence steps and explanation."""
    run = _run(run_id)
    version_id = int_or_none(request.POST.get("version", ""))
    items, form = [], {}
    for did in request.POST.getlist("dimension"):
        raw = {name: request.POST.get(f"{name}:{did}", "").strip() for name in ("score", "confidence", "evidence")}
        raw["explanation"] = request.POST.get(f"explanation:{did}", "")
        form[did] = raw
        if not raw["score"]:
            continue
        evidence = [part for part in raw["evidence"].replace(",", " ").split()]
        item = {
            "dimension_id": did,
            "score": raw["score"],
            "evidence_steps": [int(part) if part.lstrip("-").isdigit() else part for part in evidence],
            "explanation": raw["explanation"],
        }
        if raw["confidence"]:
            item["confidence"] = raw["confidence"]
        items.append(item)
    try:
        services.rubric_assessment_submit(
            actor=Actor.of_request(request), run_id=run.pk, version_id=version_id, items=items
        )
    except ReviewError as exc:
        _refuse(exc)
        if request.htmx:
            return _panel(request, run, error=exc.message, form=form, status=exc.status)
        messages.error(request, exc.message)
        return redirect(_back(run.pk))
    messages.success(request, f"Your assessment of {len(items)} dimension(s) is recorded; the score is updated.")
    if request.htmx:  # reload the run page: its timeline highlights the new evidence steps
        response = _panel(request, run)
        response["HX-Refresh"] = "true"
        return response
    return redirect(_back(run.pk))


@login_required
@require_POST
def judge_view(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run(run_id)
    judges = int_or_none(request.POST.get("judges", ""), max_digits=2) or services.judges_setting()
    try:
        services.rubric_judge_start(
            actor=Actor.of_request(request),
            run_id=run.pk,
            version_id=int_or_none(request.POST.get("version", "")),
            judges=judges,
        )
    except ReviewError as exc:
        _refuse(exc)
        if request.htmx:
            return _panel(request, run, error=exc.message, status=exc.status)
        messages.error(request, exc.message)
        return redirect(_back(run.pk))
    if request.htmx:
        return _panel(request, run)
    messages.success(request, f"{judges} model judge(s) are assessing this run.")
    return redirect(_back(run.pk))
