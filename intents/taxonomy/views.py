"""Taxonomy pages: the reviewed intent taxonomy (active version, history, drafting the next one) and the intent
review queue (candidates waiting for the reviewer's judgment, keyboard-driven; plain forms work without script).

Reads are open to every logged-in user; judging needs the reviewer role, drafting the reviewer or operator role (the
services answer NotAllowed → 403; other refusals re-render the page with the message and the error's status).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.services import Actor
from common.parsing import int_or_none
from reviews.errors import NotAllowed, ReviewError

from ..promotable import change_counts
from . import selectors, services

KIND_BADGES = {"declared": "badge-success", "inferred": "badge-unknown", "hindsight": "badge-warning"}


def _refuse(exc: ReviewError) -> None:
    if isinstance(exc, NotAllowed):
        raise PermissionDenied(exc.message)


# --- the taxonomy ----------------------------------------------------------------------------------------------------
def _taxonomy_page(request: HttpRequest, *, error: str = "", form: dict | None = None, status: int = 200):
    number = int_or_none(request.GET.get("version"), max_digits=9)
    page = selectors.taxonomy_page(request.user, number=number)
    can_draft = request.user.may_draft_intents
    preview = services.taxonomy_preview(request.user) if can_draft else None
    versions = [
        {
            "version": v,
            "counts": change_counts(v),
            "is_active": page.active is not None and v.pk == page.active.pk,
            "request": page.pending.get(str(v.pk)),
        }
        for v in page.versions
    ]
    context = {
        "page": page,
        "shown": page.shown,
        "intents": page.shown.intents if page.shown else [],
        "versions": versions,
        "can_draft": can_draft,
        "preview": preview,
        "active_intents": page.active.intents if page.active else [],
        "awaiting": selectors.awaiting_count(request.user) if can_draft else 0,
        "error": error,
        "form": form or {},
        "history_url": reverse("reviews:history", args=[services.KIND, page.taxonomy.slug]) if page.taxonomy else "",
    }
    return render(request, "intents/taxonomy/page.html", context, status=status)


@login_required
def taxonomy_view(request: HttpRequest) -> HttpResponse:
    return _taxonomy_page(request)


@login_required
@require_POST
def draft_view(request: HttpRequest) -> HttpResponse:
    """Draft the next version (with the optional label edit) and propose it for activation."""
    relabel_id = request.POST.get("relabel_intent", "").strip()[:40]
    relabel_to = request.POST.get("relabel_label", "")
    rationale = request.POST.get("rationale", "").strip() or "next version of the reviewed intent taxonomy"
    form = {"relabel_intent": relabel_id, "relabel_label": relabel_to, "rationale": rationale}
    actor = Actor.of_request(request)
    try:
        result = services.taxonomy_draft(actor=actor, relabels={relabel_id: relabel_to} if relabel_id else None)
        item = services.taxonomy_propose(actor=actor, version=result.version, rationale=rationale)
    except ReviewError as exc:
        _refuse(exc)
        return _taxonomy_page(request, error=exc.message, form=form, status=exc.status)
    messages.success(
        request, f"Drafted taxonomy v{result.version.number}; it waits for {item.required_approvals} approvals."
    )
    return redirect("reviews:item", pk=item.pk)


# --- the intent review queue -----------------------------------------------------------------------------------------
QUEUE = "intents/taxonomy/queue.html"


def _queue_url(candidate_pk: int | None) -> str:
    url = reverse("intents:taxonomy_queue")
    return f"{url}?candidate={candidate_pk}" if candidate_pk else url


def _queue_page(
    request: HttpRequest,
    *,
    focus: int | None = None,
    error: str = "",
    done: str = "",
    form: dict | None = None,
    status: int = 200,
) -> HttpResponse:
    """The queue with one candidate reviewed inline (`focus`, else the first waiting); htmx gets the review part
    only (`queue.html#review`: the list, the candidate with its evidence, your recent judgments)."""
    page = selectors.review_queue_for(request.user, focus=focus)
    context = {
        "rows": [(row, KIND_BADGES.get(row.kind, "badge-unknown")) for row in page.rows],
        "total": page.total,
        "intents": page.intents,
        "recent": page.recent,
        "focus": page.focus,
        "kind_badges": KIND_BADGES,
        "error": error,
        "done": done,
        "form": form or {},
        "verdicts": services.Verdict,
        "queue_url": reverse("intents:taxonomy_queue"),
    }
    response = render(request, f"{QUEUE}#review" if request.htmx else QUEUE, context, status=status)
    if request.htmx and page.focus is not None and status < 400:
        response["HX-Push-Url"] = _queue_url(page.focus.candidate.pk)  # Back and reload keep the candidate
    return response


@login_required
def review_queue_view(request: HttpRequest) -> HttpResponse:
    return _queue_page(request, focus=int_or_none(request.GET.get("candidate"), max_digits=18))


@login_required
@require_POST
def judge_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Judge a candidate, then move on to the next one (`next`, the candidate after it when the page was shown)."""
    candidate = selectors.candidate_for(request.user, pk)
    verdict = request.POST.get("verdict", "")
    following = int_or_none(request.POST.get("next"), max_digits=18)
    form = {"comment": request.POST.get("comment", ""), "merge_target": request.POST.get("merge_target", "")}
    try:
        judgment = services.intent_judgment_submit(
            actor=Actor.of_request(request),
            candidate=candidate,
            verdict=verdict,
            merge_target=form["merge_target"],
            comment=form["comment"],
        )
    except ReviewError as exc:
        _refuse(exc)
        return _queue_page(request, focus=candidate.pk, error=exc.message, form=form, status=exc.status)
    target = f" into {judgment.merge_target}" if judgment.merge_target else ""
    done = f"Judged “{candidate.intent}”: {judgment.verdict}{target}."
    if request.htmx:
        return _queue_page(request, focus=following, done=done)
    messages.success(request, done)
    return redirect(_queue_url(following))
