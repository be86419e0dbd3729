"""Every write of window analyses: analyse a time window's intent candidates (clusters, novelty against the active
taxonomy, alerts for novel candidates), compare two analyses (drift), and decide novelty alerts.

A window is the half-open interval [start, end) on the candidates' `created_at` (when Waymark stored them), so an
analysis of a past window is reproducible. Analyses run synchronously inside the request: a window may hold at most
`WAYMARK_INTENT_WINDOW_MAX_CANDIDATES` (default 2000) distinct candidates, which keeps the n×n similarity matrix
of the clustering under 32 MB; a larger window is refused with a message asking for a narrower one.

Vectors come from the configured embedder (intents.embeddings.get_embedder), stored once per (text, embedder): the
candidates' labels were embedded when they were stored; any missing vector is computed outside the transaction and
stored with the analysis.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common.canonical import digest_hex

from ..core.candidates import IntentCandidate, IntentEvidence
from ..core.clustering import cluster_intents
from ..core.drift import compare_intent_windows
from ..core.novelty import detect_novel_intents
from ..embeddings import get_embedder, missing_embeddings, text_digest
from ..models import Embedding, IntentCandidateRecord
from . import selectors
from .models import DriftReport, NoveltyAlert, WindowAnalysis

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.82
DEFAULT_MARGIN = 0.03
DEFAULT_NOVELTY_THRESHOLD = 0.75
MAX_MARGIN = 2.0
MIN_YEAR, MAX_YEAR = 1970, 9998
BIGGEST_CHANGES = 10
NO_TAXONOMY = "no reviewed taxonomy is active, so novelty was not measured"
EMPTY_TAXONOMY = "the active taxonomy has no intent with embedded candidates, so novelty was not measured"


class WindowRefused(ValueError):
    """The analysis or comparison cannot be made as asked; nothing was written. `status` is the HTTP status."""

    def __init__(self, message: str, *, code: str = "invalid", status: int = 422) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def max_window_candidates() -> int:
    return int(getattr(settings, "WAYMARK_INTENT_WINDOW_MAX_CANDIDATES", 2000))


def _check_unit(value: Any, name: str, low: float, high: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise WindowRefused(f"{name} must be a number") from None
    if not np.isfinite(number) or not low <= number <= high:
        raise WindowRefused(f"{name} must be in [{low:g}, {high:g}]")
    return number


def _check_bounds(start: Any, end: Any) -> tuple[datetime, datetime]:
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        raise WindowRefused("the window needs a start and an end time")
    if timezone.is_naive(start) or timezone.is_naive(end):
        raise WindowRefused("the window's times must carry a time zone")
    try:
        start, end = start.astimezone(UTC), end.astimezone(UTC)
    except (OverflowError, ValueError):
        raise WindowRefused("the window's times are out of range") from None
    if start.year < MIN_YEAR or end.year > MAX_YEAR:
        raise WindowRefused(f"the window must lie between the years {MIN_YEAR} and {MAX_YEAR}")
    if start >= end:
        raise WindowRefused("the window must end after it starts")
    return start, end


# -- vectors ----------------------------------------------------------------------------------------------------------


def _vectors_for(embedder, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], list[Embedding]]:
    """text → float64 vector under `embedder` for every distinct text, and the rows still to store (computed here,
    outside any transaction). Two queries at most."""
    unique = list(dict.fromkeys(texts))
    if not unique:
        return {}, []
    digests = {text: text_digest(text) for text in unique}
    stored = {
        row.text_digest: row.as_array()
        for row in Embedding.objects.filter(embedder=embedder.name, text_digest__in=list(digests.values()))
    }
    new_rows = missing_embeddings(embedder, [text for text in unique if digests[text] not in stored])
    for row in new_rows:
        stored[row.text_digest] = np.frombuffer(bytes(row.vector), dtype="<f4")
    return {text: np.asarray(stored[digests[text]], dtype=np.float64) for text in unique}, new_rows


def _unit(vector: np.ndarray) -> np.ndarray | None:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 and np.isfinite(norm) else None


# -- the active taxonomy --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaxonomyIntent:
    intent_id: str
    label: str
    candidate_ids: tuple[str, ...]


@dataclass(frozen=True)
class ActiveTaxonomy:
    ref: str
    intents: tuple[TaxonomyIntent, ...]


def _centroids(taxonomy: ActiveTaxonomy, embedder) -> tuple[dict[str, np.ndarray], list[Embedding]]:
    """intent id → the mean of its candidates' L2-normalised vectors (intents with no embedded candidate, or a mean
    of zero norm, are left out)."""
    wanted = {cid for intent in taxonomy.intents for cid in intent.candidate_ids}
    labels = selectors.labels_of_candidates(wanted)
    vectors, new_rows = _vectors_for(embedder, sorted(set(labels.values())))
    centroids: dict[str, np.ndarray] = {}
    for intent in taxonomy.intents:
        units = [_unit(vectors[labels[cid]]) for cid in intent.candidate_ids if cid in labels]
        units = [unit for unit in units if unit is not None]
        if not units:
            continue
        mean = np.mean(np.vstack(units), axis=0)
        if _unit(mean) is not None:
            centroids[intent.intent_id] = mean
    return centroids, new_rows


# -- analyse a window -------------------------------------------------------------------------------------------------


def _as_candidate(record: IntentCandidateRecord) -> IntentCandidate:
    evidence = tuple(
        IntentEvidence(trajectory_id=str(item["trajectory_id"]), start=int(item["start"]), end=int(item["end"]))
        for item in record.evidence or []
    )
    return IntentCandidate(candidate_id=record.candidate_id, intent=record.intent, kind=record.kind, evidence=evidence)


def _cluster_document(cluster, labels: Mapping[str, str]) -> dict[str, Any]:
    members = list(cluster.candidate_ids)
    return {
        "cluster_id": cluster.cluster_id,
        "medoid_id": cluster.medoid_id,
        "medoid_label": labels.get(cluster.medoid_id, ""),
        "candidate_ids": members,
        "labels": list(cluster.labels),
        "cohesion": float(cluster.cohesion),
        "ambiguous_candidate_ids": list(cluster.ambiguous_candidate_ids),
        "support": int(cluster.support),
        "member_labels": {cid: labels.get(cid, "") for cid in members},
    }


def window_analyze(
    *,
    actor: Actor,
    start: datetime,
    end: datetime,
    threshold: float = DEFAULT_THRESHOLD,
    margin: float = DEFAULT_MARGIN,
    novelty_threshold: float = DEFAULT_NOVELTY_THRESHOLD,
) -> WindowAnalysis:
    """Cluster the candidates stored in [start, end), measure their novelty against the active taxonomy (skipped,
    and said so, when none is active), store the analysis and raise one NoveltyAlert per novel candidate not
    alerted before. WindowRefused (nothing written) for bad bounds or parameters and for a window over the limit."""
    require_role(actor, Role.OPERATOR, doing="analysing a window", system=True)
    start, end = _check_bounds(start, end)
    threshold = _check_unit(threshold, "the similarity threshold", -1.0, 1.0)
    margin = _check_unit(margin, "the ambiguity margin", 0.0, MAX_MARGIN)
    novelty_threshold = _check_unit(novelty_threshold, "the novelty threshold", -1.0, 1.0)
    limit = max_window_candidates()
    records = selectors.window_candidates(start, end, limit=limit + 1)
    if len(records) > limit:
        raise WindowRefused(
            f"the window holds more than {limit} candidates; analyse a narrower window",
            code="window_too_large",
        )
    embedder = get_embedder()
    labels = {record.candidate_id: record.intent for record in records}
    vectors, new_rows = _vectors_for(embedder, [record.intent for record in records])
    candidates = [_as_candidate(record) for record in records]
    embeddings = {record.candidate_id: vectors[record.intent] for record in records}
    try:
        clustering = cluster_intents(candidates, embeddings, similarity_threshold=threshold, ambiguity_margin=margin)
    except ValueError as error:  # e.g. a stored zero vector
        raise WindowRefused(f"the window's candidates cannot be clustered: {error}") from None
    clusters = [_cluster_document(cluster, labels) for cluster in clustering.clusters]

    taxonomy = selectors.active_taxonomy()
    novelty: list[dict[str, Any]] = []
    note, taxonomy_ref, centroids_count, checked = NO_TAXONOMY, "", 0, False
    if taxonomy is not None:
        taxonomy_ref = taxonomy.ref
        centroids, centroid_rows = _centroids(taxonomy, embedder)
        new_rows += centroid_rows
        centroids_count = len(centroids)
        if not centroids:
            note = EMPTY_TAXONOMY
        elif candidates:
            intent_labels = {intent.intent_id: intent.label for intent in taxonomy.intents}
            try:
                found = detect_novel_intents(candidates, embeddings, centroids, threshold=novelty_threshold)
            except ValueError as error:
                raise WindowRefused(f"novelty cannot be measured: {error}") from None
            novelty = [
                {
                    "candidate_id": item.candidate_id,
                    "label": labels.get(item.candidate_id, ""),
                    "nearest_intent_id": item.nearest_cluster_id,
                    "nearest_label": intent_labels.get(item.nearest_cluster_id, ""),
                    "similarity": float(item.similarity),
                    "novel": bool(item.novel),
                }
                for item in found
            ]
            note, checked = "", True
        else:
            note, checked = "", True

    document = {
        "window": [start.isoformat(), end.isoformat()],
        "embedder": embedder.name,
        "similarity_threshold": threshold,
        "ambiguity_margin": margin,
        "novelty_threshold": novelty_threshold,
        "clusters": clusters,
        "taxonomy": taxonomy_ref,
        "novelty": novelty,
    }
    with transaction.atomic(durable=True):
        if new_rows:
            Embedding.objects.bulk_create(new_rows, ignore_conflicts=True)
        analysis = WindowAnalysis.objects.create(
            window_start=start,
            window_end=end,
            embedder=str(embedder.name)[:200],
            dimensions=int(embedder.dimensions),
            similarity_threshold=threshold,
            ambiguity_margin=margin,
            novelty_threshold=novelty_threshold,
            candidates_count=len(candidates),
            clusters_count=len(clusters),
            ambiguous_count=sum(len(cluster["ambiguous_candidate_ids"]) for cluster in clusters),
            clusters=clusters,
            novelty_checked=checked,
            novelty_note=note,
            taxonomy_ref=taxonomy_ref[:200],
            centroids_count=centroids_count,
            novelty=novelty,
            novel_count=sum(1 for row in novelty if row["novel"]),
            digest=digest_hex(document),
            created_by=actor.user,
        )
        raised = _raise_alerts(analysis, novelty, novelty_threshold)
        audit_record(
            actor=actor,
            verb="intent_window.analyze",
            target=analysis,
            after={
                "window": document["window"],
                "candidates": analysis.candidates_count,
                "clusters": analysis.clusters_count,
                "novel": analysis.novel_count,
                "alerts_raised": raised,
                "digest": analysis.digest,
            },
        )
    return analysis


def _raise_alerts(analysis: WindowAnalysis, novelty: list[dict[str, Any]], threshold: float) -> int:
    novel = [row for row in novelty if row["novel"]]
    if not novel:
        return 0
    known = set(
        NoveltyAlert.objects.filter(candidate_id__in=[row["candidate_id"] for row in novel]).values_list(
            "candidate_id", flat=True
        )
    )
    rows = [
        NoveltyAlert(
            analysis=analysis,
            candidate_id=row["candidate_id"],
            label=row["label"][:300],
            nearest_intent_id=row["nearest_intent_id"][:200],
            nearest_label=row["nearest_label"][:300],
            similarity=row["similarity"],
            threshold=threshold,
        )
        for row in novel
        if row["candidate_id"] not in known
    ]
    NoveltyAlert.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def novelty_alerts_restore(*, actor: Actor, analysis: WindowAnalysis) -> int:
    """Raise again the alerts of `analysis` that are gone: one per novel candidate of its stored novelty that no alert
    names (someone deleted it). Nothing is measured again: the analysis is immutable and its novelty rows say which
    candidates were novel. The number raised; 0 (nothing written) when none is missing. seed_demo completes a demo
    whose alert was deleted with it (intents.demo)."""
    require_role(actor, Role.OPERATOR, doing="restoring novelty alerts", system=True)
    novel = [row["candidate_id"] for row in analysis.novelty if row.get("novel")]
    if NoveltyAlert.objects.filter(candidate_id__in=novel).count() == len(novel):
        return 0  # none missing (the usual case: one read, nothing written)
    with transaction.atomic(durable=True):
        raised = _raise_alerts(analysis, analysis.novelty, analysis.novelty_threshold)
        if raised:
            audit_record(
                actor=actor, verb="intent_window.alerts_restore", target=analysis, after={"alerts_raised": raised}
            )
    return raised


# -- drift between two analyses ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cluster:
    cluster_id: str
    support: int


@dataclass(frozen=True)
class _Window:
    clusters: tuple[_Cluster, ...]


def _window(analysis: WindowAnalysis) -> _Window:
    return _Window(tuple(_Cluster(row["cluster_id"], int(row["support"])) for row in analysis.clusters))


def medoid_matches(before: WindowAnalysis, after: WindowAnalysis, threshold: float) -> dict[str, tuple[str, float]]:
    """before id → (after id, cosine): greedy one-to-one matching of medoids, most similar pair first (ties by the
    before id, then the after id), keeping pairs with cosine >= threshold. Both analyses must share their embedder."""
    if before.embedder != after.embedder:
        raise WindowRefused(
            f"medoid matching needs one embedder; window #{before.pk} used {before.embedder!r} and window "
            f"#{after.pk} {after.embedder!r}"
        )
    if not before.clusters or not after.clusters:
        return {}

    class _Named:
        name = before.embedder
        dimensions = before.dimensions

        def embed(self, texts):  # only stored vectors are used: the analyses computed them all
            raise WindowRefused("a medoid's vector is missing; the analyses' vectors are no longer stored")

    texts = [row["medoid_label"] for row in before.clusters] + [row["medoid_label"] for row in after.clusters]
    configured = get_embedder()
    vectors, _ = _vectors_for(configured if configured.name == before.embedder else _Named(), texts)
    left = np.vstack([_unit(vectors[row["medoid_label"]]) for row in before.clusters])
    right = np.vstack([_unit(vectors[row["medoid_label"]]) for row in after.clusters])
    similarity = left @ right.T
    pairs = [
        (-float(similarity[i, j]), before.clusters[i]["cluster_id"], after.clusters[j]["cluster_id"])
        for i, j in zip(*np.nonzero(similarity >= threshold), strict=True)
    ]
    matches: dict[str, tuple[str, float]] = {}
    taken: set[str] = set()
    for negative, before_id, after_id in sorted(pairs):
        if before_id in matches or after_id in taken:
            continue
        matches[before_id] = (after_id, -negative)
        taken.add(after_id)
    return matches


def drift_compare(
    *,
    actor: Actor,
    before: WindowAnalysis,
    after: WindowAnalysis,
    cluster_matches: Mapping[str, str] | None = None,
    matching: str = DriftReport.Matching.IDENTITY,
    match_threshold: float | None = None,
) -> DriftReport:
    """Store the drift from `before` to `after` (spec §2.8). Matching: `identity` (the spec's default: shared medoid
    ids), `medoid` (nearest medoid with cosine >= match_threshold, default the after window's similarity threshold),
    or explicit `cluster_matches` (matching becomes `explicit`). The same comparison asked again returns the report
    stored before (`created_now` tells which). WindowRefused (nothing written) for bad matches."""
    require_role(actor, Role.OPERATOR, doing="comparing windows", system=True)
    similarities: dict[str, float] = {}
    if cluster_matches:
        matching, match_threshold = DriftReport.Matching.EXPLICIT, None
        matches = {str(key): str(value) for key, value in cluster_matches.items()}
    elif matching == DriftReport.Matching.MEDOID:
        match_threshold = _check_unit(
            after.similarity_threshold if match_threshold is None else match_threshold,
            "the match threshold",
            -1.0,
            1.0,
        )
        found = medoid_matches(before, after, match_threshold)
        matches = {key: value for key, (value, _) in found.items()}
        similarities = {key: similarity for key, (_, similarity) in found.items()}
    elif matching == DriftReport.Matching.IDENTITY:
        match_threshold, matches = None, {}
    else:
        raise WindowRefused(f"unknown matching {matching!r}: identity, medoid or explicit cluster matches")
    try:
        report = compare_intent_windows(_window(before), _window(after), cluster_matches=matches or None)
    except ValueError as error:
        raise WindowRefused(str(error)) from None
    if matching == DriftReport.Matching.IDENTITY:
        matches = {change.before_cluster_id: change.after_cluster_id for change in report.changes}
    existing = selectors.drift_report_for(before, after, matching=matching, match_threshold=match_threshold)
    if existing is not None and existing.cluster_matches == matches:
        existing.created_now = False
        return existing

    before_labels = {row["cluster_id"]: row["medoid_label"] for row in before.clusters}
    after_labels = {row["cluster_id"]: row["medoid_label"] for row in after.clusters}
    before_support = {row["cluster_id"]: row["support"] for row in before.clusters}
    after_support = {row["cluster_id"]: row["support"] for row in after.clusters}

    def mass(support: int, total: int) -> float:
        return support / total if total else 0.0

    changes = [
        {
            "before_cluster_id": change.before_cluster_id,
            "after_cluster_id": change.after_cluster_id,
            "before_label": before_labels.get(change.before_cluster_id, ""),
            "after_label": after_labels.get(change.after_cluster_id, ""),
            "before_mass": change.before_mass,
            "after_mass": change.after_mass,
            "mass_delta": change.mass_delta,
            "similarity": similarities.get(change.before_cluster_id),
        }
        for change in report.changes
    ]
    retired = [
        {
            "cluster_id": cid,
            "label": before_labels.get(cid, ""),
            "support": before_support[cid],
            "mass": mass(before_support[cid], report.before_total),
        }
        for cid in report.retired_cluster_ids
    ]
    new = [
        {
            "cluster_id": cid,
            "label": after_labels.get(cid, ""),
            "support": after_support[cid],
            "mass": mass(after_support[cid], report.after_total),
        }
        for cid in report.new_cluster_ids
    ]
    biggest = sorted(
        [{"kind": "matched", **row} for row in changes]
        + [
            {
                "kind": "retired",
                "before_cluster_id": row["cluster_id"],
                "after_cluster_id": None,
                "before_label": row["label"],
                "after_label": "",
                "before_mass": row["mass"],
                "after_mass": 0.0,
                "mass_delta": -row["mass"],
                "similarity": None,
            }
            for row in retired
        ]
        + [
            {
                "kind": "new",
                "before_cluster_id": None,
                "after_cluster_id": row["cluster_id"],
                "before_label": "",
                "after_label": row["label"],
                "before_mass": 0.0,
                "after_mass": row["mass"],
                "mass_delta": row["mass"],
                "similarity": None,
            }
            for row in new
        ],
        key=lambda row: (-abs(row["mass_delta"]), row["before_cluster_id"] or "", row["after_cluster_id"] or ""),
    )[:BIGGEST_CHANGES]
    document = {
        "before": before.digest,
        "after": after.digest,
        "matching": str(matching),
        "match_threshold": match_threshold,
        "cluster_matches": matches,
        "jsd": report.jsd,
        "changes": changes,
        "retired": retired,
        "new": new,
    }
    with transaction.atomic(durable=True):
        drift = DriftReport.objects.create(
            before=before,
            after=after,
            matching=str(matching),
            match_threshold=match_threshold,
            cluster_matches=matches,
            jsd=float(report.jsd),
            before_total=report.before_total,
            after_total=report.after_total,
            changes=changes,
            retired=retired,
            new=new,
            biggest=biggest,
            digest=digest_hex(document),
            created_by=actor.user,
        )
        audit_record(
            actor=actor,
            verb="intent_drift.compare",
            target=drift,
            after={"before": before.pk, "after": after.pk, "matching": str(matching), "jsd": drift.jsd},
        )
    drift.created_now = True
    return drift


# -- novelty alerts ---------------------------------------------------------------------------------------------------


def novelty_alert_decide(*, actor: Actor, alert: NoveltyAlert, status: str, note: str = "") -> NoveltyAlert:
    """Dismiss an open alert or mark it promoted to review; a decided alert is not decided again (409)."""
    require_role(actor, Role.REVIEWER, Role.OPERATOR, doing="deciding novelty alerts", code="not_a_reviewer")
    if status not in (NoveltyAlert.Status.DISMISSED, NoveltyAlert.Status.PROMOTED):
        raise WindowRefused(f"an alert is dismissed or promoted, not {status!r}")
    with transaction.atomic(durable=True):
        locked = NoveltyAlert.objects.select_for_update().get(pk=alert.pk)
        if locked.status != NoveltyAlert.Status.OPEN:
            raise WindowRefused(
                f"the alert on {locked.candidate_id} was {locked.get_status_display()} already",
                code="alert_decided",
                status=409,
            )
        before = locked.status
        locked.status = status
        locked.note = str(note or "")[:2000]
        locked.decided_by = actor.user
        locked.decided_at = timezone.now()
        locked.save(update_fields=["status", "note", "decided_by", "decided_at"])
        audit_record(
            actor=actor,
            verb=f"intent_novelty_alert.{'dismiss' if status == NoveltyAlert.Status.DISMISSED else 'promote'}",
            target=locked,
            before={"status": before},
            after={"status": status, "note": locked.note},
        )
    return locked
