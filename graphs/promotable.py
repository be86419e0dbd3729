"""Graph revisions as a promotable kind of the reviews registry (registered in GraphsConfig.ready).

parent_key = the workspace slug, candidate ids = graph revision pks (strings). Gate: the evaluation recorded on the
revision by the evolution gate (origin "accepted" with its validation score) and the revision's latest certificate
(graphs.certification_services: the candidate against the active revision, or no graph, on the same validation
tasks): passing only when both pass, undecided while it is not certified; a seeded, onboarded or transferred graph
has no measured gate, so its promotion needs an admin override with a reason. Activation runs inside the review's
transaction: lock the workspace, check the expected active revision, move the pointer (the active-graph cache is
dropped on commit), audit `workspace.set_active_revision` (the verb seeding writes too, so rollbacks read one history).
This is the only way a workspace's active pointer moves after seeding. A canary (the watch after activation) is the
same activation with the replaced revision kept as the control for the runs outside its share; a full activation
ends a running canary.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.urls import reverse

from accounts.services import Actor, audit_record
from common.parsing import int_or_none
from graphs.core import skeleton
from graphs.core.diff import graph_diff, to_mermaid_diff
from reviews.activations import activated_since
from reviews.registry import (
    ActiveArtifact,
    ArmRun,
    CanaryState,
    Choice,
    Description,
    DiffView,
    GateEvidence,
    PromotableKind,
    StaleActivation,
    find_candidate,
    register_kind,
    significant,
)
from trajectories.selectors import step_observations
from uplift.core.safety import LearnedText, Source
from uplift.selectors import certificate_summary, certificates_of, latest_certificate

from . import cache
from .models import EvolutionRound, Revision, Workspace, revision_label
from .selectors import arm_rows, graph_of, guided_run_models, latest_certification
from .services import (
    canary_share_of,
    workspace_activate_revision_in_transaction,
    workspace_end_canary_in_transaction,
    workspace_set_canary_share,
    workspace_start_canary_in_transaction,
)

KIND = "graph_revision"
DRAW_LIMIT = 150  # nodes: a bigger graph is shown as its structural diff table only (as on the graph pages)
PROPOSABLE_LIMIT = 200
SOURCE_RUNS_READ = 50  # runs a round's traces name, read for the sources of a learned text


def measured_round(revision: Revision) -> EvolutionRound | None:
    """The evolution round whose gate accepted this revision (None: hand-written, transferred or seeded)."""
    return (
        EvolutionRound.objects.select_related("run")
        .filter(graph_revision=revision, outcome="accepted")
        .order_by("-id")
        .first()
    )


def _is_run_trace(trace_id: str) -> bool:
    return trace_id.startswith("run-") and trace_id[4:].isascii() and trace_id[4:].isdigit()


def _certificate_details(certificate) -> dict:
    """GateEvidence.details of a certificate: its summary and how many per-task rows it holds."""
    if certificate is None:
        return {"certificate": None}
    return {"certificate": certificate_summary(certificate), "certificate_tasks": len(certificate.rows)}


def _certificate_metric(certificate) -> list[dict]:
    """The certificate as one metric row of the gate: the mean paired difference against its policy's bound."""
    if certificate is None:
        return []
    summary = certificate_summary(certificate)
    policy = certificate.policy or {}
    threshold = -policy.get("margin", 0) if policy.get("mode", "non_inferiority") == "non_inferiority" else 0.0
    low = summary["lower_bound"]
    return [
        {
            "metric": f"certified uplift ({summary['metric']})",
            "mode": policy.get("mode"),
            "value": summary["uplift"],
            "threshold": threshold,
            "bound": f"lower bound {significant(low)} > {significant(threshold)}, n ≥ {policy.get('min_n')}",
            "active": None,
            "active_note": f"paired against {summary['against']}",
            "delta": summary["uplift"],
            "passed": bool(certificate.passed),
            "reason": "; ".join(certificate.reasons or []) or "certified",
        }
    ]


def _certificate_note(revision: Revision, certificate) -> str:
    """The certificate in a phrase, or why there is none yet (one query then: the latest certification)."""
    if certificate is not None:
        verdict = "certified" if certificate.passed else "certificate failing"
        note = f"{verdict}: {certificate.sentence}"
        workspace = revision.workspace
        if certificate.replaces_id and certificate.replaces_id != str(workspace.active_revision_id or ""):
            note += " (measured against a revision that is no longer the active one)"
        return note
    certification = latest_certification(revision)
    if certification is None:
        return "not certified yet"
    if certification.is_open:
        return f"not certified yet: a certification evaluation is {certification.status}"
    return f"not certified yet: the last certification {certification.status} ({certification.error or 'no reason'})"


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
    watchable = True  # runs record the digest of the graph they used (Run.graph_revision): arm_runs attributes them

    def describe(self, candidate_id: str) -> Description:
        revision = _revision(candidate_id)
        workspace = revision.workspace
        return Description(
            title=f"{workspace.slug} graph {revision.label}",
            summary=f"{revision.origin or 'graph'} revision {revision.label} (digest {revision.short_digest})",
            url=reverse("graphs:workspace", args=[workspace.slug]),
            parent_key=workspace.slug,
            parent_label=workspace.display_title,
            label=revision.label,
        )

    def labels(self, candidate_ids) -> dict[str, str]:
        pks = sorted({pk for pk in (int_or_none(i) for i in candidate_ids if i) if pk is not None})
        if not pks:
            return {}
        rows = Revision.objects.filter(pk__in=pks, kind=GRAPH).values_list("pk", "seq", "digest")
        return {str(pk): revision_label(seq, digest) for pk, seq, digest in rows}

    def proposable(self, parent_key: str | None = None) -> list[Choice]:
        """Every graph revision that is not its workspace's active one, newest first per workspace; its gate is
        passing when an evolution round accepted it, none otherwise (an admin override is then needed)."""
        accepted = EvolutionRound.objects.filter(graph_revision=OuterRef("pk"), outcome="accepted")
        revisions = (
            Revision.objects.filter(kind=GRAPH)
            .select_related("workspace")
            .annotate(measured=Exists(accepted))
            .order_by("workspace__slug", "-seq")
        )
        if parent_key is not None:
            revisions = revisions.filter(workspace__slug=parent_key)
        rows = [r for r in revisions[:PROPOSABLE_LIMIT] if r.pk != r.workspace.active_revision_id]
        certificates = certificates_of(KIND, [str(r.pk) for r in rows])
        choices = []
        for revision in rows:
            workspace = revision.workspace
            certificate = certificates.get(str(revision.pk))
            if not revision.measured:
                passing, note = None, f"no measured evaluation ({revision.origin or 'unknown'} graph)"
            elif certificate is None:
                passing, note = None, "accepted by an evolution gate; not certified yet"
            else:
                passing = certificate.passed
                note = "accepted by an evolution gate; " + ("certified" if passing else "certificate failing")
            choices.append(
                Choice(
                    id=str(revision.pk),
                    label=revision.label,
                    parent_key=workspace.slug,
                    parent_label=workspace.display_title,
                    gate_passing=passing,
                    gate_note=note,
                )
            )
        return choices

    def current_active(self, parent_key: str) -> str | None:
        active = Workspace.objects.filter(slug=parent_key).values_list("active_revision_id", flat=True).first()
        return str(active) if active else None

    def gate_evidence(self, candidate_id: str) -> GateEvidence:
        """The measured gate (the evolution round that accepted the revision) folded with the revision's latest
        certificate: passing only when both pass; no certificate leaves it undecided (an admin override), saying
        "not certified yet" and why (a certification under way, refused or failed)."""
        revision = _revision(candidate_id)
        measured = measured_round(revision)
        certificate = latest_certificate(KIND, str(revision.pk))
        certified = _certificate_note(revision, certificate)
        if measured is None:
            details = _certificate_details(certificate)
            return GateEvidence(
                passing=None,
                summary=f"no measured evaluation ({revision.origin or 'unknown'} graph); an admin override is needed"
                f"; {certified}",
                details=details,
                url=reverse("graphs:workspace", args=[revision.workspace.slug]),
                metrics=_certificate_metric(certificate),
            )
        run = measured.run
        gate_kind = run.gate.get("kind", "tie")
        details = {
            "evolution_run": run.pk,
            "round": measured.iteration,
            "evaluator": run.evaluator,
            "gate": gate_kind,
            "validation_score": measured.candidate_score,
            "retained_score": measured.retained_score,
        }
        if measured.disposition:
            details["disposition"] = measured.disposition
        candidate, retained = measured.candidate_score, measured.retained_score
        numbers = candidate is not None and retained is not None
        minimum_delta = run.gate.get("minimum_delta")
        bound = (
            f"> retained by at least {minimum_delta:g}"
            if gate_kind == "strict" and isinstance(minimum_delta, int | float)
            else f"accepted by the {gate_kind} gate against the retained graph"
            if gate_kind not in ("tie", "strict")
            else "≥ retained"
        )
        metrics = [
            {
                "metric": "validation_score",
                "mode": gate_kind,
                "value": candidate,
                "threshold": retained,
                "bound": bound,
                "active": retained,
                "active_note": "the retained graph the gate compared with",
                "delta": (candidate - retained) if numbers else None,
                "passed": True,
                "reason": "accepted",
            },
            *_certificate_metric(certificate),
        ]
        details.update(_certificate_details(certificate))
        return GateEvidence(
            passing=None if certificate is None else certificate.passed,
            summary=(
                f"accepted by the {gate_kind} gate in evolution run {run.pk}, round {measured.iteration}: "
                f"validation {_score(measured.candidate_score)} against retained {_score(measured.retained_score)} "
                f"({run.evaluator} evaluator); {certified}"
            ),
            details=details,
            url=reverse("graphs:evolution_round", args=[revision.workspace.slug, run.pk, measured.iteration]),
            metrics=metrics,
        )

    def diff(self, candidate_id: str, active_id: str | None) -> DiffView:
        """The structural difference (nodes and edges added, removed, changed) as a table, and the candidate drawn
        with those changes marked; the unchanged parts are not listed (nothing reads like a deletion)."""
        candidate = _revision(candidate_id)
        workspace = candidate.workspace
        active_pk = int_or_none(active_id)
        active = Revision.objects.filter(pk=active_pk, kind=GRAPH).first() if active_pk else None
        before_graph = graph_of(active) if active else skeleton(**(workspace.vocabulary or {}))
        after_graph = graph_of(candidate)
        changes = graph_diff(before_graph, after_graph)
        left = f"active {active.label}" if active else "the skeleton (no active graph)"
        drawable = len(after_graph.nodes) + len(changes.nodes_with("removed")) <= DRAW_LIMIT
        return DiffView(
            template="reviews/diff_graph.html",
            context={
                "before_label": left,
                "after_label": f"candidate {candidate.label}",
                "diff": changes,
                "counts": changes.counts(),
                "node_total": len(after_graph.nodes),
                "edge_total": len(after_graph.edges),
                "drawings": [
                    (
                        f"candidate {candidate.label}, changes against {left} marked",
                        to_mermaid_diff(before_graph, after_graph, changes),
                    )
                ]
                if drawable
                else [],
                "diff_url": reverse("graphs:diff", args=[workspace.slug])
                + (f"?from_ref={active.seq}&to_ref={candidate.seq}" if active else f"?to_ref={candidate.seq}"),
            },
        )

    def _locked(self, revision: Revision, expected_active_id: str | None) -> Workspace:
        """The revision's workspace locked for the caller's transaction, its active revision the expected one."""
        locked = Workspace.objects.select_for_update().get(pk=revision.workspace_id)
        actual = str(locked.active_revision_id) if locked.active_revision_id else None
        if actual != expected_active_id:
            raise StaleActivation(
                parent_key=locked.slug, expected_active_id=expected_active_id, actual_active_id=actual
            )
        return locked

    def activate(self, *, actor: Actor, candidate_id: str, expected_active_id: str | None) -> None:
        """The full activation (a running canary ends with it: every run gets the revision)."""
        revision = _revision(candidate_id)
        locked = self._locked(revision, expected_active_id)
        before = {"active_revision": locked.active_revision_id}
        if locked.canary_control_id is not None:
            before["canary"] = {"control": locked.canary_control_id, "share": locked.canary_share}
        workspace_activate_revision_in_transaction(workspace=locked, revision=revision)
        audit_record(
            actor=actor,
            verb="workspace.set_active_revision",
            target=locked,
            before=before,
            after={
                "active_revision": revision.pk,
                "seq": revision.seq,
                "digest": revision.digest,
                "label": revision.label,
            },
        )

    def history_url(self, parent_key: str) -> str:
        return reverse("graphs:workspace", args=[parent_key])

    # --- the watch after activation -----------------------------------------------------------------------------
    def start_canary(self, *, actor: Actor, candidate_id: str, expected_active_id: str | None, share: float) -> None:
        """As `activate` (lock, StaleActivation, pointer, audit), the revision it replaced kept as the control for
        the runs outside `share` (services.workspace_start_canary_in_transaction). ValueError, with the reason, for
        a share outside (0, 1) and for a workspace with no active revision (nothing to serve the other runs: such a
        revision is activated fully), checked before the workspace is locked where it can be."""
        canary_share_of(share)
        revision = _revision(candidate_id)
        locked = self._locked(revision, expected_active_id)
        workspace_start_canary_in_transaction(actor=actor, workspace=locked, revision=revision, share=share)

    def canary_state(self, parent_key: str) -> CanaryState | None:
        """One query: the active revision and the control with their digests (the refs runs record)."""
        row = (
            Workspace.objects.filter(slug=parent_key, canary_control__isnull=False)
            .values_list(
                "active_revision_id",
                "canary_control_id",
                "active_revision__digest",
                "canary_control__digest",
                "canary_share",
            )
            .first()
        )
        if row is None or row[0] is None:
            return None
        active, control, active_ref, control_ref, share = row
        return CanaryState(
            parent_key=parent_key,
            candidate_id=str(active),
            control_id=str(control),
            candidate_ref=active_ref,
            control_ref=control_ref,
            share=share,
        )

    def set_canary_share(self, *, actor: Actor, parent_key: str, share: float) -> None:
        workspace_set_canary_share(actor=actor, slug=parent_key, share=share)

    def end_canary(self, *, actor: Actor, parent_key: str) -> None:
        """Inside the caller's transaction; nothing is written when no canary runs (a second call is harmless)."""
        locked = Workspace.objects.select_for_update().filter(slug=parent_key).first()
        if locked is not None:
            workspace_end_canary_in_transaction(actor=actor, workspace=locked)

    def ref_of(self, candidate_id: str) -> str:
        """The revision's digest: what agents record as a run's `graph_revision` (the Python client records the
        digest of the graph it pinned) and what the ETag names."""
        pk = int_or_none(candidate_id)
        found = Revision.objects.filter(pk=pk, kind=GRAPH).values_list("digest", flat=True).first() if pk else None
        return found or ""

    def arm_runs(self, parent_key: str, *, candidate_ref: str, control_ref: str, since, after_id: int = 0,
                 limit: int = 5000) -> list[ArmRun]:  # fmt: skip
        """Production runs of the workspace (never evaluation runs) naming one of the two digests, one query."""
        return [
            ArmRun(run_id=run_id, arm=arm, success=success, score=score, model=model)
            for run_id, arm, success, score, model in arm_rows(
                parent_key, candidate_ref=candidate_ref, control_ref=control_ref, since=since, after_id=after_id,
                limit=limit,
            )
        ]  # fmt: skip

    # --- certified uplift ---------------------------------------------------------------------------------------
    def learned_texts(self, candidate_id: str) -> list[LearnedText]:
        """Every node description and every edge's condition, guidance and pitfalls. Their sources: the stored runs
        the refiner saw in the round that accepted the revision (its traces `run-<id>`), the steps calling the node
        (for an edge, its two ends) with their observations."""
        revision = _revision(candidate_id)
        graph = graph_of(revision)
        measured = measured_round(revision)
        run_ids = [int(trace[4:]) for trace in (measured.trace_ids if measured else []) if _is_run_trace(trace)]
        observed: dict[str, list[Source]] = {}
        for run_id, ordinal, tool, observation in step_observations(run_ids[:SOURCE_RUNS_READ], list(graph.nodes)):
            observed.setdefault(tool, []).append(Source(run_id=run_id, step=ordinal, observation=observation or ""))
        texts = [
            LearnedText(
                where=f"node {node_id} description", text=node.description, sources=tuple(observed.get(node_id, ()))
            )
            for node_id, node in graph.nodes.items()
            if node.description
        ]
        for edge in graph.edges:
            sources = tuple(observed.get(edge.source, ())) + tuple(observed.get(edge.target, ()))
            for field in ("condition", "guidance", "pitfalls"):
                text = (edge.attributes or {}).get(field)
                if isinstance(text, str) and text:
                    where = f"edge {edge.source} → {edge.target} {field}"
                    texts.append(LearnedText(where=where, text=text, sources=sources))
        return texts

    def active_artifacts(self) -> list[ActiveArtifact]:
        """Every workspace's active revision, with when it was last activated through a review (two queries)."""
        workspaces = list(
            Workspace.objects.filter(active_revision__isnull=False)
            .select_related("active_revision")
            .defer("active_revision__document")
        )
        since = activated_since(KIND, [workspace.slug for workspace in workspaces])
        return [
            ActiveArtifact(
                parent_key=workspace.slug,
                candidate_id=str(workspace.active_revision_id),
                parent_label=workspace.display_title,
                label=workspace.active_revision.label,
                url=reverse("graphs:workspace", args=[workspace.slug]),
                since=since.get(workspace.slug),
            )
            for workspace in workspaces
        ]

    def recent_run_models(self, artifact: ActiveArtifact, *, limit: int) -> dict[str, int]:
        """The newest `limit` production runs the workspace guided since its revision became active."""
        return guided_run_models(artifact.parent_key, since=artifact.since, limit=limit)

    def recertify(self, *, actor: Actor, candidate_id: str, model: str | None) -> str:
        """A certification evaluation of the revision again: the agents evaluator on tasks of runs received after
        its last certificate's split was drawn (of `model` when given); other evaluators on their own tasks."""
        from .certification_services import CertificationRefused, graph_certify

        revision = _revision(candidate_id)
        last = latest_certificate(KIND, str(revision.pk))
        after = last.split.drawn_at if last is not None else None
        try:
            certification, created = graph_certify(actor=actor, revision=revision, after=after, model=model)
        except CertificationRefused as exc:
            raise ValueError(str(exc)) from None
        against = certification.control.label if certification.control_id else "no graph"
        state = "queued" if created else "already under way"
        of_model = f" on runs of {model}" if model else ""
        return f"certification {certification.pk} of {revision.label} against {against}{of_model} {state}"

    def certification_changed(self, parent_key: str) -> None:
        """The active graph's API answer carries its certificate: the workspace card is dropped on commit."""
        transaction.on_commit(lambda: cache.forget_active(parent_key))

    def demo_candidate(self, *, actor: Actor) -> str | None:
        """seed_demo: a refinement of the two-hop graph measured by a real one-round evolution (once), above the
        active revision, and certified against it from that round's two evaluations (the retained graph is the
        active one): the demo's review queue shows a certified candidate."""
        from . import revisions
        from .demo import DEMO_SLUG, ensure_demo_policy
        from .evolution.demo import demo_refinement

        workspace = Workspace.objects.filter(slug=DEMO_SLUG).first()
        head = revisions.head(workspace, GRAPH) if workspace else None
        if head is None:
            return None
        if head.pk != workspace.active_revision_id:
            return str(head.pk)
        ensure_demo_policy(actor=actor)  # the round's certificate is judged by it
        run = demo_refinement(actor=actor, workspace=workspace)
        accepted = run.rounds.filter(outcome="accepted").exclude(graph_revision=None).first()
        return str(accepted.graph_revision_id) if accepted else None


register_kind(GraphRevisionKind())
