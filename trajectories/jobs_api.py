"""/api/v1/jobs: agents claim evaluation jobs of any registered kind (trajectories.jobs) and answer them with a run.

One agent loop serves every kind: `POST /jobs/claim` leases the oldest open job among the kinds the agent asks for
(every registered kind by default), `POST /jobs/{id}/result` answers it. `claim_job` and `answer_job` are the one
implementation of the protocol: /api/v1/replays (procedures.api) calls them restricted to replay jobs.
`router` is mounted by config/api.py at /jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.errors import ApiError, Error

from . import job_services
from .jobs import registered_job_kinds
from .models import Job
from .schemas import JobClaimIn, JobOut, ResultIn, ResultOut

router = Router(tags=["jobs"])

CLAIM_RESPONSES = {200: JobOut, 204: None, 400: Error, 401: Error, 403: Error, 422: Error}
RESULT_RESPONSES = {
    200: ResultOut,
    201: ResultOut,
    400: Error,
    401: Error,
    403: Error,
    404: Error,
    409: Error,
    422: Error,
}
RESULT_DESCRIPTION = (
    "201 when the answer is counted; 200 when the job was answered already (the repeat is not counted again). 422 "
    "names the invalid fields and nothing is written; 409 `job_closed` when the job is past its deadline or was never "
    "claimed (`answer_taken` when a run stored outside the job protocol holds the answer's identity: never counted); "
    "403 `not_claimant` when another token claimed the job (only the claiming token's answer is accepted)."
)


def claim_job(
    request: HttpRequest,
    *,
    kinds: Sequence[str],
    worker: str,
    lease_seconds: int,
    match: Mapping[str, Sequence[Any]] | None = None,
):
    """Lease the oldest open job among `kinds` (and `match`) to the caller: 200 with the job, or 204 when none."""
    job = job_services.job_claim(
        actor=Actor.of_request(request), kinds=kinds, worker=worker, lease_seconds=lease_seconds, match=match
    )
    if job is None:
        return HttpResponse(status=204)
    return Status(200, job)


def answer_job(request: HttpRequest, *, job_id: int, run: dict[str, Any], kind: str | None = None, label: str = "job"):
    """Answer job `job_id` (of `kind` when given, else of any kind) with `run`: 201 counted, 200 a repeat."""
    jobs = Job.objects.filter(pk=job_id)
    if kind is not None:
        jobs = jobs.filter(kind=kind)
    job = jobs.first()
    if job is None:
        raise ApiError(404, "not_found", f"no {label} {job_id}")
    try:
        answer = job_services.job_complete(actor=Actor.of_request(request), job=job, run_items=[run])
    except job_services.IngestInvalid as exc:
        raise ApiError(
            422, "invalid", "the run does not match the ingest format; nothing was written", {"errors": exc.errors}
        )
    except job_services.AnswerTaken as exc:
        raise ApiError(409, "answer_taken", str(exc), {"job_id": job.pk})
    except job_services.JobClosed as exc:
        raise ApiError(409, "job_closed", str(exc))
    except job_services.NotClaimant as exc:
        # 403, not 409: the refusal depends on who asks, not on the job's state; the same call from the claiming
        # token succeeds, and no retry by this token can (docs/decisions.md, trusted evidence).
        raise ApiError(403, "not_claimant", str(exc), {"job_id": job.pk})
    out = {"job_id": job.pk, "run_id": answer.run_id, "counted": answer.counted}
    return Status(201 if answer.counted else 200, out)


def _requested_kinds(requested: list[str] | None) -> tuple[str, ...]:
    known = registered_job_kinds()
    if requested is None:
        return known
    unknown = [name for name in dict.fromkeys(requested) if name not in known]
    if unknown:
        errors = [
            {"loc": ["body", "kinds", requested.index(name)], "msg": f"unknown job kind {name!r}", "type": "enum"}
            for name in unknown
        ]
        raise ApiError(
            422,
            "unknown_kind",
            f"unknown job kind(s): {', '.join(unknown)}; known kinds: {', '.join(known) or 'none'}",
            {"errors": errors, "known_kinds": list(known)},
        )
    return tuple(dict.fromkeys(requested))


@router.post(
    "/claim",
    auth=scoped("evaluations:run"),
    response=CLAIM_RESPONSES,
    summary="Lease the oldest open evaluation job among the given kinds (204 when there is none)",
    description="`kinds` narrows the claim to the kinds this agent can run (procedure_replay, graph_evaluation); "
    "omitted, every kind is offered. 422 `unknown_kind` names a kind Waymark does not have. `match` narrows it to "
    'jobs whose payload holds one of the listed values for every key named (`{"intent": ["refund request"]}`).',
)
def claim(request: HttpRequest, body: JobClaimIn):
    kinds = _requested_kinds(body.kinds)
    return claim_job(request, kinds=kinds, worker=body.worker, lease_seconds=body.lease_seconds, match=body.match)


@router.post(
    "/{job_id}/result",
    auth=scoped("evaluations:run"),
    response=RESULT_RESPONSES,
    summary="Answer an evaluation job with the run the agent produced (ingest format)",
    description=RESULT_DESCRIPTION,
)
def result(request: HttpRequest, job_id: int, body: ResultIn):
    return answer_job(request, job_id=job_id, run=body.run)
