"""/api/v1/reviews (the queue) and /api/v1/promotions (propose, read, judge); `promotions_router` is mounted by
config/api.py at /promotions. Every operation needs the scope reviews:judge, which only reviewers' tokens carry;
the policy and its errors are the services' (reviews.errors → the Error body)."""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest
from ninja import Path, Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.errors import ApiError, Error

from . import selectors, services
from .errors import ReviewError
from .models import PromotionRequest
from .schemas import JudgmentIn, PromotionOut, ProposeIn, QueueOut

router = Router(tags=["reviews"])
promotions_router = Router(tags=["reviews"])

JUDGE = "reviews:judge"
PromotionId = Annotated[int, Path(ge=1, le=2**63 - 1)]
ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 422: Error}


def _reviewer(request: HttpRequest):
    user = request.user
    if not user.may_judge:
        raise ApiError(403, "not_a_reviewer", "this operation needs a reviewer's token")
    return user


def _api_error(exc: ReviewError) -> ApiError:
    return ApiError(exc.status, exc.code, exc.message, exc.details)


def promotion_out(user, request: PromotionRequest) -> dict:
    view = selectors.promotion_view(user, request)
    gate = request.gate_snapshot or {}
    return {
        "id": request.pk,
        "kind": request.kind,
        "candidate_id": request.candidate_id,
        "parent_key": request.parent_key,
        "title": request.title,
        "candidate_label": getattr(request, "candidate_label", "") or request.candidate_id,
        "parent_label": request.parent_label,
        "replaces_id": request.replaces_id,
        "replaces_label": getattr(request, "replaces_label", "") or None,
        "is_rollback": request.is_rollback,
        "rollout": request.rollout,
        "canary_share": request.canary_share if request.rollout == "canary" else None,
        "status": view.status,
        "proposer": request.proposer.username,
        "rationale": request.rationale,
        "gate": {
            "passing": gate.get("passing"),
            "summary": gate.get("summary", ""),
            "details": gate.get("details") or {},
            "url": gate.get("url", ""),
            "metrics": gate.get("metrics") or [],
            "cases": gate.get("cases") or [],
            "cases_total": gate.get("cases_total") or len(gate.get("cases") or []),
            "certificate": gate.get("certificate"),
            "safety": gate.get("safety"),
        },
        "override": (
            {"by": request.override_by.username, "reason": request.override_reason, "at": request.overridden_at}
            if request.override_by_id
            else None
        ),
        "required_approvals": request.required_approvals,
        "approvals": view.approvals,
        "rejections": view.rejections,
        "counts_visible": view.counts_visible,
        "outcome": (
            {"status": view.outcome.status, "text": view.outcome.text, "at": view.outcome.at} if view.outcome else None
        ),
        "judgments": (
            [
                {
                    "reviewer": j.reviewer.username,
                    "verdict": j.verdict,
                    "comment": j.comment,
                    "created_at": j.created_at,
                }
                for j in view.judgments
            ]
            if view.judgments is not None
            else None
        ),
        "my_verdict": view.my_judgment.verdict if view.my_judgment else None,
        "created_at": request.created_at,
        "closed_at": request.closed_at,
        "applied_at": request.applied_at,
    }


@router.get(
    "/queue",
    auth=scoped(JUDGE),
    response={200: QueueOut, **ERRORS},
    summary="Pending promotion requests, the ones waiting for the caller's judgment first",
)
def queue(request: HttpRequest, kind: str = ""):
    user = _reviewer(request)
    rows = selectors.queue_for(user, kind=kind)
    items = [
        {
            "id": row.pk,
            "kind": row.kind,
            "candidate_id": row.candidate_id,
            "candidate_label": row.candidate_label or row.candidate_id,
            "title": row.title,
            "parent_label": row.parent_label,
            "replaces_id": row.replaces_id,
            "replaces_label": row.replaces_label or None,
            "status": row.shown_status,
            "is_rollback": row.is_rollback,
            "gate_passing": row.gate_passing,
            "overridden": row.is_overridden,
            "approvals": row.approvals if row.counts_visible else None,
            "rejections": row.rejections if row.counts_visible else None,
            "required_approvals": row.required_approvals,
            "pending_for_me": row.pending_for_me,
            "lease_holder": row.active_lease.holder.username if row.active_lease else None,
            "created_at": row.created_at,
        }
        for row in rows
    ]
    return {"items": items}


@promotions_router.post(
    "",
    auth=scoped(JUDGE),
    response={201: PromotionOut, **ERRORS},
    summary="Propose a candidate for activation (records the version it replaces and its gate evidence)",
)
def propose(request: HttpRequest, body: ProposeIn):
    user = _reviewer(request)
    try:
        created = services.promotion_propose(
            actor=Actor.of_request(request),
            kind=body.kind,
            candidate_id=body.candidate_id,
            rationale=body.rationale,
            is_rollback=body.is_rollback,
            rollout=body.rollout,
            canary_share=body.canary_share,
        )
    except ReviewError as exc:
        raise _api_error(exc) from None
    return Status(201, promotion_out(user, selectors.promotion_for_user(user, created.pk)))


@promotions_router.get(
    "/{promotion_id}",
    auth=scoped(JUDGE),
    response={200: PromotionOut, **ERRORS},
    summary="One promotion request; others' judgments only after the caller's own or once it is closed",
)
def detail(request: HttpRequest, promotion_id: PromotionId):
    user = _reviewer(request)
    return promotion_out(user, selectors.promotion_for_user(user, promotion_id))


@promotions_router.post(
    "/{promotion_id}/judgments",
    auth=scoped(JUDGE),
    response={201: PromotionOut, **ERRORS},
    summary="Approve or reject (a rejection needs a comment); the approval that meets the policy activates",
    description="409 `stale` when the version the request replaces is no longer active (the request becomes "
    "superseded), `already_judged`, `not_open`, or `four_eyes` for the admin who overrode its gate; 403 "
    "`proposer_cannot_judge` for the proposer.",
)
def judge(request: HttpRequest, promotion_id: PromotionId, body: JudgmentIn):
    user = _reviewer(request)
    promotion = selectors.promotion_for_user(user, promotion_id)
    try:
        services.judgment_submit(
            actor=Actor.of_request(request), request=promotion, verdict=body.verdict, comment=body.comment
        )
    except ReviewError as exc:
        raise _api_error(exc) from None
    return Status(201, promotion_out(user, selectors.promotion_for_user(user, promotion_id)))
