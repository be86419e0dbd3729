"""/api/v1/intents/taxonomy: the reviewed intent taxonomy (the active version with a strong ETag, every version) and
reviewers' judgments of intent candidates.

Mounted by config/api.py. Reading needs the scope `intents:read`; judging needs `intents:write` and the reviewer role
(the services decide: the proposer cannot judge, one judgment per reviewer, a merge names an active intent).
Judgments of others stay hidden until the caller's own is recorded, as on the review queue page. Nothing here moves
the active pointer: a version becomes active through a promotion (kind `intent_taxonomy`, POST /api/v1/promotions).
Every refusal answers with the Error schema and writes nothing.
"""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest, HttpResponse
from django.utils.http import parse_etags
from ninja import Path, Query, Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.cursors import IntCursor
from common.errors import ApiError, Error, cursor_checked
from reviews.errors import ReviewError

from ..models import IntentCandidateRecord, IntentJudgment, IntentTaxonomy, TaxonomyVersion
from . import selectors, services
from .schemas import (
    CandidateJudgmentsOut,
    IntentJudgmentIn,
    IntentQueueOut,
    TaxonomyPageIn,
    TaxonomyVersionOut,
    TaxonomyVersionPageOut,
)

router = Router(tags=["intent taxonomy"])

READ = scoped("intents:read")
WRITE = scoped("intents:write")
VERSION_CURSOR = IntCursor("taxonomy")
Number = Annotated[int, Path(ge=1, le=2**31 - 1)]
INTENT_KEYS = ("intent_id", "label", "normalized", "aliases", "candidate_ids", "support")


# --- reads (each a fixed number of queries) --------------------------------------------------------------------------
def _taxonomy() -> IntentTaxonomy | None:
    """The default taxonomy with its active version, that version's parent and author (one query)."""
    return (
        IntentTaxonomy.objects.select_related("active_version", "active_version__parent", "active_version__created_by")
        .defer("active_version__parent__document", "active_version__parent__changes")
        .filter(slug=IntentTaxonomy.DEFAULT_SLUG)
        .first()
    )


def _pointer() -> IntentTaxonomy | None:
    """The default taxonomy's id and active version id (one query)."""
    return IntentTaxonomy.objects.only("id", "active_version").filter(slug=IntentTaxonomy.DEFAULT_SLUG).first()


def _versions(taxonomy_obj: IntentTaxonomy):
    return TaxonomyVersion.objects.filter(taxonomy=taxonomy_obj).select_related("parent", "created_by")


def _summary_out(version: TaxonomyVersion, active_id: int | None) -> dict:
    return {
        "number": version.number,
        "digest": version.digest,
        "parent_number": version.parent.number if version.parent_id else None,
        "is_active": version.pk == active_id,
        "created_by": version.created_by.username if version.created_by_id else None,
        "created_at": version.created_at,
    }


def _version_out(version: TaxonomyVersion, active_id: int | None) -> dict:
    return {
        **_summary_out(version, active_id),
        "intents": [{key: intent.get(key) for key in INTENT_KEYS} for intent in version.intents],
        "changes": list(version.changes or []),
    }


def _not_modified(request: HttpRequest, etag: str) -> bool:
    header = request.headers.get("If-None-Match")
    return bool(header) and bool({etag, f"W/{etag}", "*"} & set(parse_etags(header)))


@router.get(
    "/active",
    auth=READ,
    response={200: TaxonomyVersionOut, 304: None, 401: Error, 403: Error, 404: Error},
    summary="The active taxonomy version with its intents; strong ETag (the digest), If-None-Match answers 304",
    description='Headers: `ETag: "<digest>"`, `X-Waymark-Revision: <version number>`, `Cache-Control: no-cache`. '
    "404 `no_active_taxonomy` until a version has been activated through a promotion.",
)
def active_taxonomy(request: HttpRequest, response: HttpResponse):
    found = _taxonomy()
    version = found.active_version if found else None
    if version is None:
        raise ApiError(404, "no_active_taxonomy", "no intent taxonomy version is active yet")
    etag = f'"{version.digest}"'
    headers = {"ETag": etag, "X-Waymark-Revision": str(version.number), "Cache-Control": "no-cache"}
    if _not_modified(request, etag):
        not_modified = HttpResponse(status=304)
        for name, value in headers.items():
            not_modified[name] = value
        return not_modified
    for name, value in headers.items():
        response[name] = value
    return Status(200, _version_out(version, version.pk))


@router.get(
    "/versions",
    auth=READ,
    response={200: TaxonomyVersionPageOut, 400: Error, 401: Error, 403: Error, 422: Error},
    summary="Taxonomy versions, newest first (cursor pages; intents and changes left out)",
)
def list_versions(request: HttpRequest, page: Query[TaxonomyPageIn]):
    found = _pointer()
    if found is None:
        rows = TaxonomyVersion.objects.none()  # no taxonomy yet: no version (and no query), a foreign cursor a 400
    else:
        rows = _versions(found).defer("document", "changes", "parent__document", "parent__changes")
    with cursor_checked():
        items, next_cursor = VERSION_CURSOR.page(rows, page.cursor, page.limit, key="number")
    active_id = found.active_version_id if found else None
    return Status(200, {"items": [_summary_out(version, active_id) for version in items], "next_cursor": next_cursor})


@router.get(
    "/versions/{number}",
    auth=READ,
    response={200: TaxonomyVersionOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One taxonomy version by number, with its intents and changes",
)
def get_version(request: HttpRequest, number: Number):
    found = _pointer()
    version = (
        _versions(found).defer("parent__document", "parent__changes").filter(number=number).first() if found else None
    )
    if version is None:
        raise ApiError(404, "not_found", f"no taxonomy version {number}")
    return Status(200, _version_out(version, found.active_version_id))


# --- judgments -------------------------------------------------------------------------------------------------------
def _candidate(candidate_id: str) -> IntentCandidateRecord:
    """The first stored copy of a candidate id (judgments cover every copy)."""
    record = None
    if len(candidate_id) <= 40:
        record = IntentCandidateRecord.objects.filter(candidate_id=candidate_id).order_by("id").first()
    if record is None:
        raise ApiError(404, "unknown_candidate", f"no intent candidate {candidate_id}")
    return record


def _judgment_out(judgment: IntentJudgment, candidate_id: str) -> dict:
    return {
        "candidate_id": candidate_id,
        "reviewer": judgment.reviewer.username,
        "verdict": judgment.verdict,
        "merge_into": judgment.merge_target or None,
        "comment": judgment.comment,
        "created_at": judgment.created_at,
    }


def _judgments_out(request: HttpRequest, record: IntentCandidateRecord) -> dict:
    seen = selectors.judgments_for(request.user, record)
    cid = record.candidate_id
    return {
        "candidate_id": cid,
        "count": seen.count,
        "mine": _judgment_out(seen.mine, cid) if seen.mine else None,
        "judgments": [_judgment_out(j, cid) for j in seen.visible] if seen.visible is not None else None,
    }


@router.get(
    "/queue",
    auth=READ,
    response={200: IntentQueueOut, 401: Error, 403: Error},
    summary="The intent candidates waiting for your judgment (reviewers; empty for others)",
    description="Candidates whose novelty alert was promoted to review come first, then the oldest. Nothing of "
    "others' judgments is given, not even how many: they wait for yours.",
)
def judging_queue(request: HttpRequest):
    page = selectors.review_queue_for(request.user)
    items = [
        {
            "candidate_id": row.candidate_id,
            "intent": row.intent,
            "normalized": row.normalized,
            "kind": row.kind,
            "evidence": row.evidence,
            "promoted_alert": bool(getattr(row, "promoted_alert", False)),
        }
        for row in page.rows
    ]
    return Status(200, {"items": items, "total": page.total})


@router.get(
    "/candidates/{candidate_id}/judgments",
    auth=READ,
    response={200: CandidateJudgmentsOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="The judgments of a candidate as you may see them (blinded until your own is recorded)",
)
def candidate_judgments(request: HttpRequest, candidate_id: str):
    return Status(200, _judgments_out(request, _candidate(candidate_id)))


@router.post(
    "/judgments",
    auth=WRITE,
    response={201: CandidateJudgmentsOut, 400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 422: Error},
    summary="Judge an intent candidate (reviewers): valid, invalid, or merge into an active intent",
    description="201 with every judgment of the candidate (visible now that yours is recorded). 403 "
    "`not_a_reviewer` / `proposer_cannot_judge`; 404 `unknown_candidate`; 409 `already_judged`; 422 "
    "`merge_target_required`, `unknown_merge_target`, or `merge_into` given with another verdict.",
)
def judge(request: HttpRequest, body: IntentJudgmentIn):
    if body.merge_into and body.verdict != "merge":
        raise ApiError(422, "invalid", "merge_into goes only with the verdict merge")
    record = _candidate(body.candidate_id)
    try:
        services.intent_judgment_submit(
            actor=Actor.of_request(request),
            candidate=record,
            verdict=body.verdict,
            merge_target=body.merge_into or "",
            comment=body.comment,
        )
    except ReviewError as exc:
        raise ApiError(exc.status, exc.code, exc.message, exc.details) from None
    return Status(201, _judgments_out(request, record))
