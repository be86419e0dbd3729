"""Judgments of promotion requests in the audit log are sealed like on the review pages: until the request closes,
only reviewers who have judged it see the others' judgments — and, since one rejection closes a request, a judgment
on a request still open could only be an approval, so the audit lists leave sealed ones out (accounts.blinding).

Two verbs tell judgments: `judgment.submit` itself, and `promotion.approve` (the request had enough approvals and
waits for its gate), whose actor is the last approver.
"""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import CharField, Exists, OuterRef, QuerySet
from django.db.models.functions import Cast

from .models import PENDING_STATUSES, Judgment, PromotionRequest

TARGET_TYPE = PromotionRequest._meta.label_lower
SEALED_VERBS = ("judgment.submit", "promotion.approve")


def sealed_requests(viewer, among: Collection[str] | None = None) -> QuerySet:
    """The ids (as text) of the pending requests `viewer` has not judged, limited to `among` when given."""
    requests = PromotionRequest.objects.filter(status__in=PENDING_STATUSES)
    if among is not None:
        requests = requests.filter(pk__in=[int(i) for i in among if i.isdigit() and len(i) < 19])
    if getattr(viewer, "pk", None) is not None:
        requests = requests.exclude(Exists(Judgment.objects.filter(request=OuterRef("pk"), reviewer_id=viewer.pk)))
    return requests.annotate(text_id=Cast("pk", CharField())).values_list("text_id", flat=True)


def register() -> None:
    from accounts.blinding import register_sealed_verb

    for verb in SEALED_VERBS:
        register_sealed_verb(verb, TARGET_TYPE, sealed_requests)
