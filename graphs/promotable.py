"""Graph revisions as a promotable kind of the reviews registry (registered in GraphsConfig.ready).

parent_key = the workspace slug, candidate ids = graph revision pks (strings). Gate: the evaluation recorded on the
revision by the evolution gate (origin "accepted" with its validation score); a seeded, onboarded or transferred
graph has none, so its promotion needs an admin override with a reason. Activation runs inside the review's
transaction: lock the workspace, check the expected active revision, move the pointer (the active-graph cache is
dropped on commit), audit `workspace.set_active_revision` (the verb seeding writes too, so rollbacks read one history).
This is the only way a workspace's active pointer moves after seeding.
"""

from __future__ import annotations

from django.urls import reverse

from accounts.services import Actor, audit_record
from config.parsing import int_or_none
from graphs.core import skeleton, to_mermaid, unified_diff
from graphs.diff_lines import diff_lines
from reviews.registry import (
    Description,
    DiffView,
    GateEvidence,
    PromotableKind,
    StaleActivation,
    find_candidate,
    previous_active,
    register_kind,
)

from .models import EvolutionRound, Revision, Workspace
from .selectors import graph_of
from .services import workspace_activate_revision_in_transaction

KIND = "graph_revision"


def measured_round(revision: Revision) -> EvolutionRound | None:
    """The evolution round whose gate accepted this revision (None: hand-written, transferred or seeded)."""
    return (
        EvolutionRound.objects.select_related("run")
        .filter(graph_revision=revision, outcome="accepted")
        .order_by("-id")
        .first()
    )


def _score(value: float | None) -> str:
    return "?" if value is None else f"{value:.4f}"


GRAPH = Revision.Kind.GRAPH


def _revision(candidate_id: str) -> Revision:
    return find_candidate(
        Revision.objects.select_related("workspace").filter(kind=GRAPH), candidate_id, "graph revision"
    )


class GraphRevisionKind(PromotableKind):
    key = KIND
    label = "graph revision"

    def describe(self, candidate_id: str) -> Description:
        revision = _revision(candidate_id)
        workspace = revision.workspace
        return Description(
            title=f"{workspace.slug} graph #{revision.seq}",
            summary=f"{revision.origin or 'graph'} revision {revision.short_digest}",
            url=reverse("graphs:workspace", args=[workspace.slug]),
            parent_key=workspace.slug,
            parent_label=workspace.display_title,
        )

    def current_active(self, parent_key: str) -> str | None:
        active = Workspace.objects.filter(slug=parent_key).values_list("active_revision_id", flat=True).first()
        return str(active) if active else None

    def gate_evidence(self, candidate_id: str) -> GateEvidence:
        revision = _revision(candidate_id)
        measured = measured_round(revision)
        if measured is None:
            return GateEvidence(
                passing=None,
                summary=f"no measured evaluation ({revision.origin or 'unknown'} graph); an admin override is needed",
                url=reverse("graphs:workspace", args=[revision.workspace.slug]),
            )
        run = measured.run
        details = {
            "evolution_run": run.pk,
            "round": measured.iteration,
            "evaluator": run.evaluator,
            "gate": run.gate.get("kind", "tie"),
            "validation_score": measured.candidate_score,
            "retained_score": measured.retained_score,
        }
        if measured.disposition:
            details["disposition"] = measured.disposition
        return GateEvidence(
            passing=True,
            summary=(
                f"accepted by the {details['gate']} gate in evolution run {run.pk}, round {measured.iteration}: "
                f"validation {_score(measured.candidate_score)} against retained {_score(measured.retained_score)} "
                f"({run.evaluator} evaluator)"
            ),
            details=details,
            url=reverse("graphs:evolution_round", args=[revision.workspace.slug, run.pk, measured.iteration]),
        )

    def diff(self, candidate_id: str, active_id: str | None) -> DiffView:
        candidate = _revision(candidate_id)
        workspace = candidate.workspace
        active_pk = int_or_none(active_id)
        active = Revision.objects.filter(pk=active_pk, kind=GRAPH).first() if active_pk else None
        before_graph = graph_of(active) if active else skeleton(**(workspace.vocabulary or {}))
        after_graph = graph_of(candidate)
        left = f"#{active.seq} {active.short_digest}" if active else "skeleton"
        text = unified_diff(
            before_graph, after_graph, fromfile=left, tofile=f"#{candidate.seq} {candidate.short_digest}"
        )
        return DiffView(
            template="reviews/diff_graph.html",
            context={
                "lines": diff_lines(text),
                "drawings": [
                    (f"active {left}", to_mermaid(before_graph) if active else ""),
                    (f"candidate #{candidate.seq}", to_mermaid(after_graph)),
                ],
                "diff_url": reverse("graphs:diff", args=[workspace.slug])
                + (f"?from_ref={active.seq}&to_ref={candidate.seq}" if active else f"?to_ref={candidate.seq}"),
            },
        )

    def activate(self, *, actor: Actor, candidate_id: str, expected_active_id: str | None) -> None:
        revision = _revision(candidate_id)
        locked = Workspace.objects.select_for_update().get(pk=revision.workspace_id)
        actual = str(locked.active_revision_id) if locked.active_revision_id else None
        if actual != expected_active_id:
            raise StaleActivation(
                parent_key=locked.slug, expected_active_id=expected_active_id, actual_active_id=actual
            )
        before = locked.active_revision_id
        workspace_activate_revision_in_transaction(workspace=locked, revision=revision)
        audit_record(
            actor=actor,
            verb="workspace.set_active_revision",
            target=locked,
            before={"active_revision": before},
            after={"active_revision": revision.pk, "seq": revision.seq, "digest": revision.digest},
        )

    def rollback_target(self, parent_key: str) -> str | None:
        workspace = Workspace.objects.filter(slug=parent_key).first()
        if workspace is None or workspace.active_revision_id is None:
            return None
        return previous_active(
            verb="workspace.set_active_revision",
            target_type="graphs.workspace",
            target_id=str(workspace.pk),
            field="active_revision",
            active=workspace.active_revision_id,
        )

    def history_url(self, parent_key: str) -> str:
        return reverse("graphs:workspace", args=[parent_key])

    def demo_candidate(self, *, actor: Actor) -> str | None:
        """seed_demo: a refinement of the two-hop graph measured by a real one-round evolution (once), above the
        active revision."""
        from . import revisions
        from .demo import DEMO_SLUG
        from .evolution.demo import demo_refinement

        workspace = Workspace.objects.filter(slug=DEMO_SLUG).first()
        head = revisions.head(workspace, GRAPH) if workspace else None
        if head is None:
            return None
        if head.pk != workspace.active_revision_id:
            return str(head.pk)
        run = demo_refinement(actor=actor, workspace=workspace)
        accepted = run.rounds.filter(outcome="accepted").exclude(graph_revision=None).first()
        return str(accepted.graph_revision_id) if accepted else None


register_kind(GraphRevisionKind())
