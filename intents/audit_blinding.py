"""Judgments of intent candidates in the audit log are sealed like on the judging pages: until the candidate is in
the active taxonomy, only reviewers who have judged its candidate id see the others' — and the audit lists leave
sealed ones out, so neither their existence nor their time shows (accounts.blinding)."""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import CharField, Exists, OuterRef, QuerySet
from django.db.models.functions import Cast

from .models import IntentCandidateRecord, IntentJudgment
from .taxonomy.selectors import active_intents

TARGET_TYPE = IntentCandidateRecord._meta.label_lower


def sealed_candidates(viewer, among: Collection[str] | None = None) -> QuerySet:
    """The ids (as text) of the candidate records whose candidate id is not in the active taxonomy and that `viewer`
    has not judged (under any copy of that candidate id), limited to `among` when given."""
    placed = {cid for row in active_intents() for cid in row.get("candidate_ids", [])}
    records = IntentCandidateRecord.objects.exclude(candidate_id__in=placed)
    if among is not None:
        records = records.filter(pk__in=[int(i) for i in among if i.isdigit() and len(i) < 19])
    if getattr(viewer, "pk", None) is not None:
        judged = IntentJudgment.objects.filter(candidate__candidate_id=OuterRef("candidate_id"), reviewer_id=viewer.pk)
        records = records.exclude(Exists(judged))
    return records.annotate(text_id=Cast("pk", CharField())).values_list("text_id", flat=True)


def register() -> None:
    from accounts.blinding import register_sealed_verb

    register_sealed_verb("intent_judgment.submit", TARGET_TYPE, sealed_candidates)
