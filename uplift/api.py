"""/api/v1/certification: certificates (certification:read), the model-coverage flags, the policies and critical
tasks, and re-certification (certification:write, operators' tokens only). Errors are the Error body."""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest
from ninja import Path, Query, Router, Status

from accounts.services import Actor
from config.auth import scoped
from config.errors import ApiError, Error

from . import selectors, services
from .schemas import CertificateOut, CoverageFlagOut, PolicyIn, PolicyOut, RecertifyIn, RecertifyOut

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
        "tasks": certificate.tasks,
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
    if isinstance(exc, services.UpliftNotAllowed):
        return ApiError(403, "not_an_operator", str(exc))
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
    except (services.UpliftNotAllowed, services.UpliftInvalid) as exc:
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
    except (services.UpliftNotAllowed, services.UpliftInvalid) as exc:
        raise _refused(exc) from None
    return Status(200, row)
