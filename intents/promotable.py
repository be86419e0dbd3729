"""Taxonomy versions as a promotable kind of the reviews registry (registered in IntentsConfig.ready).

parent_key = the taxonomy's slug, candidate ids = version pks (strings). Gate: every candidate a version adds or
merges has at least two judgments with agreement of at least 2/3 (recomputed from the judgments, which only ever
grow); a version that only relabels passes (its two approvals are its review). Activation runs inside the review's
transaction: lock the taxonomy row, check the expected active version (StaleActivation → 409), move the pointer,
bump `revision`, write one `TaxonomyActivation` row (rollback targets read it) and audit `intent_taxonomy.activate`.
"""

from __future__ import annotations

from django.urls import reverse
from django.utils import timezone

from accounts.services import Actor, audit_record
from common.parsing import int_or_none
from reviews.registry import (
    Choice,
    Description,
    DiffView,
    GateEvidence,
    PromotableKind,
    StaleActivation,
    find_candidate,
    number_labels,
    register_kind,
)
from reviews.selectors import latest_request_for
from uplift.core.safety import LearnedText

from .models import IntentCandidateRecord, IntentJudgment, IntentTaxonomy, TaxonomyActivation, TaxonomyVersion
from .taxonomy.services import KIND, MIN_AGREEMENT, MIN_JUDGMENTS, summarize


def _version(candidate_id: str) -> TaxonomyVersion:
    return find_candidate(TaxonomyVersion.objects.select_related("taxonomy"), candidate_id, "taxonomy version")


def change_counts(version: TaxonomyVersion) -> dict[str, int]:
    counts = {"added": 0, "merged": 0, "relabelled": 0}
    for change in version.changes:
        counts[change["change"]] = counts.get(change["change"], 0) + 1
    return counts


def backing_candidate_ids(version: TaxonomyVersion) -> list[str]:
    ids: list[str] = []
    for change in version.changes:
        ids.extend(change.get("candidate_ids") or ([change["candidate_id"]] if change.get("candidate_id") else []))
    return sorted(set(ids))


def taxonomy_url(version: TaxonomyVersion) -> str:
    return reverse("intents:taxonomy") + f"?version={version.number}"


class TaxonomyVersionKind(PromotableKind):
    key = KIND
    label = "intent taxonomy"

    def describe(self, candidate_id: str) -> Description:
        version = _version(candidate_id)
        counts = change_counts(version)
        return Description(
            title=f"intent taxonomy v{version.number}",
            summary=(
                f"{len(version.intents)} intents: {counts['added']} added, {counts['merged']} merged, "
                f"{counts['relabelled']} relabelled"
            ),
            url=taxonomy_url(version),
            parent_key=version.taxonomy.slug,
            parent_label=str(version.taxonomy),
            label=f"v{version.number}",
        )

    def labels(self, candidate_ids) -> dict[str, str]:
        return number_labels(TaxonomyVersion.objects, candidate_ids)

    def proposable(self, parent_key: str | None = None) -> list[Choice]:
        """Every version that is not its taxonomy's active one, newest first; its gate (judgments of the
        candidates it adds or merges) is computed when it is proposed."""
        versions = TaxonomyVersion.objects.select_related("taxonomy").order_by("taxonomy__slug", "-number")
        if parent_key is not None:
            versions = versions.filter(taxonomy__slug=parent_key)
        return [
            Choice(
                id=str(version.pk),
                label=f"v{version.number}",
                parent_key=version.taxonomy.slug,
                parent_label=str(version.taxonomy),
                gate_passing=None,
                gate_note="judgment agreement checked when proposed",
            )
            for version in versions[:200]
            if version.pk != version.taxonomy.active_version_id
        ]

    def current_active(self, parent_key: str) -> str | None:
        active = IntentTaxonomy.objects.filter(slug=parent_key).values_list("active_version_id", flat=True).first()
        return str(active) if active else None

    def learned_texts(self, candidate_id: str) -> list[LearnedText]:
        """Each intent's label and aliases (agents and reviewers read them; labels come from model proposals, and
        the candidates behind them cite runs: those runs are the texts' sources, their observations unread here)."""
        version = _version(candidate_id)
        texts = []
        for intent in (version.document or {}).get("intents") or []:
            name = str(intent.get("intent_id") or intent.get("label") or "")
            texts.append(LearnedText(where=f"intent {name} label", text=str(intent.get("label") or "")))
            for alias in intent.get("aliases") or []:
                texts.append(LearnedText(where=f"intent {name} alias", text=str(alias)))
        return texts

    def gate_evidence(self, candidate_id: str) -> GateEvidence:
        version = _version(candidate_id)
        ids = backing_candidate_ids(version)
        url = taxonomy_url(version)
        if not ids:
            return GateEvidence(passing=True, summary="label edits only: no candidate needs judgments", url=url)
        records = list(IntentCandidateRecord.objects.filter(candidate_id__in=ids))
        judgments = IntentJudgment.objects.filter(candidate__candidate_id__in=ids).select_related("candidate")
        summaries = summarize(records, judgments)
        weak = sorted(cid for cid in ids if cid not in summaries or not summaries[cid].accepted)
        details = {
            cid: (
                f"{summaries[cid].judgments} judgments, agreement {summaries[cid].agreement:.2f}"
                if cid in summaries
                else "no stored candidate"
            )
            for cid in ids
        }
        rule = f"at least {MIN_JUDGMENTS} judgments with agreement ≥ {MIN_AGREEMENT:.2f}"
        if weak:
            return GateEvidence(
                passing=False,
                summary=f"{len(weak)} of {len(ids)} candidates lack {rule}",
                details=details,
                url=url,
            )
        return GateEvidence(
            passing=True, summary=f"all {len(ids)} candidates backing the changes have {rule}", details=details, url=url
        )

    def diff(self, candidate_id: str, active_id: str | None) -> DiffView:
        version = _version(candidate_id)
        active = TaxonomyVersion.objects.filter(pk=int_or_none(active_id)).first() if active_id else None
        by_kind: dict[str, list[dict]] = {"added": [], "merged": [], "relabelled": []}
        for change in version.changes:
            by_kind.setdefault(change["change"], []).append(change)
        return DiffView(
            template="intents/taxonomy/diff.html",
            context={
                "before_label": f"active v{active.number}" if active else "no active taxonomy",
                "after_label": f"candidate v{version.number}",
                "based_on": f"v{version.parent.number}" if version.parent_id else "nothing",
                "stale_base": (active.pk if active else None) != version.parent_id,
                "added": by_kind["added"],
                "merged": by_kind["merged"],
                "relabelled": by_kind["relabelled"],
                "intent_count": len(version.intents),
                "url": taxonomy_url(version),
            },
        )

    def activate(self, *, actor: Actor, candidate_id: str, expected_active_id: str | None) -> None:
        version = _version(candidate_id)
        taxonomy = IntentTaxonomy.objects.select_for_update().get(pk=version.taxonomy_id)
        actual = str(taxonomy.active_version_id) if taxonomy.active_version_id else None
        if actual != expected_active_id:
            raise StaleActivation(
                parent_key=taxonomy.slug, expected_active_id=expected_active_id, actual_active_id=actual
            )
        previous = taxonomy.active_version_id
        request = latest_request_for(kind=KIND, candidate_id=str(version.pk))
        now = timezone.now()
        revision = taxonomy.revision + 1
        IntentTaxonomy.objects.filter(pk=taxonomy.pk).update(
            active_version=version.pk, revision=revision, updated_at=now
        )
        TaxonomyActivation.objects.create(
            taxonomy=taxonomy,
            version=version,
            replaced_id=previous,
            request_id=request.pk if request else None,
            is_rollback=bool(request and request.is_rollback),
            activated_by=actor.user,
            activated_at=now,
        )
        audit_record(
            actor=actor,
            verb="intent_taxonomy.activate",
            target=taxonomy,
            before={"active_version": previous, "revision": taxonomy.revision},
            after={
                "active_version": version.pk,
                "number": version.number,
                "label": f"v{version.number}",
                "revision": revision,
            },
        )

    def history_url(self, parent_key: str) -> str:
        return reverse("intents:taxonomy")


register_kind(TaxonomyVersionKind())
