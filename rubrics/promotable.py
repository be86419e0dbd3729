"""Rubric versions as a promotable kind of the reviews registry (registered when RubricsConfig.ready imports this
module), like procedures', graphs' and intents' promotable.py.

parent_key = the rubric's pk, candidate ids = version pks (strings). A rubric version has no measured gate: its
gate evidence is none, so activating one needs two approvals AND an admin override with a written reason (the
simplest honest path: nothing measures a rubric's quality yet; agreement is shown on its page). The diff is the
dimensions before and after; activation moves the rubric's single active pointer, audited `rubric.activate`.
"""

from __future__ import annotations

from django.http import Http404
from django.urls import reverse

from accounts.services import Actor
from common.parsing import int_or_none
from reviews.registry import (
    Choice,
    Description,
    DiffView,
    GateEvidence,
    PromotableKind,
    find_candidate,
    move_active_version,
    number_labels,
    register_kind,
)

from . import audit_blinding  # noqa: F401 (seals people's rubric.assess events until one's own)
from .models import Rubric, RubricVersion, RubricVersionStatus

KIND = "rubric_version"


def _version(candidate_id: str) -> RubricVersion:
    return find_candidate(RubricVersion.objects.select_related("rubric"), candidate_id, "rubric version")


def dimension_rows(before: RubricVersion | None, after: RubricVersion) -> list[dict]:
    """One row per dimension id in either version (the candidate's order first): its before and after, and how
    it changed ("added", "removed", "changed", "same")."""
    old = {d["dimension_id"]: d for d in (before.dimensions if before else [])}
    new = {d["dimension_id"]: d for d in after.dimensions}
    rows = []
    for dimension_id in [*new, *(key for key in old if key not in new)]:
        a, b = old.get(dimension_id), new.get(dimension_id)
        change = "added" if a is None else "removed" if b is None else "same" if a == b else "changed"
        rows.append({"dimension_id": dimension_id, "before": a, "after": b, "change": change})
    return rows


class RubricVersionKind(PromotableKind):
    key = KIND
    label = "rubric version"

    def describe(self, candidate_id: str) -> Description:
        version = _version(candidate_id)
        rubric = version.rubric
        ids = ", ".join(d["dimension_id"] for d in version.dimensions[:6])
        return Description(
            title=f"rubric {rubric} v{version.number}",
            summary=f"{len(version.dimensions)} dimensions: {ids}",
            url=reverse("rubrics:detail", args=[rubric.pk]),
            parent_key=str(rubric.pk),
            parent_label=f"rubric {rubric}",
            label=f"v{version.number}",
        )

    def labels(self, candidate_ids) -> dict[str, str]:
        return number_labels(RubricVersion.objects, candidate_ids)

    def proposable(self, parent_key: str | None = None) -> list[Choice]:
        versions = RubricVersion.objects.filter(status=RubricVersionStatus.CANDIDATE).select_related("rubric")
        if parent_key is not None:
            versions = versions.filter(rubric_id=int_or_none(parent_key))
        return [
            Choice(
                id=str(version.pk),
                label=f"v{version.number}",
                parent_key=str(version.rubric_id),
                parent_label=f"rubric {version.rubric}",
                gate_passing=None,
                gate_note="no measured gate: an admin override is needed",
            )
            for version in versions.order_by("rubric_id", "-number")[:200]
        ]

    def current_active(self, parent_key: str) -> str | None:
        pk = int_or_none(parent_key)
        active = Rubric.objects.filter(pk=pk).values_list("active_version_id", flat=True).first() if pk else None
        return str(active) if active else None

    def learned_texts(self, candidate_id: str) -> list:
        """The rubric's task and each dimension's description (judges and reviewers read them), sourced to the runs
        the rubric was proposed from."""
        from uplift.core.safety import LearnedText, Source

        version = _version(candidate_id)
        sources = tuple(Source(run_id=run_id) for run_id in (version.source_run_ids or [])[:50])
        document = version.document or {}
        texts = [LearnedText(where="rubric task", text=str(document.get("task") or ""), sources=sources)]
        for dimension in version.dimensions:
            where = f"dimension {dimension.get('dimension_id')} description"
            texts.append(LearnedText(where=where, text=str(dimension.get("description") or ""), sources=sources))
        return texts

    def gate_evidence(self, candidate_id: str) -> GateEvidence:
        version = _version(candidate_id)
        return GateEvidence(
            passing=None,
            summary="a rubric version has no measured gate: an admin override with a reason is needed",
            url=reverse("rubrics:agreement", args=[version.rubric_id]),
        )

    def diff(self, candidate_id: str, active_id: str | None) -> DiffView:
        candidate = _version(candidate_id)
        active = RubricVersion.objects.filter(pk=int_or_none(active_id)).first() if active_id else None
        return DiffView(
            template="rubrics/diff.html",
            context={
                "before_label": f"active v{active.number}" if active else "no active version",  # labels: vN
                "after_label": f"candidate v{candidate.number}",
                "rows": dimension_rows(active, candidate),
            },
        )

    def activate(self, *, actor: Actor, candidate_id: str, expected_active_id: str | None) -> None:
        version = _version(candidate_id)
        move_active_version(
            actor=actor,
            parent_model=Rubric,
            parent_id=version.rubric_id,
            version=version,
            expected_active_id=expected_active_id,
            active_status=RubricVersionStatus.ACTIVE,
            retired_status=RubricVersionStatus.RETIRED,
            verb="rubric.activate",
        )

    def review_panel(self, viewer, candidate_id: str, parent_key: str) -> DiffView | None:
        """The agreement between raters under the candidate (alpha per dimension), the figure its reviewers are asked
        to check, with the link to the whole report; None when the rubric or the version is gone."""
        from . import selectors  # selectors import this module (KIND)

        rubric_pk, version_pk = int_or_none(parent_key, max_digits=11), int_or_none(candidate_id, max_digits=11)
        if rubric_pk is None or version_pk is None:
            return None
        try:
            rubric = selectors.rubric_for_user(viewer, rubric_pk)
            version = selectors.version_for_user(viewer, rubric, version_pk)
        except Http404:
            return None
        url = reverse("rubrics:agreement", args=[rubric.pk]) + f"?version={version.pk}"
        report = selectors.agreement_for(viewer, rubric, version)
        return DiffView(template="rubrics/review_agreement.html", context={"agreement": {"report": report, "url": url}})

    def history_url(self, parent_key: str) -> str:
        pk = int_or_none(parent_key)
        return reverse("rubrics:detail", args=[pk]) if pk else ""


register_kind(RubricVersionKind())
