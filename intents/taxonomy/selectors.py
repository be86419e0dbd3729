"""Reads of the reviewed intent taxonomy: the judging queue, blinded judgments, the taxonomy page, and the run →
reviewed intent lookups procedure mining uses. Each is a fixed number of queries.

Access: anonymous and inactive users get 404 (reviews.selectors.require_member); any active user reads. Blinding:
the judgments of others on a candidate are shown only to someone who has recorded their own on it (or once the
candidate is part of the active taxonomy). A reviewer who may still judge it sees nothing of them, not even how many
there are (sealed means absent, as in accounts.blinding); people who cannot judge it (its poster, operators, a
read-only teammate) see the count, not what they say.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404

from reviews.selectors import pending_requests_for, require_member
from trajectories.selectors import run_queryset, runs_with_steps

from ..core import normalize_intent
from ..models import (
    IntentCandidateRecord,
    IntentJudgment,
    IntentTaxonomy,
    NoveltyAlert,
    TaxonomyActivation,
    TaxonomyRunIntent,
    TaxonomyVersion,
)
from .services import KIND

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


# How many steps around a candidate's evidence the inline review shows; the run's page has them all.
CONTEXT_STEPS = 2
ARGUMENTS_CHARS = 160
OBSERVATION_CHARS = 240


@dataclass(frozen=True)
class StepLine:
    index: int
    tool: str
    ok: bool | None
    arguments: str
    observation: str
    evidence: bool


@dataclass(frozen=True)
class EvidenceRun:
    """One evidence span of a candidate, with its run (None when no longer stored): the task, and the steps of the
    span (highlighted) with CONTEXT_STEPS around it."""

    trajectory_id: str
    start: int
    end: int
    run: Any | None
    steps: tuple[StepLine, ...] = ()
    hidden_before: int = 0
    hidden_after: int = 0


@dataclass(frozen=True)
class ReviewFocus:
    """The candidate reviewed inline: its evidence, where it stands in the queue, and its neighbours (wrapping)."""

    candidate: IntentCandidateRecord
    position: int
    evidence: tuple[EvidenceRun, ...]
    previous: IntentCandidateRecord | None
    next: IntentCandidateRecord | None


@dataclass
class QueuePage:
    rows: list[IntentCandidateRecord]
    total: int
    intents: list[dict[str, Any]]
    recent: list[IntentCandidateRecord] = field(default_factory=list)
    focus: ReviewFocus | None = None


def review_queue_for(user, *, focus: int | None = None, limit: int = QUEUE_SIZE) -> QueuePage:
    """The candidates waiting for `user`'s judgment (those whose novelty alert was promoted to review first, then
    oldest first; each with `promoted_alert`, and nothing of others' judgments, not even how many), the one reviewed
    inline (`focus` when it waits, else the first) with its evidence, the active intents to merge into, and the
    candidates `user` judged most recently with every judgment (visible: their own is recorded). At most eight
    queries."""
    require_member(user)
    intents = active_intents()
    if not user.is_reviewer:
        return QueuePage(rows=[], total=0, intents=intents, recent=_recent(user))
    awaiting = _awaiting(user)
    promoted = NoveltyAlert.objects.filter(candidate_id=OuterRef("candidate_id"), status=NoveltyAlert.Status.PROMOTED)
    rows = list(awaiting.annotate(promoted_alert=Exists(promoted)).order_by("-promoted_alert", "id")[:limit])
    total = len(rows) if len(rows) < limit else awaiting.count()
    return QueuePage(rows=rows, total=total, intents=intents, recent=_recent(user), focus=_focus(rows, focus))


def _focus(rows: list[IntentCandidateRecord], wanted: int | None) -> ReviewFocus | None:
    if not rows:
        return None
    index = next((i for i, row in enumerate(rows) if row.pk == wanted), 0)
    candidate = rows[index]
    spans = [item for item in candidate.evidence or [] if isinstance(item, dict)]
    runs = runs_with_steps(sorted({int(item["run_id"]) for item in spans if isinstance(item.get("run_id"), int)}))
    others = len(rows) > 1
    return ReviewFocus(
        candidate=candidate,
        position=index + 1,
        evidence=tuple(_evidence_run(item, runs.get(item.get("run_id"))) for item in spans),
        previous=rows[index - 1] if others else None,
        next=rows[(index + 1) % len(rows)] if others else None,
    )


def _evidence_run(item: dict[str, Any], run) -> EvidenceRun:
    start, end = int(item.get("start", 0)), int(item.get("end", 0))
    trajectory_id = str(item.get("trajectory_id", ""))
    if run is None:
        return EvidenceRun(trajectory_id=trajectory_id, start=start, end=end, run=None)
    steps = list(run.steps.all())
    first, last = max(0, start - CONTEXT_STEPS), min(len(steps), end + CONTEXT_STEPS + 1)
    lines = tuple(
        StepLine(
            index=index,
            tool=step.tool,
            ok=step.ok,
            arguments=_short(json.dumps(step.arguments or {}, ensure_ascii=False, sort_keys=True), ARGUMENTS_CHARS),
            observation=_short(step.observation or "", OBSERVATION_CHARS),
            evidence=start <= index <= end,
        )
        for index, step in enumerate(steps[first:last], start=first)
    )
    return EvidenceRun(
        trajectory_id=trajectory_id,
        start=start,
        end=end,
        run=run,
        steps=lines,
        hidden_before=first,
        hidden_after=len(steps) - last,
    )


def _short(text: str, size: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"


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
    count: int | None  # None: sealed, `user` may still judge it
    mine: IntentJudgment | None
    visible: list[IntentJudgment] | None  # None: blinded


def judgments_for(user, candidate: IntentCandidateRecord) -> CandidateJudgments:
    """The judgments on a candidate id as `user` may see them: all of them once `user` has recorded their own (or
    the candidate is in the active taxonomy); else, to someone who cannot judge it, only the count; to a reviewer who
    may still judge it, nothing (three queries, four for such a reviewer)."""
    require_member(user)
    rows = list(
        IntentJudgment.objects.filter(candidate__candidate_id=candidate.candidate_id)
        .select_related("reviewer")
        .order_by("created_at", "id")
    )
    mine = next((j for j in rows if j.reviewer_id == user.pk), None)
    placed = any(candidate.candidate_id in row.get("candidate_ids", []) for row in active_intents())
    if mine or placed:
        return CandidateJudgments(count=len(rows), mine=mine, visible=rows)
    may_judge = user.is_reviewer and not (
        IntentCandidateRecord.objects.filter(candidate_id=candidate.candidate_id, submitted_by=user.pk).exists()
    )
    return CandidateJudgments(count=None if may_judge else len(rows), mine=None, visible=None)


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
    normalizes to `key`. Production runs only: the runs answering evaluation jobs are never mined."""
    production = run_queryset().production()  # evaluation runs are evidence of their own jobs, never training
    version = active_version()
    reviewed = reviewed_intent_named(key) if version is not None else None
    names = reviewed.names if reviewed else frozenset({normalize_intent(key)})
    declared = production.exclude(intent="").values_list("intent", flat=True).distinct().order_by()
    labels = sorted(label for label in declared if normalize_intent(label) in names)
    by_label = Q(intent__in=labels)
    if version is None:
        return RunGroup(
            key=normalize_intent(key),
            title=labels[0] if labels else key,
            runs=production.filter(by_label),
            reviewed=None,
        )
    has_reviewed = TaxonomyRunIntent.objects.filter(version=version, run=OuterRef("pk"))
    unreviewed = by_label & ~Q(Exists(has_reviewed))
    if reviewed is None:
        key = normalize_intent(key)
        return RunGroup(key=key, title=labels[0] if labels else key, runs=production.filter(unreviewed), reviewed=None)
    mine = TaxonomyRunIntent.objects.filter(version=version, intent_id=reviewed.intent_id, run=OuterRef("pk"))
    runs = production.filter(Q(Exists(mine)) | unreviewed)
    return RunGroup(key=reviewed.normalized, title=reviewed.label, runs=runs, reviewed=reviewed)
