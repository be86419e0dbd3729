"""Graph pages: workspaces, one workspace (graphs drawn with Mermaid, tables, history), diffs, try guidance.

A revision becomes active only through reviews: the history offers "propose for activation" (reviews:propose),
shows each revision's certificate and lets operators certify one (graphs.certification_services).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.roles import refusal_shown
from accounts.services import Actor
from graphs.core import Graph, to_mermaid
from reviews.selectors import pending_requests_for
from uplift.selectors import certificates_of

from . import charts, selectors
from .diff_lines import diff_lines
from .forms import DiffForm, GuidanceForm
from .guidance import NoActiveGraph, workspace_guidance
from .models import Revision, Workspace
from .promotable import KIND as PROMOTION_KIND

DRAW_LIMIT = 150
TABLE_LIMIT = 500


@dataclass(frozen=True)
class GraphView:
    """One revision's graph as the page shows it: Mermaid text (small graphs only) and table rows."""

    revision: Revision
    graph: Graph
    mermaid: str | None
    nodes: list[Any]
    edges: list[Any]

    @property
    def truncated(self) -> bool:
        return len(self.graph.nodes) > TABLE_LIMIT or len(self.graph.edges) > TABLE_LIMIT


def _graph_view(revision: Revision | None) -> GraphView | None:
    if revision is None:
        return None
    graph = selectors.graph_of(revision)
    mermaid = to_mermaid(graph) if len(graph.nodes) <= DRAW_LIMIT else None
    return GraphView(
        revision, graph, mermaid, list(graph.nodes.values())[:TABLE_LIMIT], list(graph.edges[:TABLE_LIMIT])
    )


@login_required
def list_view(request: HttpRequest) -> HttpResponse:
    return render(request, "graphs/list.html", {"workspaces": list(selectors.workspaces_with_pointers())})


def _page_context(
    request: HttpRequest, workspace: Workspace, *, guidance_form: GuidanceForm | None = None, **extra: Any
) -> dict[str, Any]:
    history = selectors.revision_history(workspace)
    pending = pending_requests_for(kind=PROMOTION_KIND, parent_key=workspace.slug)
    certificates = certificates_of(PROMOTION_KIND, [str(revision.pk) for revision in history])
    for revision in history:
        revision.pending_request = pending.get(str(revision.pk))
        revision.certificate = certificates.get(str(revision.pk))
    head = history[0] if history else None
    active = workspace.active_revision
    viewing, view_error = active or head, ""
    if request.GET.get("rev"):
        try:
            viewing = selectors.resolve_revision(workspace, request.GET["rev"])
        except (Http404, selectors.InvalidRef) as exc:
            view_error = str(exc)
    return {
        "workspace": workspace,
        "history": history,
        "head": head,
        "active": active,
        "active_view": _graph_view(active),
        "head_view": _graph_view(head) if head and (active is None or head.pk != active.pk) else None,
        "viewing": _graph_view(viewing),
        "view_error": view_error,
        "guidance_form": guidance_form or GuidanceForm(),
        "diff_form": DiffForm(
            initial={"from_ref": history[1].seq if len(history) > 1 else "", "to_ref": head.seq if head else ""}
        ),
        "can_propose": request.user.may_propose,
        "can_certify": request.user.may_operate,
        "active_certificate": next((r.certificate for r in history if active and r.pk == active.pk), None),
        "canary_control": workspace.canary_control if active is not None else None,
        "canary_percent": f"{workspace.canary_share * 100:.3g}",
        "pending_requests": list(pending.values()),
        "promotion_kind": PROMOTION_KIND,
        "draw_limit": DRAW_LIMIT,
        "workspace_trends": charts.workspace_trends(workspace),
        **extra,
    }


@login_required
def workspace_view(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = selectors.workspace_by_slug(slug)
    return render(request, "graphs/workspace.html", _page_context(request, workspace))


def _certify_refused(request: HttpRequest, reason: str, slug: str) -> HttpResponse:
    workspace = selectors.workspace_by_slug(slug)
    return render(request, "graphs/workspace.html", _page_context(request, workspace, certify_error=reason))


@login_required
@require_POST
@refusal_shown(_certify_refused)
def certify_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Operators: queue a certification of a revision (against the active one, or no graph); back to the page (the
    service refuses others: 403 with the page and the reason)."""
    from .certification_services import CertificationRefused, graph_certify

    workspace = selectors.workspace_by_slug(slug)
    try:
        revision = selectors.resolve_revision(workspace, request.POST.get("revision", ""))
        certification, created = graph_certify(actor=Actor.of_request(request), revision=revision)
    except (Http404, selectors.InvalidRef, CertificationRefused) as exc:
        return render(request, "graphs/workspace.html", _page_context(request, workspace, certify_error=str(exc)), 400)
    against = certification.control.label if certification.control_id else "no graph"
    if created:
        messages.success(
            request, f"Certification of {revision.label} against {against} queued ({certification.evaluator})."
        )
    else:
        messages.info(request, f"A certification of {revision.label} is already under way ({certification.status}).")
    return redirect(reverse("graphs:workspace", args=[workspace.slug]) + "#history")


@login_required
def diff_view(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = selectors.workspace_by_slug(slug)
    form = DiffForm(request.GET or None)
    diff, error, status = None, "", 200
    if form.is_bound and not form.is_valid():
        error, status = "Give a revision number or a digest prefix on each side.", 400
    else:
        values = form.cleaned_data if form.is_bound else {}
        try:
            diff = selectors.graph_diff(workspace, values.get("from_ref") or None, values.get("to_ref") or None)
        except selectors.InvalidRef as exc:
            error, status = str(exc), 400
        except Http404 as exc:
            error, status = str(exc), 404
    lines = diff_lines(diff.text) if diff else []
    context = {"workspace": workspace, "form": form, "diff": diff, "lines": lines, "error": error}
    return render(request, "graphs/diff.html", context, status=status)


def _active_ref(workspace: Workspace) -> str | None:
    """What "empty: active" means on the page while a canary runs: the active revision (the canary), not the arm a
    call without a run key is served (the control)."""
    return str(workspace.active_revision.seq) if workspace.canary_control_id and workspace.active_revision else None


@login_required
@require_POST
def guidance_view(request: HttpRequest, slug: str) -> HttpResponse:
    """The localized context an agent would get after the typed steps (raw modes only: no model is called)."""
    workspace = selectors.workspace_by_slug(slug)
    form = GuidanceForm(request.POST)
    result, error, status = None, "", 200
    if form.is_valid():
        data = form.cleaned_data
        try:
            result = workspace_guidance(
                slug=workspace.slug,
                query=data["query"],
                steps=data["steps"],
                mode=data["mode"],
                hops=data["hops"],
                window=3,
                revision=data["revision"] or _active_ref(workspace),
                include_relations=not data["paper_layout"],
            )
        except (NoActiveGraph, selectors.InvalidRef, Http404) as exc:
            error, status = str(exc), 400
    else:
        status = 400
    extra = {"guidance_form": form, "guidance_result": result, "guidance_error": error}
    if request.htmx:
        context = {"workspace": workspace, **extra}
        return render(request, "graphs/workspace.html#guidance", context, status=status)
    return render(request, "graphs/workspace.html", _page_context(request, workspace, **extra), status=status)
