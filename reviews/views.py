"""Review pages: the queue, an item (what changes, gate evidence, judgments), per-artifact history, webhooks.

Anonymous and inactive users are sent to the login page; reads are open to every active user; writes need roles
(the services answer RoleRequired or NotAllowed → 403, other refusals re-render the page with the message and its
status).
Verdicts are given on the item page only (the queue's Approve leads there; reviews.js asks to confirm every action
there, the forms post as they are without JavaScript); a verdict then opens the next item waiting for the reviewer,
taken from the queue like "take the next item", and a queue with nothing free says which items others hold.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import time_format
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.roles import Role, RoleRequired, require_role
from accounts.services import Actor
from common.parsing import int_or_none
from uplift import selectors as uplift_selectors

from . import activations, registry, selectors, services, webhooks
from .errors import Invalid, NotAllowed, ReviewError
from .models import PromotionRequest, PromotionStatus, QueueLease, WebhookEvent
from .registry import signed, significant


def _next_url(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        return target
    return fallback


def _refuse(exc: ReviewError) -> None:
    if isinstance(exc, NotAllowed):
        raise PermissionDenied(exc.message)


# --- queue -----------------------------------------------------------------------------------------------------------
@login_required
def queue_view(request: HttpRequest) -> HttpResponse:
    kind = request.GET.get("kind", "")[:64]
    rows = selectors.queue_for(request.user, kind=kind)
    context = {
        "rows": rows,
        "kind": kind,
        "kinds": registry.kinds(),
        "recent": selectors.recent_closed(request.user, kind=kind),
        "mine_count": sum(1 for row in rows if row.pending_for_me),
        "coverage_flags": [] if request.htmx else uplift_selectors.coverage_flags(),
        "watch_alerts": [] if request.htmx else uplift_selectors.recent_watch_alerts(),
    }
    template = "reviews/queue.html#items" if request.htmx else "reviews/queue.html"
    return render(request, template, context)


@login_required
@require_POST
def next_view(request: HttpRequest) -> HttpResponse:
    try:
        item = services.queue_next(actor=Actor.of_request(request), kind=request.POST.get("kind", "")[:64])
    except ReviewError as exc:
        _refuse(exc)
        raise
    if item is None:
        messages.info(request, _nothing_free(request.user, kind=request.POST.get("kind", "")[:64]))
        return redirect("reviews:queue")
    return redirect("reviews:item", pk=item.pk)


def _nothing_free(user, *, kind: str = "", other: bool = False) -> str:
    """Why the queue has nothing for `user` now: nothing waits, or what waits is held by other reviewers (whom, and
    until when: a lease runs out after a few minutes). `other`: said right after a verdict ("nothing else")."""
    nothing = "Nothing else" if other else "Nothing"
    held = selectors.held_by_others(user, kind=kind)
    if not held:
        return f"{nothing} is waiting for your judgment."
    shown = "; ".join(_held_text(lease) for lease in held[:3])
    if len(held) == 1:
        return f"{nothing} is free for you now: 1 item waits for your judgment, but another reviewer holds it: {shown}."
    more = f" and {len(held) - 3} more" if len(held) > 3 else ""
    return (
        f"{nothing} is free for you now: {len(held)} items wait for your judgment, but other reviewers hold them: "
        f"{shown}{more}."
    )


def _held_text(lease: QueueLease) -> str:
    until = time_format(timezone.localtime(lease.expires_at), "H:i")
    return f"“{lease.request.title}” by {lease.holder.username} until {until}"


# --- item ------------------------------------------------------------------------------------------------------------
def _diff(request: HttpRequest, item: PromotionRequest) -> tuple[str, bool, str]:
    """The kind's comparison rendered (an autoescaped template), whether it draws graphs with Mermaid, and its
    counts in one line when the kind gives them (a graph's nodes and edges added, removed, changed)."""
    try:
        view = registry.get_kind(item.kind).diff(item.candidate_id, item.replaces_id)
    except LookupError:
        return "", False, ""
    html = render_to_string(view.template, view.context, request)  # a SafeString: the template autoescaped it
    return html, bool(view.context.get("drawings")), _counts_line(view.context.get("counts"))


def _counts_line(counts: dict[str, int] | None) -> str:
    if not counts:
        return ""
    parts = []
    for what in ("nodes", "edges"):
        changes = ", ".join(f"{counts.get(f'{what}_{c}', 0)} {c}" for c in ("added", "removed", "changed"))
        parts.append(f"{what} {changes}")
    return "; ".join(parts)


def _describe(item: PromotionRequest) -> registry.Description | None:
    try:
        return registry.get_kind(item.kind).describe(item.candidate_id)
    except LookupError:
        return None


def _kind_label(key: str) -> str:
    try:
        return registry.get_kind(key).label
    except registry.UnknownKind:
        return key


def _history_url(item: PromotionRequest) -> str:
    return reverse("reviews:history", kwargs={"kind": item.kind, "parent_key": item.parent_key})


def _metric_rows(gate: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate snapshot's metrics as the page shows them: 3 significant digits, the bound, the active version's
    value and the delta (older snapshots without metrics show their details instead)."""
    rows = []
    for metric in gate.get("metrics") or []:
        rows.append(
            {
                **metric,
                "value_text": significant(metric.get("value")),
                "active_text": significant(metric.get("active")),
                "delta_text": signed(metric.get("delta")),
            }
        )
    return rows


def _still_needed(view: selectors.PromotionView) -> str:
    """What a pending request still needs before it is applied, as the viewer may know it: approvals (how many are
    missing only for whoever may see counts) and the gate (passing, overridden, or an admin's override to come)."""
    item = view.request
    if not item.is_pending:
        return ""
    required = item.required_approvals
    plural = "s" if required != 1 else ""
    why = "it has no measured gate" if item.gate_passing is None else "its gate fails"
    override = f"an admin's override with a written reason, as {why}"
    if view.status == PromotionStatus.APPROVED:  # enough approvals: only the gate is missing
        return f"It has its {required} approval{plural} and waits for {override}."
    if view.counts_visible and view.approvals:
        missing = max(required - view.approvals, 0)
        approvals = f"Open: it has {view.approvals} of {required} approvals and needs {missing} more"
    else:
        approvals = f"Open: needs {required} approval{plural}"
    approvals += " from reviewers other than the proposer"
    if item.is_overridden:
        gate = f"; its gate was overridden by {item.override_by.username}"
    elif item.gate_passing is True:
        gate = "; its gate passes"
    else:
        gate = f", and {override}"
    return f"{approvals}{gate}. One rejection closes the request."


def _review_panel(request: HttpRequest, item: PromotionRequest) -> str:
    """The kind's panel of what else its reviewers should read (PromotableKind.review_panel: a rubric version's
    agreement between raters), rendered (an autoescaped template); "" when the kind shows none."""
    try:
        view = registry.get_kind(item.kind).review_panel(request.user, item.candidate_id, item.parent_key)
    except LookupError:
        return ""
    return render_to_string(view.template, view.context, request) if view is not None else ""


def _certification(request: HttpRequest, item: PromotionRequest, gate: dict[str, Any]) -> dict[str, Any]:
    """The certificate the request was proposed with (else the candidate's newest, issued since), its coverage flag
    and the safety scan, as the item page leads with them (three queries at most)."""
    summary = gate.get("certificate") or {}
    certificate = uplift_selectors.certificate_by_id(summary["id"]) if summary.get("id") else None
    issued_since = False
    if certificate is None:
        certificate = uplift_selectors.latest_certificate(item.kind, item.candidate_id)
        issued_since = certificate is not None
    cv = uplift_selectors.certificate_view(certificate) if certificate is not None else None
    flag = uplift_selectors.coverage_flags_of(item.kind, [item.candidate_id]).get(item.candidate_id)
    recertify = None
    if request.user.may_operate and cv is not None and (cv["exhausted"] or flag is not None):
        recertify = {"kind": item.kind, "candidate_id": item.candidate_id, "model": flag.model if flag else ""}
    return {
        "cv": cv,
        "certificate_issued_since": issued_since,
        "coverage_flag": flag,
        "recertify": recertify,
        "safety": uplift_selectors.safety_for_page(gate.get("safety")),
    }


def _item_page(request: HttpRequest, pk: int, *, error: str = "", form: dict[str, Any] | None = None, status=200):
    item = selectors.promotion_for_user(request.user, pk)
    view = selectors.promotion_view(request.user, item)
    diff_html, needs_mermaid, counts_line = _diff(request, item)
    gate = item.gate_snapshot or {}
    context = {
        **_certification(request, item, gate),
        "item": item,
        "view": view,
        "still_needed": _still_needed(view),
        "override_first": view.can_override and view.can_judge,
        "review_panel_html": _review_panel(request, item),
        "counts_line": counts_line,
        "kind_label": _kind_label(item.kind),
        "metrics": _metric_rows(gate),
        "cases": gate.get("cases") or [],
        "cases_total": gate.get("cases_total") or len(gate.get("cases") or []),
        "description": _describe(item),
        "diff_html": diff_html,
        "needs_mermaid": needs_mermaid,
        "history_url": _history_url(item),
        "error": error,
        "form": form or {},
        "superseded": item.status == PromotionStatus.SUPERSEDED,
        "can_propose": request.user.may_propose,
    }
    return render(request, "reviews/item.html", context, status=status)


@login_required
def item_view(request: HttpRequest, pk: int) -> HttpResponse:
    return _item_page(request, pk)


@login_required
@require_POST
def judge_view(request: HttpRequest, pk: int) -> HttpResponse:
    item = selectors.promotion_for_user(request.user, pk)
    verdict = request.POST.get("verdict", "")
    comment = request.POST.get("comment", "")
    try:
        item = services.judgment_submit(actor=Actor.of_request(request), request=item, verdict=verdict, comment=comment)
    except ReviewError as exc:
        _refuse(exc)
        return _item_page(
            request, pk, error=exc.message, form={"comment": comment, "verdict": verdict}, status=exc.status
        )
    item = selectors.promotion_for_user(request.user, pk)  # with its labels
    if item.status == PromotionStatus.APPLIED:
        replaced = item.replaces_label or "no active version"
        done = f"Approved: {item.title} is now active, replacing {replaced}."
    elif verdict == "reject":
        done = f"Rejected {item.title}: a rejection closes the request."
    else:
        done = f"Approved {item.title}."
    if request.POST.get("next"):
        messages.success(request, done)
        return redirect(_next_url(request, reverse("reviews:item", args=[pk])))
    return _advance(request, done=done, judged=item)


def _advance(request: HttpRequest, *, done: str, judged: PromotionRequest) -> HttpResponse:
    """After a verdict, the next item waiting for this reviewer (taken from the queue like "take the next item"),
    with what was done and what is next in one message; none left: back to the judged item, saying so."""
    try:
        following = services.queue_next(actor=Actor.of_request(request))
    except (ReviewError, RoleRequired):
        following = None
    if following is None:
        messages.success(request, f"{done} {_nothing_free(request.user, other=True)}")
        return redirect("reviews:item", pk=judged.pk)
    messages.success(request, f"{done} Next: {following.title}, waiting for your judgment.")
    return redirect("reviews:item", pk=following.pk)


@login_required
@require_POST
def override_view(request: HttpRequest, pk: int) -> HttpResponse:
    item = selectors.promotion_for_user(request.user, pk)
    reason = request.POST.get("reason", "")
    try:
        services.promotion_override(actor=Actor.of_request(request), request=item, reason=reason)
    except ReviewError as exc:
        _refuse(exc)
        return _item_page(request, pk, error=exc.message, form={"reason": reason}, status=exc.status)
    messages.success(request, "Gate overridden; the override is shown with the request.")
    return redirect("reviews:item", pk=pk)


@login_required
@require_POST
def withdraw_view(request: HttpRequest, pk: int) -> HttpResponse:
    item = selectors.promotion_for_user(request.user, pk)
    try:
        services.promotion_withdraw(actor=Actor.of_request(request), request=item)
    except ReviewError as exc:
        _refuse(exc)
        return _item_page(request, pk, error=exc.message, status=exc.status)
    messages.success(request, "Request withdrawn.")
    return redirect("reviews:item", pk=pk)


# --- propose ---------------------------------------------------------------------------------------------------------
def _candidate_groups(selected: tuple[str, str]) -> list[dict[str, Any]]:
    """What can be proposed, per kind: each choice with its form value (`kind:id`), label, parent, gate state and
    the open request it already has (such a choice is shown but cannot be picked)."""
    pending = selectors.pending_candidates()
    groups = []
    for kind in registry.kinds():
        choices = []
        for choice in kind.proposable():
            choices.append(
                {
                    "value": f"{kind.key}:{choice.id}",
                    "choice": choice,
                    "selected": (kind.key, choice.id) == selected,
                    "open_request": pending.get((kind.key, choice.id)),
                }
            )
        groups.append({"kind": kind, "choices": choices})
    return groups


def _picked(source) -> tuple[str, str]:
    """(kind, candidate id) from the form: the picked `candidate` (`kind:id`, the select's value), else the hidden
    `kind` and `candidate_id` fields of the propose-again and rollback forms (and links from the owning apps)."""
    picked = source.get("candidate", "")
    if picked and ":" in picked:
        kind, _, candidate_id = picked.partition(":")
        return kind[:64], candidate_id[:64]
    return source.get("kind", "")[:64], source.get("candidate_id", "")[:64]


@login_required
def propose_view(request: HttpRequest) -> HttpResponse:
    """GET: the proposal form, a list of what can be proposed (kind and candidate_id may come in the query to
    preselect one); POST: propose the picked candidate."""
    source = request.POST if request.method == "POST" else request.GET
    kind, candidate_id = _picked(source)
    form = {
        "kind": kind,
        "candidate_id": candidate_id,
        "rationale": source.get("rationale", ""),
        "is_rollback": source.get("is_rollback") in ("1", "on", "true"),
        "rollout": "canary" if source.get("rollout") == "canary" else "full",
    }
    share_text = source.get("canary_percent", "10").strip() or "10"
    error, status = "", 200
    if request.method == "POST":
        try:
            if not kind or not candidate_id:
                raise Invalid("choose a candidate from the list", code="candidate_required")
            try:
                share = float(share_text) / 100
            except ValueError:
                raise Invalid("the canary's share is a percentage, e.g. 10", code="bad_rollout") from None
            item = services.promotion_propose(actor=Actor.of_request(request), canary_share=share, **form)
        except ReviewError as exc:
            _refuse(exc)
            error, status = exc.message, exc.status
        else:
            item = selectors.promotion_for_user(request.user, item.pk)
            replaced = item.replaces_label or "no active version"
            messages.success(
                request,
                f"Proposed {item.title}, replacing {replaced}; it needs {item.required_approvals} approvals.",
            )
            return redirect("reviews:item", pk=item.pk)
    elif not request.user.may_propose:
        raise PermissionDenied("proposing a promotion needs the reviewer or operator role")
    groups = _candidate_groups((kind, candidate_id))
    context = {
        "form": {**form, "canary_percent": share_text[:10]},
        "groups": groups,
        "has_choices": any(group["choices"] for group in groups),
        "error": error,
    }
    return render(request, "reviews/propose.html", context, status=status)


# --- history and rollback --------------------------------------------------------------------------------------------
@login_required
def history_view(request: HttpRequest, kind: str, parent_key: str) -> HttpResponse:
    rows = selectors.history_for(request.user, kind=kind, parent_key=parent_key)
    try:
        promotable = registry.get_kind(kind)
    except registry.UnknownKind:
        promotable = None
    active_id = promotable.current_active(parent_key) if promotable else None
    rollback_target = activations.rollback_target(kind, parent_key, active_id)
    activated = list(activations.history(kind, parent_key))
    shown = {active_id, rollback_target} | {i for row in activated for i in (row.version_id, row.replaced_id)}
    labels = promotable.labels([i for i in shown if i]) if promotable else {}
    for row in activated:
        row.version_label = labels.get(row.version_id, f"id {row.version_id}")
        row.replaced_label = labels.get(row.replaced_id, f"id {row.replaced_id}") if row.replaced_id else "—"
    context = {
        "rows": rows,
        "kind": kind,
        "kind_label": promotable.label if promotable else kind,
        "parent_key": parent_key,
        "parent_label": rows[0].parent_label if rows else parent_key,
        "parent_url": promotable.history_url(parent_key) if promotable else "",
        "active_id": active_id,
        "active_label": labels.get(active_id or "", f"id {active_id}"),
        "rollback_target": rollback_target,
        "activations": activated,
        "rollback_label": labels.get(rollback_target or "", f"id {rollback_target}"),
        "can_propose": request.user.may_propose,
    }
    return render(request, "reviews/history.html", context)


@login_required
@require_POST
def rollback_view(request: HttpRequest) -> HttpResponse:
    kind = request.POST.get("kind", "")[:64]
    parent_key = request.POST.get("parent_key", "")[:120]
    try:
        item = services.rollback_emergency(
            actor=Actor.of_request(request), kind=kind, parent_key=parent_key, reason=request.POST.get("reason", "")
        )
    except ReviewError as exc:
        _refuse(exc)
        messages.error(request, exc.message)
        return redirect("reviews:history", kind=kind or "-", parent_key=parent_key or "-")
    item = selectors.promotion_for_user(request.user, item.pk)
    messages.success(
        request, f"Rolled back: {item.candidate_label} ({item.title}) is active again, replacing {item.replaces_label}."
    )
    return redirect("reviews:item", pk=item.pk)


# --- webhooks --------------------------------------------------------------------------------------------------------
def _may_read_webhooks(request: HttpRequest) -> None:
    """Endpoints and deliveries are read by admins only; a read has no service to refuse it, so the one role helper
    is asked here (RoleRequired: the 403 page). Changes are refused by reviews.webhooks' services."""
    require_role(Actor.of_request(request), Role.ADMIN, doing="reading webhooks", code="admin_required")


@login_required
def webhooks_view(request: HttpRequest) -> HttpResponse:
    form = {"url": "", "events": list(WebhookEvent.values)}
    error, status, new_secret = "", 200, ""
    if request.method != "POST":
        _may_read_webhooks(request)
    else:
        form = {"url": request.POST.get("url", ""), "events": request.POST.getlist("events")}
        try:
            endpoint, new_secret = webhooks.webhook_endpoint_create(actor=Actor.of_request(request), **form)
        except ReviewError as exc:
            _refuse(exc)
            error, status = exc.message, exc.status
        else:
            messages.success(request, f"Endpoint {endpoint.url} registered. Copy its secret now: it is shown once.")
            form = {"url": "", "events": list(WebhookEvent.values)}
    context = {
        "endpoints": selectors.webhook_endpoints(request.user),
        "events": WebhookEvent.choices,
        "form": form,
        "error": error,
        "new_secret": new_secret,
    }
    return render(request, "reviews/webhooks.html", context, status=status)


@login_required
@require_POST
def webhook_toggle_view(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = selectors.webhook_endpoint(request.user, pk)
    webhooks.webhook_endpoint_set_active(
        actor=Actor.of_request(request), endpoint=endpoint, active=request.POST.get("active") == "1"
    )
    return redirect("reviews:webhooks")


@login_required
def deliveries_view(request: HttpRequest) -> HttpResponse:
    _may_read_webhooks(request)
    endpoint = request.GET.get("endpoint", "")
    endpoint_id = int_or_none(endpoint, max_digits=11)
    context = {"deliveries": selectors.webhook_deliveries(request.user, endpoint_id=endpoint_id)}
    return render(request, "reviews/deliveries.html", context)
