"""/api/v1/procedures (active versions, versions, mining) and /api/v1/replays (agents claim and answer replay jobs).

`replays_router` is mounted by config/api.py at /replays. It is /api/v1/jobs (trajectories.jobs_api) restricted to
replay jobs, for replay-only agents: both share one implementation.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from ninja import Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.errors import ApiError, Error
from trajectories.jobs_api import CLAIM_RESPONSES, RESULT_RESPONSES, answer_job, claim_job
from trajectories.schemas import ResultIn

from . import active_body, errors, selectors
from .mining import services as mining_services
from .replay.services import live as live_replay_services
from .schemas import ClaimIn, MineIn, MineOut, ProcedureListOut, ProcedureOut, VersionListOut

READ_SCOPE = "procedures:read"
JSON = "application/json; charset=utf-8"  # what ninja's renderer answers
router = Router(tags=["procedures"])
replays_router = Router(tags=["replays"])


def _matches(header: str, etag: str) -> bool:
    candidates = [part.strip() for part in header.split(",")]
    return "*" in candidates or etag in candidates


@router.get(
    "",
    auth=scoped(READ_SCOPE),
    response={200: ProcedureListOut, 304: None, 401: Error, 403: Error, 422: Error},
    summary="Active procedure versions (strong ETag; If-None-Match answers 304)",
)
def list_active(request: HttpRequest, intent: str | None = None):
    return active_list_response(request, intent)


def active_list_response(request: HttpRequest, intent: str | None = None) -> HttpResponse:
    """The active versions from prepared bytes (procedures.active_body), or 304 when If-None-Match names the ETag.
    Served by config.step_api on every agent step (`intent` from the query string), and by the operation above."""
    if intent is None:
        intent = request.GET.get("intent")
    current = active_body.current(intent)
    control = active_body.controls(
        current.stamps, run_key=request.META.get("HTTP_X_WAYMARK_RUN"), pin=request.META.get("HTTP_X_WAYMARK_REVISION")
    )
    etag = active_body.etag_of(current.stamps, control) if control else current.etag
    if _matches(request.META.get("HTTP_IF_NONE_MATCH", ""), etag):
        not_modified = HttpResponseNotModified()
        not_modified["ETag"] = etag
        return not_modified
    listing = active_body.active_list(intent, current.stamps, control)
    response = HttpResponse(listing.body, content_type=JSON)
    response["ETag"] = listing.etag
    if listing.revision is not None:
        response["X-Waymark-Revision"] = listing.revision
    return response


@router.post(
    "/mine",
    auth=scoped("procedures:mine"),
    response={200: MineOut, 201: MineOut, 400: Error, 401: Error, 403: Error, 409: Error, 422: Error},
    summary="Mine an intent's successful runs into a candidate version (operators)",
    description="201 with a new version and its queued replays; 200 when an identical version exists already. "
    "422 when mining cannot produce a version (too few successful runs, no shared step), with the reason.",
)
def mine(request: HttpRequest, body: MineIn):
    if not request.user.may_operate:
        raise ApiError(403, "forbidden", "mining procedures needs the operator role")
    try:
        result = mining_services.procedure_mine(
            actor=Actor.of_request(request),
            intent=body.intent,
            held_out_share=body.held_out_share,
            seed=body.seed,
            live=body.live,
        )
    except errors.MiningError as exc:
        raise ApiError(422, "cannot_mine", str(exc))
    body_out = {"created": result.created, "version": result.version, "replay_ids": [r.pk for r in result.replays]}
    return Status(201 if result.created else 200, body_out)


@router.get(
    "/{procedure_id}",
    auth=scoped("procedures:read"),
    response={200: ProcedureOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One procedure with its active version",
)
def get_procedure(request: HttpRequest, procedure_id: int):
    return Status(200, selectors.procedure_by_id(procedure_id))


@router.get(
    "/{procedure_id}/versions",
    auth=scoped("procedures:read"),
    response={200: VersionListOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="Every version of a procedure, newest first, with its replays",
)
def list_versions(request: HttpRequest, procedure_id: int):
    procedure = selectors.procedure_by_id(procedure_id)
    return Status(200, {"items": selectors.versions_with_replays(procedure)})


@replays_router.post(
    "/claim",
    auth=scoped("evaluations:run"),
    response=CLAIM_RESPONSES,
    summary="Lease the oldest open replay job (204 when there is none)",
)
def claim(request: HttpRequest, body: ClaimIn):
    return claim_job(
        request, kinds=[live_replay_services.REPLAY_JOB_KIND], worker=body.worker, lease_seconds=body.lease_seconds
    )


@replays_router.post(
    "/{job_id}/result",
    auth=scoped("evaluations:run"),
    response=RESULT_RESPONSES,
    summary="Answer a replay job with the run the agent produced (ingest format)",
    description="201 when the answer is counted; 200 when the job was answered already (the repeat is not counted "
    "again). 422 names the invalid fields and nothing is written; 409 when the job is past its deadline; 403 "
    "`not_claimant` when another token claimed the job.",
)
def result(request: HttpRequest, job_id: int, body: ResultIn):
    return answer_job(
        request, job_id=job_id, run=body.run, kind=live_replay_services.REPLAY_JOB_KIND, label="replay job"
    )
