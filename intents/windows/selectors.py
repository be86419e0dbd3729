"""Reads of window analyses, drift reports and novelty alerts for the pages, the API and the services, each a
fixed number of queries."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Q
from django.http import Http404

from common.cursors import IntCursor
from trajectories.choices import EVALUATION_SOURCE
from trajectories.selectors import run_queryset

from ..models import IntentCandidateRecord
from .models import DriftReport, NoveltyAlert, WindowAnalysis

if TYPE_CHECKING:
    from .services import ActiveTaxonomy

ANALYSIS_CURSOR = IntCursor("window")
DRIFT_CURSOR = IntCursor("drift")
ALERT_CURSOR = IntCursor("alert")
MAX_PAGE_SIZE = 100
# Large JSON documents a list does not show.
LIST_DEFERRED = ("clusters", "novelty")
DRIFT_LIST_DEFERRED = ("changes", "retired", "new", "biggest", "cluster_matches")


# -- inputs of an analysis --------------------------------------------------------------------------------------------


def from_evaluation_runs(records: Iterable[IntentCandidateRecord]) -> set[str]:
    """The candidate ids among `records` whose evidence cites a run a live replay made (at most one query): stored
    before intents were kept to production runs, they are no evidence of what agents do."""
    records = list(records)
    cited = {
        int(item["run_id"])
        for record in records
        for item in record.evidence or []
        if isinstance(item, dict) and isinstance(item.get("run_id"), int)
    }
    evaluation = set(run_queryset().evaluation().filter(pk__in=cited).values_list("pk", flat=True)) if cited else set()
    prefix = f"{EVALUATION_SOURCE}:"
    return {
        record.candidate_id
        for record in records
        for item in record.evidence or []
        if isinstance(item, dict)
        and (item.get("run_id") in evaluation or str(item.get("trajectory_id", "")).startswith(prefix))
    }


def window_candidates(start: datetime, end: datetime, *, limit: int) -> list[IntentCandidateRecord]:
    """The distinct candidates (by candidate id, the oldest record kept) stored in [start, end), oldest first, but
    those citing an evaluation run (from_evaluation_runs); at most `limit` (two queries, the caller asks for one more
    than it allows to tell an overflow)."""
    rows = (
        IntentCandidateRecord.objects.filter(created_at__gte=start, created_at__lt=end)
        .only("id", "candidate_id", "intent", "kind", "evidence", "created_at")
        .order_by("created_at", "id")
    )
    seen: dict[str, IntentCandidateRecord] = {}
    # Duplicates (one candidate id under several sources) are rare; read in slices so a limit still holds.
    offset, step = 0, max(limit, 1)
    while len(seen) < limit:
        chunk = list(rows[offset : offset + step])
        excluded = from_evaluation_runs(chunk)
        for record in chunk:
            if record.candidate_id not in excluded:
                seen.setdefault(record.candidate_id, record)
        if len(chunk) < step:
            break
        offset += step
    return list(seen.values())[:limit]


def labels_of_candidates(candidate_ids: Iterable[str]) -> dict[str, str]:
    """candidate id → its label (one query)."""
    wanted = sorted({str(cid) for cid in candidate_ids})
    if not wanted:
        return {}
    labels: dict[str, str] = {}
    for candidate_id, intent in (
        IntentCandidateRecord.objects.filter(candidate_id__in=wanted)
        .order_by("id")
        .values_list("candidate_id", "intent")
    ):
        labels.setdefault(candidate_id, intent)
    return labels


def active_taxonomy() -> ActiveTaxonomy | None:
    """The reviewed taxonomy's active version as (ref, intents), or None when no version is active (one query)."""
    from ..taxonomy.models import IntentTaxonomy
    from .services import ActiveTaxonomy, TaxonomyIntent

    taxonomy = (
        IntentTaxonomy.objects.select_related("active_version")
        .filter(slug=IntentTaxonomy.DEFAULT_SLUG, active_version__isnull=False)
        .first()
    )
    if taxonomy is None:
        return None
    version = taxonomy.active_version
    intents = tuple(
        TaxonomyIntent(
            intent_id=str(item.get("intent_id") or ""),
            label=str(item.get("label") or ""),
            candidate_ids=tuple(str(cid) for cid in item.get("candidate_ids") or ()),
        )
        for item in version.intents
        if isinstance(item, dict) and item.get("intent_id")
    )
    return ActiveTaxonomy(ref=f"taxonomy v{version.number} {version.short_digest}", intents=intents)


# -- analyses ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnalysisPage:
    analyses: list[WindowAnalysis]
    next_cursor: str | None


def analysis_page(*, cursor: str | None = None, limit: int = 20) -> AnalysisPage:
    """One page of analyses, newest first, without their documents (InvalidCursor for a cursor we did not issue)."""
    rows = WindowAnalysis.objects.select_related("created_by").defer(*LIST_DEFERRED)
    return AnalysisPage(*ANALYSIS_CURSOR.page(rows, cursor, max(1, min(limit, MAX_PAGE_SIZE))))


def analysis_choices(limit: int = 50) -> list[WindowAnalysis]:
    """Recent analyses to compare (one query, documents left out)."""
    return list(WindowAnalysis.objects.defer(*LIST_DEFERRED).order_by("-id")[:limit])


def analysis_of(analysis_id: int | None) -> WindowAnalysis:
    found = (
        WindowAnalysis.objects.select_related("created_by").filter(pk=analysis_id).first()
        if analysis_id is not None
        else None
    )
    if found is None:
        raise Http404(f"no window analysis {analysis_id}")
    return found


def alerts_of(analysis: WindowAnalysis) -> list[NoveltyAlert]:
    """The alerts of the analysis's novel candidates, whichever analysis raised them (one query, none if none)."""
    novel = [row["candidate_id"] for row in analysis.novelty if row.get("novel")]
    if not novel:
        return []
    return list(NoveltyAlert.objects.filter(candidate_id__in=novel).select_related("decided_by").order_by("id"))


def drifts_involving(analysis: WindowAnalysis, limit: int = 20) -> list[DriftReport]:
    return list(
        DriftReport.objects.filter(Q(before=analysis) | Q(after=analysis))
        .defer(*DRIFT_LIST_DEFERRED)
        .order_by("-id")[:limit]
    )


# -- drift reports ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DriftPage:
    reports: list[DriftReport]
    next_cursor: str | None


def drift_page(*, cursor: str | None = None, limit: int = 20) -> DriftPage:
    rows = DriftReport.objects.select_related("created_by", "before", "after").defer(
        *DRIFT_LIST_DEFERRED, *(f"before__{f}" for f in LIST_DEFERRED), *(f"after__{f}" for f in LIST_DEFERRED)
    )
    return DriftPage(*DRIFT_CURSOR.page(rows, cursor, max(1, min(limit, MAX_PAGE_SIZE))))


def drift_of(report_id: int | None) -> DriftReport:
    found = (
        DriftReport.objects.select_related("created_by", "before", "after")
        .defer(*(f"before__{f}" for f in LIST_DEFERRED), *(f"after__{f}" for f in LIST_DEFERRED))
        .filter(pk=report_id)
        .first()
        if report_id is not None
        else None
    )
    if found is None:
        raise Http404(f"no drift report {report_id}")
    return found


def drift_report_for(
    before: WindowAnalysis, after: WindowAnalysis, *, matching: str, match_threshold: float | None
) -> DriftReport | None:
    """The report stored before for the same comparison, if any (one query)."""
    return (
        DriftReport.objects.filter(before=before, after=after, matching=matching, match_threshold=match_threshold)
        .order_by("id")
        .first()
    )


def jsd_series(limit: int = 20) -> list[DriftReport]:
    """The most recent drift reports, oldest first, for the JSD chart (one query, documents left out)."""
    rows = list(DriftReport.objects.defer(*DRIFT_LIST_DEFERRED).order_by("-id")[:limit])
    return rows[::-1]


# -- novelty alerts ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlertPage:
    alerts: list[NoveltyAlert]
    next_cursor: str | None


def alert_page(*, status: str = "", cursor: str | None = None, limit: int = 50) -> AlertPage:
    rows = NoveltyAlert.objects.select_related("decided_by")
    if status:
        rows = rows.filter(status=status)
    return AlertPage(*ALERT_CURSOR.page(rows, cursor, max(1, min(limit, MAX_PAGE_SIZE))))


def alert_of(alert_id: int | None) -> NoveltyAlert:
    found = NoveltyAlert.objects.filter(pk=alert_id).first() if alert_id is not None else None
    if found is None:
        raise Http404(f"no novelty alert {alert_id}")
    return found


def open_alert_count() -> int:
    return NoveltyAlert.objects.filter(status=NoveltyAlert.Status.OPEN).count()
