"""Every write of the reviewed intent taxonomy: judgments of intent candidates and drafts of the next version.

A judgment is one reviewer's independent verdict on an intent candidate (valid, invalid, or merge into an existing
taxonomy intent). A draft builds the next taxonomy version from the active one plus every candidate that has at
least MIN_JUDGMENTS judgments with agreement of at least MIN_AGREEMENT (spec §2.5's `summarize_intent_reviews`,
a merge counting as valid), and is proposed for activation through reviews (kind "intent_taxonomy"): the same
promotion policy as procedures and graphs moves the active pointer (intents.promotable).

Stored candidates are identified per source (model, each API client); the same spec candidate id from two sources is
one candidate here: judgments, summaries and the taxonomy all speak of candidate ids.

The pure part (`plan_draft`) takes plain values and is tested without a database.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common.canonical import digest as canonical_digest
from common.text import plain_identifier_error
from reviews.errors import Conflict, Invalid, NotAllowed
from reviews.services import promotion_propose

from ..core import IntentCandidate, IntentEvidence, IntentReview, normalize_intent, summarize_intent_reviews
from ..models import (
    IntentCandidateRecord,
    IntentJudgment,
    IntentTaxonomy,
    TaxonomyRunIntent,
    TaxonomyVersion,
)

if TYPE_CHECKING:  # annotations only: other apps read rows through selectors (issue 14)
    from reviews.models import PromotionRequest

KIND = "intent_taxonomy"
MIN_JUDGMENTS = 2
MIN_AGREEMENT = 2 / 3
MAX_COMMENT = 2000
MAX_LABEL = 300
_EPSILON = 1e-9
Verdict = IntentJudgment.Verdict


# --- summaries -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CandidateSummary:
    """The judgments of one candidate id, as summarize_intent_reviews counts them (a reviewer's first counts)."""

    candidate_id: str
    valid: int = 0
    invalid: int = 0
    merge: int = 0
    agreement: float = 0.0
    reviewers: tuple[str, ...] = ()
    merge_target: str = ""

    @property
    def judgments(self) -> int:
        return self.valid + self.invalid + self.merge

    @property
    def accepted(self) -> bool:
        """Enough judgments and agreement to enter a draft (valid or merge side) or to be left out (invalid)."""
        return self.judgments >= MIN_JUDGMENTS and self.agreement + _EPSILON >= MIN_AGREEMENT

    @property
    def outcome(self) -> str:
        """valid, merge or invalid once `accepted`, else "undecided". Valid-side ties go to merge (no duplicate)."""
        if not self.accepted:
            return "undecided"
        if self.invalid > self.valid + self.merge:
            return Verdict.INVALID
        return Verdict.MERGE if self.merge and self.merge >= self.valid else Verdict.VALID

    def as_json(self) -> dict[str, Any]:
        return {
            "candidate_id": self.candidate_id,
            "valid": self.valid,
            "invalid": self.invalid,
            "merge": self.merge,
            "agreement": round(self.agreement, 4),
            "reviewers": list(self.reviewers),
            "merge_target": self.merge_target,
            "outcome": self.outcome,
        }


def _core_candidate(record: IntentCandidateRecord) -> IntentCandidate:
    evidence = tuple(
        IntentEvidence(trajectory_id=str(row["trajectory_id"]), start=int(row["start"]), end=int(row["end"]))
        for row in record.evidence
    )
    return IntentCandidate(candidate_id=record.candidate_id, intent=record.intent, kind=record.kind, evidence=evidence)


def summarize(
    records: Iterable[IntentCandidateRecord], judgments: Iterable[IntentJudgment]
) -> dict[str, CandidateSummary]:
    """Per candidate id: counts, agreement (intents.core.review; a merge counts as valid) and the merge target (the
    most common among the counted merge verdicts; ties to the smaller id)."""
    cores = {}
    for record in records:
        cores.setdefault(record.candidate_id, _core_candidate(record))
    ordered = sorted(judgments, key=lambda j: (j.created_at, j.pk or 0))
    counted: dict[str, dict[str, IntentJudgment]] = defaultdict(dict)
    reviews = []
    for judgment in ordered:
        candidate_id = judgment.candidate.candidate_id
        reviewer = str(judgment.reviewer_id)
        reviews.append(
            IntentReview(candidate_id=candidate_id, reviewer_id=reviewer, valid=judgment.verdict != Verdict.INVALID)
        )
        counted[candidate_id].setdefault(reviewer, judgment)
    core = {s.candidate_id: s for s in summarize_intent_reviews(cores.values(), reviews)}
    out = {}
    for candidate_id, summary in core.items():
        first = counted.get(candidate_id, {})
        merges = [j.merge_target for j in first.values() if j.verdict == Verdict.MERGE]
        target = ""
        if merges:
            tally = Counter(merges)
            target = min(tally, key=lambda t: (-tally[t], t))
        out[candidate_id] = CandidateSummary(
            candidate_id=candidate_id,
            valid=sum(1 for j in first.values() if j.verdict == Verdict.VALID),
            invalid=summary.invalid_reviews,
            merge=len(merges),
            agreement=summary.agreement,
            reviewers=summary.reviewer_ids,
            merge_target=target,
        )
    return out


# --- the pure draft plan ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decided:
    """A candidate ready for the draft: its label, runs and summary (outcome valid, merge or invalid)."""

    candidate_id: str
    label: str
    summary: CandidateSummary
    run_ids: tuple[int, ...] = ()


@dataclass
class Plan:
    intents: list[dict[str, Any]]
    changes: list[dict[str, Any]]
    left_out: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)


def mint_intent_id(candidate_id: str, taken: Iterable[str]) -> str:
    """A new taxonomy intent's id: "intent:" + 12 hex of SHA-256 over its founding candidate id (lengthened on a
    collision). Minted once: later versions copy it, whatever happens to the label."""
    taken = set(taken)
    digest = hashlib.sha256(f"waymark-taxonomy-intent\0{candidate_id}".encode()).hexdigest()
    for size in range(12, 65):
        intent_id = f"intent:{digest[:size]}"
        if intent_id not in taken:
            return intent_id
    raise ValueError("no free intent id")  # pragma: no cover (64 hex digits cannot all collide)


def _names(intent: Mapping[str, Any]) -> set[str]:
    return {intent["normalized"], *(normalize_intent(alias) for alias in intent.get("aliases", []))}


def _add_alias(intent: dict[str, Any], label: str) -> bool:
    key = normalize_intent(label)
    if not key or key in _names(intent):
        return False
    intent["aliases"] = sorted({*intent.get("aliases", []), label})
    return True


def plan_draft(
    active: Sequence[Mapping[str, Any]], decided: Sequence[Decided], relabels: Mapping[str, str] | None = None
) -> Plan:
    """The next document from the active intents, the decided candidates (in candidate id order) and label edits.

    Relabels first (the old label becomes an alias; the id stays). Then each candidate not yet in the taxonomy:
    invalid → left out; merge → its label becomes an alias and its id joins the target (unknown target: skipped);
    valid → joins the intent one of whose names (normalized label or alias) equals its normalized label, else founds
    a new intent with a freshly minted id. Intents are kept sorted by id."""
    intents = {
        row["intent_id"]: {
            **row,
            "aliases": list(row.get("aliases", [])),
            "candidate_ids": list(row.get("candidate_ids", [])),
        }
        for row in active
    }
    placed = {cid for row in intents.values() for cid in row["candidate_ids"]}
    changes: list[dict[str, Any]] = []
    plan = Plan(intents=[], changes=changes)
    for intent_id, label in sorted((relabels or {}).items()):
        label = " ".join(str(label).split())[:MAX_LABEL]
        if intent_id not in intents:
            raise Invalid(f"no intent {intent_id} in the active taxonomy", code="unknown_intent")
        key = normalize_intent(label)
        if not key:
            raise Invalid("a new label is required", code="label_required")
        intent = intents[intent_id]
        if label == intent["label"]:
            continue
        for other in intents.values():
            if other["intent_id"] != intent_id and key in _names(other):
                raise Invalid(f"{label!r} already names {other['intent_id']}", code="label_taken")
        before = intent["label"]
        intent["label"], intent["normalized"] = label, key
        _add_alias(intent, before)
        intent["aliases"] = sorted(a for a in intent["aliases"] if normalize_intent(a) != key)
        changes.append({"change": "relabelled", "intent_id": intent_id, "before": before, "after": label})
    for item in sorted(decided, key=lambda d: d.candidate_id):
        if item.candidate_id in placed:
            continue
        outcome = item.summary.outcome
        if outcome == Verdict.INVALID:
            plan.left_out.append(item.candidate_id)
            continue
        if outcome == Verdict.MERGE:
            target = intents.get(item.summary.merge_target)
            if target is None:
                plan.skipped.append({"candidate_id": item.candidate_id, "reason": "unknown merge target"})
                continue
            reason = "merged by reviewers"
        elif outcome == Verdict.VALID:
            key = normalize_intent(item.label)
            target = next((row for row in intents.values() if key in _names(row)), None)
            reason = "same normalized label"
        else:
            continue
        if target is None:
            intent_id = mint_intent_id(item.candidate_id, intents)
            intents[intent_id] = {
                "intent_id": intent_id,
                "label": item.label,
                "normalized": normalize_intent(item.label),
                "aliases": [],
                "candidate_ids": [item.candidate_id],
                "support": 0,
            }
            changes.append(
                {
                    "change": "added",
                    "intent_id": intent_id,
                    "label": item.label,
                    "candidate_ids": [item.candidate_id],
                    "summaries": [item.summary.as_json()],
                }
            )
        else:
            target["candidate_ids"] = sorted({*target["candidate_ids"], item.candidate_id})
            alias = _add_alias(target, item.label)
            added = next((c for c in changes if c["change"] == "added" and c["intent_id"] == target["intent_id"]), None)
            if added is not None:  # a second candidate founding the same new intent
                added["candidate_ids"].append(item.candidate_id)
                added["summaries"].append(item.summary.as_json())
            else:
                changes.append(
                    {
                        "change": "merged",
                        "intent_id": target["intent_id"],
                        "label": target["label"],
                        "candidate_id": item.candidate_id,
                        "candidate_label": item.label,
                        "alias_added": item.label if alias else "",
                        "reason": reason,
                        "summaries": [item.summary.as_json()],
                    }
                )
        placed.add(item.candidate_id)
    for intent in intents.values():
        intent["candidate_ids"] = sorted(set(intent["candidate_ids"]))
    plan.intents = [intents[key] for key in sorted(intents)]
    return plan


def run_index(intents: Sequence[Mapping[str, Any]], runs_of: Mapping[str, Iterable[int]]) -> dict[int, str]:
    """Each run's reviewed intent: the intent with the most candidates naming the run (ties: the smaller id)."""
    votes: dict[int, Counter[str]] = defaultdict(Counter)
    for intent in intents:
        for candidate_id in intent["candidate_ids"]:
            for run_id in set(runs_of.get(candidate_id, ())):
                votes[run_id][intent["intent_id"]] += 1
    return {run_id: min(tally, key=lambda i: (-tally[i], i)) for run_id, tally in votes.items()}


# --- judgments -------------------------------------------------------------------------------------------------------
def active_version(taxonomy: IntentTaxonomy | None = None) -> TaxonomyVersion | None:
    taxonomy = taxonomy or IntentTaxonomy.objects.filter(slug=IntentTaxonomy.DEFAULT_SLUG).first()
    if taxonomy is None or taxonomy.active_version_id is None:
        return None
    return TaxonomyVersion.objects.filter(pk=taxonomy.active_version_id).first()


def intent_judgment_submit(
    *, actor: Actor, candidate: IntentCandidateRecord, verdict: str, merge_target: str = "", comment: str = ""
) -> IntentJudgment:
    """One reviewer's independent verdict on a candidate (every stored copy of its candidate id). The person who
    posted the candidate cannot judge it; a second judgment by the same reviewer is a Conflict; a merge names an
    intent of the active taxonomy."""
    user = require_role(actor, Role.REVIEWER, doing="judging intent candidates", code="not_a_reviewer")
    if verdict not in Verdict.values:
        raise Invalid(f"verdict must be one of {', '.join(Verdict.values)}", code="invalid_verdict")
    merge_target = (merge_target or "").strip() if verdict == Verdict.MERGE else ""
    comment = (comment or "").strip()
    if len(comment) > MAX_COMMENT:
        raise Invalid(f"a comment has at most {MAX_COMMENT} characters", code="too_long")
    copies = IntentCandidateRecord.objects.filter(candidate_id=candidate.candidate_id)
    if copies.filter(submitted_by=user).exists():
        raise NotAllowed("the person who proposed a candidate cannot judge it", code="proposer_cannot_judge")
    if verdict == Verdict.MERGE:
        if not merge_target:
            raise Invalid("choose the intent to merge into", code="merge_target_required")
        version = active_version()
        known = {row["intent_id"] for row in version.intents} if version else set()
        if merge_target not in known:
            raise Invalid(f"no intent {merge_target} in the active taxonomy", code="unknown_merge_target")
    try:
        with transaction.atomic(durable=True):
            if IntentJudgment.objects.filter(candidate__in=copies, reviewer=user).exists():
                raise Conflict("you have already judged this candidate", code="already_judged")
            judgment = IntentJudgment.objects.create(
                candidate=candidate, reviewer=user, verdict=verdict, merge_target=merge_target, comment=comment
            )
            audit_record(
                actor=actor,
                verb="intent_judgment.submit",
                target=candidate,
                after={
                    "candidate_id": candidate.candidate_id,
                    "reviewer": user.username,
                    "verdict": verdict,
                    "merge_target": merge_target,
                    "comment": comment,
                },
            )
    except IntegrityError:
        raise Conflict("you have already judged this candidate", code="already_judged") from None
    return judgment


# --- drafts ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DraftResult:
    version: TaxonomyVersion
    created: bool
    plan: Plan


def _sealed(user, judgments: Iterable[IntentJudgment], records: Mapping[str, list[IntentCandidateRecord]]) -> set[str]:
    """The candidate ids (among `records`) `user` may still judge and has not: to them, what the others decided is
    sealed, so their preview leaves it out. Nothing is sealed to someone who cannot judge."""
    if user is None or not getattr(user, "is_reviewer", False):
        return set()
    judged = {j.candidate.candidate_id for j in judgments if j.reviewer_id == user.pk}
    posted = {cid for cid, rows in records.items() if any(r.submitted_by_id == user.pk for r in rows)}
    return set(records) - judged - posted


def _decided(exclude: set[str], *, blind_for=None) -> tuple[list[Decided], dict[str, list[IntentCandidateRecord]]]:
    """Candidates (not yet in the taxonomy) whose judgments reach the thresholds, with every copy's record; with
    `blind_for`, those sealed to that user (_sealed) are left out."""
    judged = (
        IntentJudgment.objects.exclude(candidate__candidate_id__in=exclude)
        .select_related("candidate")
        .order_by("created_at", "id")
    )
    judgments = list(judged)
    ids = {j.candidate.candidate_id for j in judgments}
    records: dict[str, list[IntentCandidateRecord]] = defaultdict(list)
    for record in IntentCandidateRecord.objects.filter(candidate_id__in=ids).order_by("id"):
        records[record.candidate_id].append(record)
    summaries = summarize([r for rows in records.values() for r in rows], judgments)
    sealed = _sealed(blind_for, judgments, records)
    decided = [
        Decided(
            candidate_id=cid,
            label=records[cid][0].intent,
            summary=summary,
            run_ids=tuple(_runs(records[cid])),
        )
        for cid, summary in summaries.items()
        if summary.accepted and cid not in sealed
    ]
    return decided, records


def _runs(records: Iterable[IntentCandidateRecord]) -> set[int]:
    return {int(row["run_id"]) for record in records for row in record.evidence if row.get("run_id")}


def taxonomy_preview(viewer=None) -> Plan:
    """What a draft would hold now (no write), as `viewer` may see it: for the taxonomy page. Candidates `viewer`
    may still judge are left out (the others' verdicts on them are sealed until theirs); the draft itself holds
    every decided candidate."""
    version = active_version()
    active = version.intents if version else []
    placed = {cid for row in active for cid in row.get("candidate_ids", [])}
    decided, _ = _decided(placed, blind_for=viewer)
    try:
        return plan_draft(active, decided)
    except Invalid:
        return Plan(intents=active, changes=[])


def taxonomy_draft(*, actor: Actor, relabels: Mapping[str, str] | None = None) -> DraftResult:
    """Build the next version of the default taxonomy (created on first use) from its active version, the judged
    candidates and the label edits. Conflict when nothing would change; an identical earlier version is returned
    instead of a copy. Reviewers and operators draft."""
    user = require_role(actor, Role.REVIEWER, Role.OPERATOR, doing="drafting the taxonomy", code="not_a_reviewer")
    for intent_id, label in (relabels or {}).items():
        if isinstance(label, str) and (problem := plain_identifier_error(label.strip())):
            raise Invalid(f"the new label of {intent_id} {problem}", code="invisible_characters")
    with transaction.atomic(durable=True):
        taxonomy, created_taxonomy = IntentTaxonomy.objects.get_or_create(
            slug=IntentTaxonomy.DEFAULT_SLUG, defaults={"title": "Intent taxonomy"}
        )
        taxonomy = IntentTaxonomy.objects.select_for_update().get(pk=taxonomy.pk)
        if created_taxonomy:
            audit_record(actor=actor, verb="intent_taxonomy.create", target=taxonomy, after={"slug": taxonomy.slug})
        parent = active_version(taxonomy)
        active = parent.intents if parent else []
        placed = {cid for row in active for cid in row.get("candidate_ids", [])}
        decided, _ = _decided(placed)
        plan = plan_draft(active, decided, relabels)
        if not plan.changes:
            raise Conflict(
                "nothing to draft: no judged candidate beyond the active version and no label edit",
                code="no_changes",
                details={"left_out": plan.left_out, "skipped": plan.skipped},
            )
        all_ids = {cid for row in plan.intents for cid in row["candidate_ids"]}
        runs_of: dict[str, set[int]] = defaultdict(set)
        for cid, evidence in IntentCandidateRecord.objects.filter(candidate_id__in=all_ids).values_list(
            "candidate_id", "evidence"
        ):
            runs_of[cid] |= {int(row["run_id"]) for row in evidence if row.get("run_id")}
        for intent in plan.intents:
            intent["support"] = len(set().union(*(runs_of[cid] for cid in intent["candidate_ids"])))
        document = {"intents": plan.intents}
        digest = canonical_digest(document)
        existing = TaxonomyVersion.objects.filter(taxonomy=taxonomy, digest=digest).first()
        if existing is not None:
            return DraftResult(version=existing, created=False, plan=plan)
        number = (TaxonomyVersion.objects.filter(taxonomy=taxonomy).aggregate(n=Max("number"))["n"] or 0) + 1
        version = TaxonomyVersion.objects.create(
            taxonomy=taxonomy,
            number=number,
            parent=parent,
            document=document,
            changes=plan.changes,
            digest=digest,
            created_by=user,
            created_at=timezone.now(),
        )
        labels = {row["intent_id"]: row["label"] for row in plan.intents}
        TaxonomyRunIntent.objects.bulk_create(
            [
                TaxonomyRunIntent(version=version, run_id=run_id, intent_id=intent_id, label=labels[intent_id][:300])
                for run_id, intent_id in sorted(run_index(plan.intents, runs_of).items())
            ]
        )
        audit_record(
            actor=actor,
            verb="intent_taxonomy.draft",
            target=version,
            after={
                "number": number,
                "digest": digest,
                "parent": parent.pk if parent else None,
                "changes": [{k: c[k] for k in ("change", "intent_id")} for c in plan.changes],
                "left_out": plan.left_out,
            },
        )
    return DraftResult(version=version, created=True, plan=plan)


def taxonomy_propose(*, actor: Actor, version: TaxonomyVersion, rationale: str) -> PromotionRequest:
    """Propose a drafted version for activation through the review policy (two approvals from others)."""
    return promotion_propose(actor=actor, kind=KIND, candidate_id=str(version.pk), rationale=rationale)
