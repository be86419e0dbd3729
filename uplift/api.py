"""/api/v1/certification: certificates (certification:read), the model-coverage flags, the policies and critical
tasks, and re-certification (certification:write, operators' tokens only). Errors are the Error body."""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest
from ninja import Path, Query, Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.errors import ApiError, Error

from . import selectors, services, watch_services
from .schemas import (
    CertificateOut,
    CoverageFlagOut,
    PolicyIn,
    PolicyOut,
    RecertifyIn,
    RecertifyOut,
    WatchOut,
    WatchSetIn,
    WatchStopIn,
)

router = Router(tags=["certification"])

READ, WRITE = "certification:read", "certification:write"
CertificateId = Annotated[int, Path(ge=1, le=2**63 - 1)]
ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 422: Error}


def _certificate_out(certificate) -> dict:
    split = certificate.split
    max_decisions = int((certificate.policy or {}).get("max_decisions") or 0)
    return {
        "id": certificate.pk,
        "kind": certificate.kind,
        "candidate_id": certificate.candidate_id,
        "replaces_id": certificate.replaces_id,
        "parent_key": certificate.parent_key,
        "passed": certificate.passed,
        "reasons": certificate.reasons,
        "sentence": certificate.sentence,
        "policy": certificate.policy,
        "totals": certificate.totals,
        "tasks": certificate.rows,
        "agent_models": certificate.agent_models,
        "provenance": certificate.provenance,
        "split": split.key,
        "decision_number": certificate.decision_number,
        "split_decisions": split.decisions,
        "split_exhausted": bool(max_decisions) and split.decisions >= max_decisions,
        "alpha": certificate.alpha,
        "digest": certificate.digest,
        "created_at": certificate.created_at,
    }


def _refused(exc: Exception) -> ApiError:
    """An UpliftInvalid's 422; a role refused (accounts.roles.RoleRequired, `not_an_operator`) is config.api's 403."""
    return ApiError(422, "invalid", str(exc))


@router.get(
    "/certificates/{certificate_id}",
    auth=scoped(READ),
    response={200: CertificateOut, **ERRORS},
    summary="One certificate whole: per task both arms, the totals with their intervals, its split's reuse",
)
def certificate(request: HttpRequest, certificate_id: CertificateId):
    found = selectors.certificate_by_id(certificate_id)
    if found is None:
        raise ApiError(404, "not_found", f"no certificate {certificate_id}")
    return Status(200, _certificate_out(found))


@router.get(
    "/latest",
    auth=scoped(READ),
    response={200: CertificateOut, **ERRORS},
    summary="A candidate's newest certificate (kind and candidate_id as the promotion requests name them)",
)
def latest(
    request: HttpRequest,
    kind: Annotated[str, Query(min_length=1, max_length=60)],
    candidate_id: Annotated[str, Query(min_length=1, max_length=64)],
):
    found = selectors.latest_certificate(kind, candidate_id)
    if found is None:
        raise ApiError(404, "not_found", f"{kind} {candidate_id} has no certificate")
    return Status(200, _certificate_out(found))


@router.get(
    "/coverage",
    auth=scoped(READ),
    response={200: list[CoverageFlagOut], **ERRORS},
    summary="Active artifacts whose recent runs come mostly from a model no passing certificate covers",
)
def coverage(request: HttpRequest):
    return Status(200, selectors.coverage_flags())


@router.post(
    "/recertify",
    auth=scoped(WRITE),
    response={202: RecertifyOut, **ERRORS},
    summary="Start a candidate's paired evaluation again on fresh runs (of one model, when given)",
)
def recertify(request: HttpRequest, body: RecertifyIn):
    try:
        started = services.recertification_start(
            actor=Actor.of_request(request), kind=body.kind, candidate_id=body.candidate_id, model=body.model
        )
    except services.UpliftInvalid as exc:
        raise _refused(exc) from None
    return Status(202, {"started": started})


@router.get(
    "/policies",
    auth=scoped(READ),
    response={200: list[PolicyOut], **ERRORS},
    summary="The policies set (a kind and parent without one is judged by the default)",
)
def policies(request: HttpRequest):
    return Status(200, selectors.policies())


@router.post(
    "/policies",
    auth=scoped(WRITE),
    response={200: PolicyOut, **ERRORS},
    summary="Set the certification policy of a kind for one parent (parent_key) or every parent (empty)",
)
def set_policy(request: HttpRequest, body: PolicyIn):
    fields = body.model_dump(exclude={"kind", "parent_key"}, exclude_none=True)
    try:
        row = services.policy_set(actor=Actor.of_request(request), kind=body.kind, parent_key=body.parent_key, **fields)
    except services.UpliftInvalid as exc:
        raise _refused(exc) from None
    return Status(200, row)


# --- the watch after activation ----------------------------------------------------------------------------------
WatchId = Annotated[int, Path(ge=1, le=2**63 - 1)]


def _watch(watch_id: int):
    found = selectors.watch_by_id(watch_id)
    if found is None:
        raise ApiError(404, "not_found", f"no watch {watch_id}")
    return found


@router.get(
    "/watches",
    auth=scoped(READ),
    response={200: list[WatchOut], **ERRORS},
    summary="The watches after activation, newest first (status filters: running, promoted, rolled_back, …)",
)
def watches(request: HttpRequest, status: Annotated[str, Query(max_length=20)] = ""):
    return Status(200, selectors.watches(status=status or None))


@router.get(
    "/watches/{watch_id}",
    auth=scoped(READ),
    response={200: WatchOut, **ERRORS},
    summary="One watch: its arms, the latest bounds, its decision and its history of looks",
)
def watch(request: HttpRequest, watch_id: WatchId):
    return Status(200, _watch(watch_id))


@router.post(
    "/watches/{watch_id}",
    auth=scoped(WRITE),
    response={200: WatchOut, **ERRORS},
    summary="Change a running watch: the canary's share, its thresholds (operators)",
)
def watch_set(request: HttpRequest, watch_id: WatchId, body: WatchSetIn):
    fields = body.model_dump(exclude={"share"}, exclude_none=True)
    try:
        changed = watch_services.watch_set(
            actor=Actor.of_request(request), watch=_watch(watch_id), share=body.share, **fields
        )
    except watch_services.WatchInvalid as exc:  # a role refused is config.api's 403 `refused` (RoleRequired)
        raise ApiError(422, "refused", str(exc)) from None
    return Status(200, changed)


@router.post(
    "/watches/{watch_id}/stop",
    auth=scoped(WRITE),
    response={200: WatchOut, **ERRORS},
    summary="Stop a canary now: the version it replaced goes back for every run (operators, with a reason)",
)
def watch_stop(request: HttpRequest, watch_id: WatchId, body: WatchStopIn):
    try:
        stopped = watch_services.watch_stop(actor=Actor.of_request(request), watch=_watch(watch_id), reason=body.reason)
    except watch_services.WatchInvalid as exc:  # a role refused is config.api's 403 `refused` (RoleRequired)
        raise ApiError(422, "refused", str(exc)) from None
    return Status(200, stopped)
