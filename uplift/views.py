"""Certification pages: a certificate whole, and the certification page (the artifacts flagged "not certified for
<model>", the policies per kind and parent, the critical tasks). Reads are open to every active user; setting a
policy, tagging a critical task and starting a re-certification need the operator role (the services refuse
others: 403). A refused change re-renders the page with the message."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST, require_safe

from accounts.services import Actor
from reviews import registry

from . import selectors, services, watch_services
from .models import Watch


def _kinds() -> list[tuple[str, str]]:
    return [(kind.key, kind.label) for kind in registry.kinds()]


def _back(request: HttpRequest, fallback: str) -> HttpResponse:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        return redirect(target)
    return redirect(fallback)


@login_required
@require_safe
def certificate_view(request: HttpRequest, pk: int) -> HttpResponse:
    certificate = selectors.certificate_by_id(pk)
    if certificate is None:
        raise Http404("no such certificate")
    cv = selectors.certificate_view(certificate, pairs_shown=None)
    context = {"cv": cv, "tasks": certificate.rows, "ledger": selectors.split_ledger(certificate.split)}
    return render(request, "uplift/certificate.html", context)


def _page(request: HttpRequest, *, error: str = "", form: dict | None = None, status: int = 200) -> HttpResponse:
    context = {
        "flags": selectors.coverage_flags(),
        "policies": selectors.policies(),
        "default_policy": selectors.default_policy().to_document(),
        "default_sentence": selectors.policy_sentence(selectors.default_policy().to_document()),
        "critical": selectors.all_critical_tasks(),
        "kinds": _kinds(),
        "error": error,
        "form": form or {},
        "may_operate": request.user.may_operate,
    }
    return render(request, "uplift/policies.html", context, status=status)


POLICY_FIELDS = ("mode", "margin", "min_n", "metric", "alpha", "max_decisions")
NUMBERS = {"margin": float, "alpha": float, "min_n": int, "max_decisions": int}


@login_required
def policies_view(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request)
    form = {name: request.POST.get(name, "").strip() for name in ("kind", "parent_key", *POLICY_FIELDS)}
    fields = {}
    try:
        for name in POLICY_FIELDS:
            if form[name]:
                fields[name] = NUMBERS.get(name, str)(form[name])
        services.policy_set(actor=Actor.of_request(request), kind=form["kind"], parent_key=form["parent_key"], **fields)
    except (ValueError, services.UpliftInvalid) as exc:
        return _page(request, error=f"The policy was not set: {exc}", form=form, status=400)
    messages.success(request, f"Policy of {form['kind']} {form['parent_key'] or '(every parent)'} set.")
    return redirect("uplift:policies")


@login_required
@require_POST
def critical_view(request: HttpRequest) -> HttpResponse:
    actor = Actor.of_request(request)
    kind, parent_key = request.POST.get("kind", "").strip(), request.POST.get("parent_key", "").strip()
    task_key = request.POST.get("task_key", "").strip()
    try:
        if request.POST.get("untag") == "1":
            services.critical_task_untag(actor=actor, kind=kind, parent_key=parent_key, task_key=task_key)
            messages.success(request, f"Task {task_key} is no longer critical.")
        else:
            reason = request.POST.get("reason", "")
            services.critical_task_tag(actor=actor, kind=kind, parent_key=parent_key, task_key=task_key, reason=reason)
            messages.success(request, f"Task {task_key} is critical: any breakage on it blocks certification.")
    except services.UpliftInvalid as exc:
        return _page(request, error=str(exc), status=400)
    return _back(request, "uplift:policies")


@login_required
@require_POST
def recertify_view(request: HttpRequest) -> HttpResponse:
    try:
        started = services.recertification_start(
            actor=Actor.of_request(request),
            kind=request.POST.get("kind", "").strip(),
            candidate_id=request.POST.get("candidate_id", "").strip(),
            model=request.POST.get("model", ""),
        )
    except services.UpliftInvalid as exc:
        messages.error(request, f"Not started: {exc}")
    else:
        messages.success(request, f"Re-certification started: {started}.")
    return _back(request, "uplift:policies")


# --- the watch after activation ----------------------------------------------------------------------------------
@login_required
@require_safe
def watches_view(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", "")[:20]
    context = {"watches": selectors.watches(status=status or None), "status": status, "statuses": Watch.Status.choices}
    return render(request, "uplift/watches.html", context)


def _watch_page(request: HttpRequest, pk: int, *, error: str = "", status: int = 200) -> HttpResponse:
    watch = selectors.watch_by_id(pk)
    if watch is None:
        raise Http404("no such watch")
    context = {"w": watch, **selectors.watch_view(watch), "error": error, "may_operate": request.user.may_operate}
    return render(request, "uplift/watch.html", context, status=status)


@login_required
@require_safe
def watch_view(request: HttpRequest, pk: int) -> HttpResponse:
    return _watch_page(request, pk)


THRESHOLDS = {"alpha": float, "margin": float, "min_runs": int, "max_canary_runs": int, "window_hours": int}


@login_required
@require_POST
def watch_set_view(request: HttpRequest, pk: int) -> HttpResponse:
    watch = selectors.watch_by_id(pk)
    if watch is None:
        raise Http404("no such watch")
    try:
        share_text = request.POST.get("share", "").strip()
        share = float(share_text) / 100 if share_text else None
        fields = {name: kind(request.POST[name]) for name, kind in THRESHOLDS.items() if request.POST.get(name, "")}
        watch_services.watch_set(actor=Actor.of_request(request), watch=watch, share=share, **fields)
    except (ValueError, watch_services.WatchInvalid) as exc:
        return _watch_page(request, pk, error=f"Not changed: {exc}", status=400)
    messages.success(request, "The watch's settings are changed.")
    return redirect("uplift:watch", pk=pk)


@login_required
@require_POST
def watch_stop_view(request: HttpRequest, pk: int) -> HttpResponse:
    watch = selectors.watch_by_id(pk)
    if watch is None:
        raise Http404("no such watch")
    try:
        watch_services.watch_stop(actor=Actor.of_request(request), watch=watch, reason=request.POST.get("reason", ""))
    except watch_services.WatchInvalid as exc:
        return _watch_page(request, pk, error=f"Not stopped: {exc}", status=400)
    messages.success(request, "The canary is stopped: the version it replaced is back for every run.")
    return redirect("uplift:watch", pk=pk)
