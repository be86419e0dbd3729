"""Reads of graphs with a fixed number of queries: workspaces, revision refs and pages, parsed graphs and cards."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404

from common.cursors import IntCursor
from graphs.core import Graph
from uplift.core.canary import CONTROL, MAX_KEY, serve

from . import cache
from .models import GraphCertification, Revision, Workspace

GRAPH = Revision.Kind.GRAPH
CERTIFIED_KIND = "graph_revision"  # the promotable kind whose certificates are a revision's
MAX_PAGE_SIZE = 200
MIN_PREFIX = 4
_HEX = re.compile(r"^[0-9a-f]+$")
_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,100}")
REVISION_CURSOR = IntCursor("seq")


class InvalidRef(ValueError):
    """A revision ref that is neither a seq number nor a hex digest prefix, or a prefix that is not unique."""


def workspaces_with_pointers() -> QuerySet[Workspace]:
    """Every workspace with its active revision and its graph head (seq, digest), in one query."""
    heads = Revision.objects.filter(workspace=OuterRef("pk"), kind=GRAPH).order_by("-seq")
    return (
        Workspace.objects.select_related("active_revision")
        .defer("active_revision__document")
        .annotate(head_seq=Subquery(heads.values("seq")[:1]), head_digest=Subquery(heads.values("digest")[:1]))
        .order_by("slug")
    )


def workspace_by_slug(slug: str) -> Workspace:
    """The workspace with its active revision and its canary's control (without their documents), one query."""
    workspace = (
        Workspace.objects.select_related("active_revision", "canary_control")
        .defer("active_revision__document", "canary_control__document")
        .filter(slug=slug)
        .first()
    )
    if workspace is None:
        raise Http404(f"no workspace named {slug!r}")
    return workspace


def _summary(revision: Revision) -> dict[str, Any]:
    return {
        "id": revision.pk,
        "seq": revision.seq,
        "digest": revision.digest,
        "parent_digest": revision.parent_digest,
        "meta": revision.meta,
        "created_at": revision.created_at,
    }


def resolve_revision(workspace: Workspace, ref: str | int, *, kind: str = GRAPH) -> Revision:
    """A seq number, else a unique digest prefix (at least 4 hex characters). Http404 / InvalidRef otherwise."""
    text = str(ref).strip().lower()
    revisions = Revision.objects.filter(workspace=workspace, kind=kind)
    if text.isascii() and text.isdigit() and len(text) <= 9:
        found = revisions.filter(seq=int(text)).first()
        if found is not None:
            return found
    if not _HEX.match(text) or len(text) > 64:
        raise InvalidRef(f"{ref!r} is neither a revision number nor a digest prefix")
    if len(text) < MIN_PREFIX:
        raise Http404(f"no {kind} revision {text} in workspace {workspace.slug!r}")
    matches = list(revisions.filter(digest__startswith=text).order_by("-seq")[:50])
    digests = {m.digest for m in matches}
    if not matches:
        raise Http404(f"no {kind} revision {text} in workspace {workspace.slug!r}")
    if len(digests) > 1:
        raise InvalidRef(f"the digest prefix {text!r} matches {len(digests)} revisions; give more characters")
    return matches[0]


def _is_exact(ref: str) -> bool:
    return (ref.isascii() and ref.isdigit() and len(ref) <= 9) or (len(ref) == 64 and bool(_HEX.match(ref)))


def revision_summary(workspace_id: int, slug: str, ref: str) -> dict[str, Any]:
    """The summary of a graph revision by ref; exact refs are cached (immutable), prefixes are looked up each time."""
    ref = str(ref).strip().lower()
    if _is_exact(ref):
        found = cache.get_ref(workspace_id, ref)
        if found is not None:
            return found
    workspace = Workspace(pk=workspace_id, slug=slug)
    summary = _summary(resolve_revision(workspace, ref))
    if _is_exact(ref) and (len(ref) == 64 or summary["seq"] == int(ref)):
        cache.set_ref(workspace_id, ref, summary)
    return summary


def certificate_header(certificate: dict[str, Any] | None) -> str:
    """The X-Waymark-Certificate header of a certificate summary: `none`, or `id=12; passed=true; uplift=+0.500;
    lower=-0.120; n=40` (the policy's metric, on [-1, 1])."""
    if certificate is None:
        return "none"

    def number(value: Any) -> str:
        return "none" if not isinstance(value, int | float) else f"{value:+.3f}"

    return (
        f"id={certificate['id']}; passed={str(bool(certificate['passed'])).lower()}; "
        f"uplift={number(certificate.get('uplift'))}; lower={number(certificate.get('lower_bound'))}; "
        f"n={certificate.get('n')}"
    )


def revision_certificate(revision_id: int) -> dict[str, Any] | None:
    """The summary of a graph revision's latest certificate (uplift.selectors.certificate_summary; one query)."""
    from uplift.selectors import certificate_summary, latest_certificate

    return certificate_summary(latest_certificate(CERTIFIED_KIND, str(revision_id)))


def workspace_card(slug: str) -> dict[str, Any]:
    """{id, slug, title, task_description, active: summary | None, certificate: the active revision's certificate
    summary | None, certificate_header, canary: None | {share, control: the control's summary, certificate,
    certificate_header (the control's), pins: {seq as text and digest of either arm: that arm's digest}}} (cached
    per slug with the active pointer: a pointer move, a canary started, changed or ended, or a certificate issued for
    the active revision, replaces it); Http404 for no workspace."""

    if not _SLUG.fullmatch(slug):
        raise Http404(f"no workspace named {slug[:100]!r}")

    def build() -> dict[str, Any]:
        workspace = workspace_by_slug(slug)
        active = workspace.active_revision
        certificate = revision_certificate(active.pk) if active is not None else None
        control = workspace.canary_control if active is not None and 0 < workspace.canary_share < 1 else None
        canary = None
        if control is not None:
            control_certificate = revision_certificate(control.pk)
            canary = {
                "share": workspace.canary_share,
                "control": _summary(control),
                "certificate": control_certificate,
                "certificate_header": certificate_header(control_certificate),
                "pins": {
                    str(active.seq): active.digest,
                    active.digest: active.digest,
                    str(control.seq): control.digest,
                    control.digest: control.digest,
                },
            }
        return {
            "id": workspace.pk,
            "slug": workspace.slug,
            "title": workspace.title,
            "task_description": workspace.task_description,
            "active": _summary(active) if active is not None else None,
            "certificate": certificate,
            "certificate_header": certificate_header(certificate),
            "canary": canary,
        }

    return cache.card(slug, build)


@dataclass(frozen=True)
class ServedArm:
    """What one call is served from a workspace card: the revision's summary and its certificate."""

    arm: str  # "canary", "control", or "active" when no canary runs
    summary: dict[str, Any]
    certificate: dict[str, Any] | None
    certificate_header: str


def served_arm(card: dict[str, Any], *, run_key: str | None, pin: str | None) -> ServedArm:
    """The arm this call gets, from the card alone (no query): the active revision when no canary runs; else
    uplift.core.canary.serve over the workspace slug, the run key (`X-Waymark-Run`) and the pin (`X-Waymark-Revision`:
    the seq that header carries, or the digest the ETag and the guidance answer carry, of either arm). A pin naming
    neither arm, a missing or unusable run key: as the core says (the control without a key). Needs an active
    revision (card["active"] not None)."""
    canary = card.get("canary")
    if canary is None:
        return ServedArm("active", card["active"], card.get("certificate"), card.get("certificate_header") or "none")
    active, control = card["active"], canary["control"]
    ref = None
    if pin and len(pin) <= MAX_KEY:
        ref = canary["pins"].get(pin.strip().strip('"').lower())
    arm = serve(
        card["slug"],
        run_key=run_key,
        pin=ref,
        share=canary["share"],
        canary_ref=active["digest"],
        control_ref=control["digest"],
    )
    if arm == CONTROL:
        return ServedArm(CONTROL, control, canary["certificate"], canary["certificate_header"])
    return ServedArm(arm, active, card.get("certificate"), card.get("certificate_header") or "none")


def graph_at(revision_id: int, digest: str) -> Graph:
    """The parsed graph of a revision: one query the first time per digest per process, none after."""
    return cache.graphs.graph(digest, lambda: Revision.objects.values_list("document", flat=True).get(pk=revision_id))


def graph_of(revision: Revision) -> Graph:
    return graph_at(revision.pk, revision.digest)


@dataclass(frozen=True)
class RevisionPage:
    revisions: list[Revision]
    next_cursor: str | None


def revision_page(
    workspace: Workspace, *, kind: str = GRAPH, cursor: str | None = None, limit: int = 50
) -> RevisionPage:
    """Newest first, without documents, in one query. InvalidCursor for a cursor we did not issue."""
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    rows = Revision.objects.filter(workspace=workspace, kind=kind).defer("document")
    return RevisionPage(*REVISION_CURSOR.page(rows, cursor, limit, key="seq"))


def revision_history(workspace: Workspace, *, kind: str = GRAPH, limit: int = 50) -> list[Revision]:
    return list(Revision.objects.filter(workspace=workspace, kind=kind).defer("document").order_by("-seq")[:limit])


@dataclass(frozen=True)
class GraphDiff:
    before: Revision | None
    after: Revision
    text: str

    @property
    def header(self) -> str:
        left = f"#{self.before.seq} {self.before.short_digest}" if self.before else "skeleton"
        return f"--- {left}\n+++ #{self.after.seq} {self.after.short_digest}"


def graph_diff(workspace: Workspace, from_ref: str | None = None, to_ref: str | None = None) -> GraphDiff:
    """A unified diff of graph.md between two revisions; default the previous head against the head.

    With one revision (and no --from), the skeleton of the workspace's vocabulary is the "before". Http404 for an
    empty chain or an unknown ref, InvalidRef for a malformed or ambiguous ref.
    """
    from graphs.core import skeleton, unified_diff

    if to_ref:
        after = resolve_revision(workspace, to_ref)
    else:
        after = Revision.objects.filter(workspace=workspace, kind=GRAPH).order_by("-seq").first()
        if after is None:
            raise Http404(f"workspace {workspace.slug!r} has no graph yet")
    if from_ref:
        before = resolve_revision(workspace, from_ref)
    else:
        before = Revision.objects.filter(workspace=workspace, kind=GRAPH, seq__lt=after.seq).order_by("-seq").first()
    before_graph = graph_of(before) if before else skeleton(**(workspace.vocabulary or {}))
    left = f"#{before.seq} {before.short_digest}" if before else "skeleton"
    text = unified_diff(before_graph, graph_of(after), fromfile=left, tofile=f"#{after.seq} {after.short_digest}")
    return GraphDiff(before, after, text)


def latest_certification(revision: Revision) -> GraphCertification | None:
    """The newest certification (paired evaluation) of a revision, with its revisions (one query)."""
    return (
        GraphCertification.objects.filter(candidate=revision)
        .select_related("candidate", "control", "workspace")
        .defer("candidate__document", "control__document", "candidate_evaluation", "control_evaluation")
        .order_by("-id")
        .first()
    )


def guided_run_models(slug: str, *, since, limit: int) -> dict[str, int]:
    """How many of the newest `limit` production runs the workspace guided (since `since`, when given) came from
    each agent model (one query)."""
    from trajectories.selectors import model_counts, run_queryset

    runs = run_queryset().production().filter(graph_workspace=slug)
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    return model_counts(runs, limit=limit)


def arm_rows(
    slug: str, *, candidate_ref: str, control_ref: str, since, after_id: int = 0, limit: int = 5000
) -> list[tuple[int, str, float, float, str]]:
    """(run id, "canary" | "control", success 1.0/0.0, score, model) of the production runs (never evaluation runs)
    the workspace guided whose `graph_revision` is one of the two digests, received since `since` (None: any time)
    with an id above `after_id`, oldest first, at most `limit`: one query. The score is the run's when it lies in
    [0, 1], else its success; the model is `metadata.model` ("" when it names none)."""
    from trajectories.selectors import run_queryset

    refs = [ref for ref in (candidate_ref, control_ref) if ref]
    if not refs or limit <= 0:
        return []
    runs = run_queryset().production().filter(graph_workspace=slug, graph_revision__in=refs, pk__gt=after_id)
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    rows = runs.order_by("pk").values_list("pk", "graph_revision", "outcome", "score", "metadata__model")[:limit]
    found = []
    for run_id, ref, outcome, score, model in rows:
        success = 1.0 if outcome == "success" else 0.0
        if isinstance(score, int | float) and not isinstance(score, bool) and 0.0 <= score <= 1.0:
            value = float(score)
        else:
            value = success
        arm = "canary" if ref == candidate_ref else "control"
        found.append((run_id, arm, success, value, model[:200] if isinstance(model, str) else ""))
    return found
