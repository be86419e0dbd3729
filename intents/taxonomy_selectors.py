"""Reads of the reviewed intent taxonomy: the judging queue, blinded judgments, the taxonomy page, and the run →
reviewed intent lookups procedure mining uses. Each is a fixed number of queries.

Access: anonymous and inactive users get 404 (reviews.selectors.require_member); any active user reads. Blinding:
the judgments of others on a candidate are shown only to someone who has recorded their own on it (or once the
candidate is part of the active taxonomy); everyone else sees how many judgments there are, not what they say.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.http import Http404

from reviews.selectors import pending_requests_for, require_member
from trajectories.selectors import run_queryset

from .core import normalize_intent
from .models import (
    IntentCandidateRecord,
    IntentJudgment,
    IntentTaxonomy,
    NoveltyAlert,
    TaxonomyActivation,
    TaxonomyRunIntent,
    TaxonomyVersion,
)
from .taxonomy import KIND

QUEUE_SIZE = 50


def default_taxonomy() -> IntentTaxonomy | None:
    return IntentTaxonomy.objects.select_related("active_version").filter(slug=IntentTaxonomy.DEFAULT_SLUG).first()


def active_version() -> TaxonomyVersion | None:
    taxonomy = default_taxonomy()
    return taxonomy.active_version if taxonomy else None


def active_intents() -> list[dict[str, Any]]:
    version = active_version()
    return version.intents if version else []


# --- the judging queue -----------------------------------------------------------------------------------------------
def _first_copies() -> QuerySet[IntentCandidateRecord]:
    """One stored record per candidate id (the oldest), as the queue shows them."""
    older = IntentCandidateRecord.objects.filter(candidate_id=OuterRef("candidate_id"), pk__lt=OuterRef("pk"))
    return IntentCandidateRecord.objects.filter(~Exists(older))


def _awaiting(user) -> QuerySet[IntentCandidateRecord]:
    judged = IntentJudgment.objects.filter(candidate__candidate_id=OuterRef("candidate_id"), reviewer=user.pk)
    mine = IntentCandidateRecord.objects.filter(candidate_id=OuterRef("candidate_id"), submitted_by=user.pk)
    placed = {cid for row in active_intents() for cid in row.get("candidate_ids", [])}
    return _first_copies().filter(~Exists(judged), ~Exists(mine)).exclude(candidate_id__in=placed)


def awaiting_count(user) -> int:
    """How many intent candidates wait for `user`'s judgment (0 for anyone who is not a reviewer)."""
    if user is None or not user.is_authenticated or not user.is_active or not user.is_reviewer:
        return 0
    return _awaiting(user).count()


@dataclass
class QueuePage:
    rows: list[IntentCandidateRecord]
    total: int
    intents: list[dict[str, Any]]
    recent: list[IntentCandidateRecord] = field(default_factory=list)


def review_queue_for(user, *, limit: int = QUEUE_SIZE) -> QueuePage:
    """The candidates waiting for `user`'s judgment (those whose novelty alert was promoted to review first, then
    oldest first; each with `promoted_alert` and `judgment_count`, the number of judgments recorded by anyone, and
    nothing of what they say), the active intents to merge into, and the candidates `user` judged most recently
    with every judgment (visible: their own is recorded)."""
    require_member(user)
    intents = active_intents()
    if not user.is_reviewer:
        return QueuePage(rows=[], total=0, intents=intents, recent=_recent(user))
    awaiting = _awaiting(user)
    promoted = NoveltyAlert.objects.filter(candidate_id=OuterRef("candidate_id"), status=NoveltyAlert.Status.PROMOTED)
    rows = list(awaiting.annotate(promoted_alert=Exists(promoted)).order_by("-promoted_alert", "id")[:limit])
    total = len(rows) if len(rows) < limit else awaiting.count()
    counts = dict(
        IntentJudgment.objects.filter(candidate__candidate_id__in=[r.candidate_id for r in rows])
        .values_list("candidate__candidate_id")
        .annotate(n=Count("id"))
        .values_list("candidate__candidate_id", "n")
    )
    for row in rows:
        row.judgment_count = counts.get(row.candidate_id, 0)
    return QueuePage(rows=rows, total=total, intents=intents, recent=_recent(user))


def _recent(user, limit: int = 10) -> list[IntentCandidateRecord]:
    mine = list(
        IntentJudgment.objects.filter(reviewer=user.pk)
        .select_related("candidate")
        .order_by("-created_at", "-id")[:limit]
    )
    if not mine:
        return []
    ids = [j.candidate.candidate_id for j in mine]
    everyone: dict[str, list[IntentJudgment]] = {}
    for judgment in (
        IntentJudgment.objects.filter(candidate__candidate_id__in=ids)
        .select_related("reviewer", "candidate")
        .order_by("created_at", "id")
    ):
        everyone.setdefault(judgment.candidate.candidate_id, []).append(judgment)
    rows = []
    for judgment in mine:
        record = judgment.candidate
        record.my_judgment = judgment
        record.all_judgments = everyone.get(record.candidate_id, [])
        rows.append(record)
    return rows


@dataclass(frozen=True)
class CandidateJudgments:
    count: int
    mine: IntentJudgment | None
    visible: list[IntentJudgment] | None  # None: blinded


def judgments_for(user, candidate: IntentCandidateRecord) -> CandidateJudgments:
    """The judgments on a candidate id as `user` may see them: all of them once `user` has recorded their own (or
    the candidate is in the active taxonomy), else only the count."""
    require_member(user)
    rows = list(
        IntentJudgment.objects.filter(candidate__candidate_id=candidate.candidate_id)
        .select_related("reviewer")
        .order_by("created_at", "id")
    )
    mine = next((j for j in rows if j.reviewer_id == user.pk), None)
    placed = any(candidate.candidate_id in row.get("candidate_ids", []) for row in active_intents())
    return CandidateJudgments(count=len(rows), mine=mine, visible=rows if (mine or placed) else None)


def candidate_for(user, pk: int) -> IntentCandidateRecord:
    require_member(user)
    record = IntentCandidateRecord.objects.filter(pk=pk).first()
    if record is None:
        raise Http404(f"no intent candidate {pk}")
    return record


# --- the taxonomy page -----------------------------------------------------------------------------------------------
@dataclass
class TaxonomyPage:
    taxonomy: IntentTaxonomy | None
    shown: TaxonomyVersion | None
    active: TaxonomyVersion | None
    versions: list[TaxonomyVersion]
    activations: list[TaxonomyActivation]
    pending: dict[str, Any]


def taxonomy_page(user, *, number: int | None = None) -> TaxonomyPage:
    """The taxonomy, the version shown (the active one unless `number` names another; 404 for an unknown number),
    every version (newest first, documents deferred except the shown one), the activation history and the open
    promotion requests by version id."""
    require_member(user)
    taxonomy = default_taxonomy()
    if taxonomy is None:
        if number is not None:
            raise Http404("no taxonomy version")
        return TaxonomyPage(taxonomy=None, shown=None, active=None, versions=[], activations=[], pending={})
    versions = list(
        TaxonomyVersion.objects.filter(taxonomy=taxonomy)
        .select_related("created_by")
        .defer("document")
        .order_by("-number")
    )
    active = taxonomy.active_version
    shown = active
    if number is not None:
        shown = TaxonomyVersion.objects.filter(taxonomy=taxonomy, number=number).first()
        if shown is None:
            raise Http404(f"no taxonomy version {number}")
    activations = list(
        TaxonomyActivation.objects.filter(taxonomy=taxonomy)
        .select_related("version", "replaced", "activated_by")
        .defer("version__document", "replaced__document")
        .order_by("-activated_at", "-id")[:20]
    )
    pending = pending_requests_for(kind=KIND, parent_key=taxonomy.slug)
    return TaxonomyPage(
        taxonomy=taxonomy, shown=shown, active=active, versions=versions, activations=activations, pending=pending
    )


@dataclass(frozen=True)
class ReviewedIntent:
    intent_id: str
    label: str
    normalized: str
    names: frozenset[str]  # the normalized label and the normalized aliases


def _reviewed(intent: dict[str, Any]) -> ReviewedIntent:
    names = {intent["normalized"], *(normalize_intent(alias) for alias in intent.get("aliases", []))}
    return ReviewedIntent(
        intent_id=intent["intent_id"], label=intent["label"], normalized=intent["normalized"], names=frozenset(names)
    )


def reviewed_intent_named(key: str) -> ReviewedIntent | None:
    """The active taxonomy's intent that `key` names: its id, its normalized label or a normalized alias."""
    key = (key or "").strip()
    for intent in active_intents():
        reviewed = _reviewed(intent)
        if key == reviewed.intent_id or normalize_intent(key) in reviewed.names:
            return reviewed
    return None


def reviewed_intents_by_key(keys: Iterable[str]) -> dict[str, ReviewedIntent]:
    """For the procedures page: which of these normalized keys is a reviewed intent's normalized label."""
    by_label = {intent["normalized"]: _reviewed(intent) for intent in active_intents()}
    return {key: by_label[key] for key in keys if key in by_label}


@dataclass(frozen=True)
class RunGroup:
    """The runs of one mining group: `key` is the procedure's intent key; `reviewed` the taxonomy intent, if any."""

    key: str
    title: str
    runs: QuerySet
    reviewed: ReviewedIntent | None

    @property
    def grouping(self) -> str:
        if self.reviewed is None:
            return "normalized label"
        return f"reviewed intent {self.reviewed.label} ({self.reviewed.intent_id})"


def runs_of_intent(key: str) -> RunGroup:
    """The runs procedure mining groups under the intent `key` names. Each run belongs to its reviewed intent when
    the active taxonomy gives it one, else to its normalized declared label. When `key` names a reviewed intent
    (label, alias or id), the group is that intent's runs plus the runs with no reviewed intent whose declared
    label normalizes to one of the intent's names; otherwise the runs with no reviewed intent whose declared label
    normalizes to `key`."""
    version = active_version()
    reviewed = reviewed_intent_named(key) if version is not None else None
    names = reviewed.names if reviewed else frozenset({normalize_intent(key)})
    declared = run_queryset().exclude(intent="").values_list("intent", flat=True).distinct().order_by()
    labels = sorted(label for label in declared if normalize_intent(label) in names)
    by_label = Q(intent__in=labels)
    if version is None:
        return RunGroup(
            key=normalize_intent(key),
            title=labels[0] if labels else key,
            runs=run_queryset().filter(by_label),
            reviewed=None,
        )
    has_reviewed = TaxonomyRunIntent.objects.filter(version=version, run=OuterRef("pk"))
    unreviewed = by_label & ~Q(Exists(has_reviewed))
    if reviewed is None:
        key = normalize_intent(key)
        return RunGroup(
            key=key, title=labels[0] if labels else key, runs=run_queryset().filter(unreviewed), reviewed=None
        )
    mine = TaxonomyRunIntent.objects.filter(version=version, intent_id=reviewed.intent_id, run=OuterRef("pk"))
    runs = run_queryset().filter(Q(Exists(mine)) | unreviewed)
    return RunGroup(key=reviewed.normalized, title=reviewed.label, runs=runs, reviewed=reviewed)
