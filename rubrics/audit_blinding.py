"""People's rubric assessments in the audit log are sealed like on the run page: `rubric.assess` on a production run
tells that someone assessed it (and, on the audit page, what they gave), so to a reviewer or operator who has not
assessed the run under a version it is scored under, the audit lists leave it out (accounts.blinding: sealed means
absent). Registered when rubrics.promotable is imported (RubricsConfig.ready)."""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import CharField, Exists, OuterRef, QuerySet
from django.db.models.functions import Cast

from accounts.blinding import register_sealed_verb

from .models import RaterKind, RubricAssessmentRow, RubricScoreRow
from .runs import production_runs

VERB = "rubric.assess"
TARGET_TYPE = "trajectories.run"


def sealed_runs(viewer, among: Collection[str] | None = None) -> QuerySet:
    """The ids (as text) of the scored production runs `viewer` may assess and has not assessed under one of the
    versions they are scored under, limited to `among` when given; none for someone who cannot assess."""
    scores = RubricScoreRow.objects.filter(run__in=production_runs().values("pk"))
    if not (getattr(viewer, "is_active", False) and getattr(viewer, "may_assess", False)):
        scores = scores.none()
    if among is not None:
        scores = scores.filter(run_id__in=[int(i) for i in among if i.isdigit() and len(i) < 19])
    own = RubricAssessmentRow.objects.filter(
        run_id=OuterRef("run_id"), version=OuterRef("version"), user_id=getattr(viewer, "pk", None)
    ).filter(rater_kind=RaterKind.PERSON)
    return scores.exclude(Exists(own)).annotate(text_id=Cast("run_id", CharField())).values_list("text_id", flat=True)


register_sealed_verb(VERB, TARGET_TYPE, sealed_runs)
