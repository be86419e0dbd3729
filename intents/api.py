"""/api/v1/intents: read intent candidates (scope intents:read); post your own labeled intents and vectors (scope
intents:write). Every refusal answers with the Error schema and writes nothing."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.errors import ApiError, Error, cursor_checked

from . import selectors, services
from .schemas import CandidatePageIn, CandidatePageOut, CandidatesIn, CandidatesSubmitOut, VectorsIn, VectorsOut

router = Router(tags=["intents"])

READ = scoped("intents:read")
WRITE = scoped("intents:write")


def candidate_out(record) -> dict:
    return {
        "candidate_id": record.candidate_id,
        "intent": record.intent,
        "normalized": record.normalized,
        "kind": record.kind,
        "evidence": record.evidence,
        "actual_outcome": record.actual_outcome,
        "limitations": record.limitations,
        "schema_version": record.schema_version,
        "source": "model" if record.source == record.MODEL_SOURCE else "client",
        "proposal_run": record.batch.run_id if record.batch_id else None,
        "batch": record.batch.seq if record.batch_id else None,
        "submitted_by": record.submitted_by.username if record.submitted_by_id else None,
        "created_at": record.created_at,
    }


def _refused(error: services.InputRejected) -> ApiError:
    return ApiError(error.status, error.code, str(error), error.details)


@router.get(
    "/candidates",
    auth=READ,
    response={200: CandidatePageOut, 400: Error, 401: Error, 403: Error, 422: Error},
    summary="Intent candidates, newest first (cursor pages; filter by kind, label, source)",
)
def list_candidates(request: HttpRequest, page: Query[CandidatePageIn]):
    filters = selectors.CandidateFilters(kind=page.kind or "", label=page.label or "", source=page.source or "")
    with cursor_checked():
        found = selectors.candidate_page(filters=filters, cursor=page.cursor, limit=page.limit)
    return Status(200, {"items": [candidate_out(item) for item in found.candidates], "next_cursor": found.next_cursor})


@router.post(
    "/candidates",
    auth=WRITE,
    response={201: CandidatesSubmitOut, 400: Error, 401: Error, 403: Error, 422: Error},
    summary="Post your own labeled intents with step evidence",
    description="Each item is validated exactly as model output (trajectory-mining spec §2.3) against the stored "
    "runs its evidence names (trajectory_id = source:external_id). 422 names the first bad item "
    "(details.index) and nothing is written. Candidates you posted before are listed under existing.",
)
def submit_candidates(request: HttpRequest, body: CandidatesIn):
    try:
        result = services.intent_candidates_submit(actor=Actor.of_request(request), rows=body.intents)
    except services.InputRejected as error:
        raise _refused(error) from None
    return Status(
        201,
        {
            "created": result.created,
            "existing": result.existing,
            "items": [candidate_out(item) for item in result.records],
        },
    )


@router.post(
    "/vectors",
    auth=WRITE,
    response={201: VectorsOut, 400: Error, 401: Error, 403: Error, 409: Error, 422: Error},
    summary="Post vectors of your own embedder for texts",
    description="Stored under `client:<your user id>:<embedder>`, once per text. Every vector of one embedder has the "
    "same dimension count (422 otherwise); a text stored before with a different vector answers 409. Nothing is "
    "written on a refusal.",
)
def submit_vectors(request: HttpRequest, body: VectorsIn):
    try:
        result = services.intent_vectors_submit(
            actor=Actor.of_request(request),
            embedder=body.embedder,
            items=[item.model_dump() for item in body.items],
        )
    except services.InputRejected as error:
        raise _refused(error) from None
    return Status(
        201,
        {
            "embedder": result.embedder,
            "dimensions": result.dimensions,
            "created": result.created,
            "existing": result.existing,
        },
    )
