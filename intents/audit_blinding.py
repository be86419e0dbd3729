"""Judgments of intent candidates in the audit log are sealed like on the judging pages: until the candidate is in
the active taxonomy, only reviewers who have judged its candidate id see the others' (accounts.blinding)."""

from __future__ import annotations

from .models import IntentCandidateRecord, IntentJudgment
from .taxonomy_selectors import active_intents

TARGET_TYPE = IntentCandidateRecord._meta.label_lower


def sealed_candidates(viewer, target_ids: set[str]) -> set[str]:
    ids = {int(i) for i in target_ids if i.isdigit()}
    records = dict(IntentCandidateRecord.objects.filter(pk__in=ids).values_list("pk", "candidate_id"))
    placed = {cid for row in active_intents() for cid in row.get("candidate_ids", [])}
    mine: set[str] = set()
    if getattr(viewer, "pk", None) is not None:
        mine = set(
            IntentJudgment.objects.filter(
                candidate__candidate_id__in=set(records.values()), reviewer_id=viewer.pk
            ).values_list("candidate__candidate_id", flat=True)
        )
    return {str(pk) for pk, cid in records.items() if cid not in placed and cid not in mine}


def register() -> None:
    from accounts.blinding import register_sealed_verb

    register_sealed_verb("intent_judgment.submit", TARGET_TYPE, sealed_candidates)
