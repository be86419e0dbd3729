"""Judgments of promotion requests in the audit log are sealed like on the review pages: until the request closes,
only reviewers who have judged it see the others' verdicts and comments (accounts.blinding)."""

from __future__ import annotations

from .models import PENDING_STATUSES, Judgment, PromotionRequest

TARGET_TYPE = PromotionRequest._meta.label_lower


def sealed_requests(viewer, target_ids: set[str]) -> set[str]:
    ids = {int(i) for i in target_ids if i.isdigit()}
    pending = set(PromotionRequest.objects.filter(pk__in=ids, status__in=PENDING_STATUSES).values_list("pk", flat=True))
    if pending and getattr(viewer, "pk", None) is not None:
        pending -= set(
            Judgment.objects.filter(request_id__in=pending, reviewer_id=viewer.pk).values_list("request_id", flat=True)
        )
    return {str(pk) for pk in pending}


def register() -> None:
    from accounts.blinding import register_sealed_verb

    register_sealed_verb("judgment.submit", TARGET_TYPE, sealed_requests)
