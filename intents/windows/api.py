"""/api/v1/intents/windows: window analyses (clusters, novelty) and drift reports between two of them.

Mounted by config/api.py. Reading needs the scope `intents:read`; analysing a window and storing a drift report need
`intents:write` and the operator role. Every refusal answers with the Error schema and writes nothing; bad window
bounds answer 422.
"""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router, Status

from accounts.api_auth import scoped
from accounts.roles import Role, require_role
from accounts.services import Actor
from common.errors import ApiError, Error, cursor_checked

from . import selectors
from .schemas import DriftCompareIn, DriftOut, DriftPageOut, PageIn, WindowAnalyzeIn, WindowOut, WindowPageOut
from .services import WindowRefused, drift_compare, window_analyze

router = Router(tags=["intent windows"])

READ = scoped("intents:read")
WRITE = scoped("intents:write")
CLUSTER_FIELDS = (
    "cluster_id",
    "medoid_id",
    "medoid_label",
    "candidate_ids",
    "labels",
    "cohesion",
    "ambiguous_candidate_ids",
    "support",
)


def window_summary(analysis) -> dict:
    return {
        "id": analysis.pk,
        "window_start": analysis.window_start,
        "window_end": analysis.window_end,
        "embedder": analysis.embedder,
        "similarity_threshold": analysis.similarity_threshold,
        "ambiguity_margin": analysis.ambiguity_margin,
        "novelty_threshold": analysis.novelty_threshold,
        "candidates_count": analysis.candidates_count,
        "clusters_count": analysis.clusters_count,
        "ambiguous_count": analysis.ambiguous_count,
        "novelty_checked": analysis.novelty_checked,
        "novelty_note": analysis.novelty_note,
        "taxonomy": analysis.taxonomy_ref,
        "novel_count": analysis.novel_count,
        "digest": analysis.digest,
        "created_by": analysis.created_by.username if analysis.created_by_id else None,
        "created_at": analysis.created_at,
    }


def window_out(analysis) -> dict:
    return {
        **window_summary(analysis),
        "clusters": [{key: item[key] for key in CLUSTER_FIELDS} for item in analysis.clusters],
        "novelty": list(analysis.novelty),
    }


def drift_summary(report) -> dict:
    return {
        "id": report.pk,
        "before": report.before_id,
        "after": report.after_id,
        "matching": report.matching,
        "match_threshold": report.match_threshold,
        "jsd": report.jsd,
        "before_total": report.before_total,
        "after_total": report.after_total,
        "digest": report.digest,
        "created_by": report.created_by.username if report.created_by_id else None,
        "created_at": report.created_at,
    }


def drift_out(report) -> dict:
    return {
        **drift_summary(report),
        "cluster_matches": report.cluster_matches,
        "changes": report.changes,
        "retired": report.retired,
        "new": report.new,
        "biggest": report.biggest,
    }


def _refused(error: WindowRefused) -> ApiError:
    return ApiError(error.status, error.code, str(error))


@router.get(
    "",
    auth=READ,
    response={200: WindowPageOut, 400: Error, 401: Error, 403: Error, 422: Error},
    summary="Window analyses, newest first (cursor pages; clusters and novelty left out)",
)
def list_windows(request: HttpRequest, page: Query[PageIn]):
    with cursor_checked():
        found = selectors.analysis_page(cursor=page.cursor, limit=page.limit)
    return Status(200, {"items": [window_summary(item) for item in found.analyses], "next_cursor": found.next_cursor})


@router.post(
    "",
    auth=WRITE,
    response={201: WindowOut, 400: Error, 401: Error, 403: Error, 422: Error},
    summary="Analyse a window (operators): cluster its candidates, measure novelty against the active taxonomy",
    description="The window is [start, end) on the candidates' storage time. Runs synchronously; a window over the "
    "candidate limit is refused with 422 `window_too_large`. Novelty is skipped (novelty_checked false) when no "
    "reviewed taxonomy is active. Novel candidates raise novelty alerts (once per candidate).",
)
def analyze_window(request: HttpRequest, body: WindowAnalyzeIn):
    require_role(Actor.of_request(request), Role.OPERATOR, doing="analysing a window")
    try:
        analysis = window_analyze(
            actor=Actor.of_request(request),
            start=body.start,
            end=body.end,
            threshold=body.threshold,
            margin=body.margin,
            novelty_threshold=body.novelty_threshold,
        )
    except WindowRefused as exc:
        raise _refused(exc) from None
    analysis.created_by = request.user
    return Status(201, window_out(analysis))


@router.get(
    "/drift",
    auth=READ,
    response={200: DriftPageOut, 400: Error, 401: Error, 403: Error, 422: Error},
    summary="Drift reports, newest first (cursor pages; changes left out)",
)
def list_drift(request: HttpRequest, page: Query[PageIn]):
    with cursor_checked():
        found = selectors.drift_page(cursor=page.cursor, limit=page.limit)
    return Status(200, {"items": [drift_summary(item) for item in found.reports], "next_cursor": found.next_cursor})


@router.post(
    "/drift",
    auth=WRITE,
    response={200: DriftOut, 201: DriftOut, 400: Error, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="Store the drift between two window analyses (operators)",
    description="201 with the new report; 200 with the stored one when the same comparison was made before. 404 "
    "for an unknown analysis; 422 for matches naming unknown clusters or an after cluster twice.",
)
def compare_windows(request: HttpRequest, body: DriftCompareIn):
    require_role(Actor.of_request(request), Role.OPERATOR, doing="comparing windows")
    before = selectors.analysis_of(body.before)
    after = selectors.analysis_of(body.after)
    try:
        report = drift_compare(
            actor=Actor.of_request(request),
            before=before,
            after=after,
            cluster_matches=body.cluster_matches,
            matching=body.matching,
            match_threshold=body.match_threshold,
        )
    except WindowRefused as exc:
        raise _refused(exc) from None
    return Status(201 if getattr(report, "created_now", True) else 200, drift_out(report))


@router.get(
    "/drift/{report_id}",
    auth=READ,
    response={200: DriftOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One drift report: JSD, matched changes with masses, retired and new clusters, the biggest changes",
)
def get_drift(request: HttpRequest, report_id: int):
    return Status(200, drift_out(selectors.drift_of(report_id)))


@router.get(
    "/{analysis_id}",
    auth=READ,
    response={200: WindowOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One window analysis with its clusters and novelty",
)
def get_window(request: HttpRequest, analysis_id: int):
    return Status(200, window_out(selectors.analysis_of(analysis_id)))
