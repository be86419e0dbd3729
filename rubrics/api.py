"""/api/v1/rubrics: rubrics and runs' scores (scope rubrics:read; blinded as on the run page: rubrics.selectors)
and a reviewer's or operator's own assessments of a production run with evidence (rubrics:write, a scope of those
roles only). Refusals are the services' (reviews.errors → the Error body); nothing partial is written."""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest
from ninja import Path, Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.errors import ApiError, Error
from reviews.errors import ReviewError

from . import selectors, services
from .models import Rubric, RubricScoreRow, RubricVersion
from .runs import load_run, run_exists
from .schemas import AssessmentsIn, RubricListOut, RubricOut, RunScoresOut, ScoreOut

router = Router(tags=["rubrics"])

READ = "rubrics:read"
WRITE = "rubrics:write"
Id = Annotated[int, Path(ge=1, le=2**63 - 1)]
ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 422: Error}


def _version_out(version: RubricVersion) -> dict:
    return {
        "id": version.pk,
        "number": version.number,
        "digest": version.digest,
        "status": version.status,
        "dimensions": version.dimensions,
        "model_call_id": version.model_call_id,
        "proposed_by": version.proposed_by.username if version.proposed_by_id else None,
        "created_at": version.created_at,
    }


def _rubric_out(rubric: Rubric) -> dict:
    versions = list(rubric.versions.all())
    active = next((v for v in versions if v.pk == rubric.active_version_id), None)
    return {
        "id": rubric.pk,
        "key": rubric.key,
        "label": rubric.label,
        "active_version": _version_out(active) if active else None,
        "versions": [_version_out(v) for v in versions],
    }


def _score_out(row: RubricScoreRow) -> dict:
    return {
        "run_id": row.run_id,
        "rubric_id": row.version.rubric_id,
        "rubric_key": row.version.rubric.key,
        "version_id": row.version_id,
        "version_number": row.version.number,
        "version_status": row.version.status,
        "overall": row.overall,
        "dimension_scores": row.dimension_scores,
        "dimension_confidence": row.dimension_confidence,
        "missing_dimensions": row.missing_dimensions,
        "required_failures": row.required_failures,
        "assessment_count": row.assessment_count,
        "rater_count": row.rater_count,
        "updated_at": row.updated_at,
    }


@router.get("", auth=scoped(READ), response={200: RubricListOut, **ERRORS}, summary="Every rubric with its versions")
def rubric_list(request: HttpRequest):
    return {"items": [_rubric_out(r) for r in selectors.rubrics_with_versions(request.user)]}


@router.get(
    "/runs/{run_id}/scores",
    auth=scoped(READ),
    response={200: RunScoresOut, **ERRORS},
    summary="A run's scores",
    description="Blinded: to a reviewer or operator, a production run's score under a version is listed only once "
    "they have assessed the run under it themselves (sealed scores are left out).",
)
def run_scores(request: HttpRequest, run_id: Id):
    if not run_exists(run_id):
        raise ApiError(404, "unknown_run", f"no run {run_id}")
    return {"run_id": run_id, "scores": [_score_out(row) for row in selectors.scores_of_run(request.user, run_id)]}


@router.post(
    "/runs/{run_id}/assessments",
    auth=scoped(WRITE),
    response={201: ScoreOut, **ERRORS},
    summary="Post your own assessments of a run (one per dimension; a new one replaces yours)",
    description="Reviewers and operators (the scope rubrics:write is theirs only). version_id defaults to the active "
    "version of the rubric of the run's intent. 409 `evaluation_run` for a live replay's run. 422 "
    "`invalid_assessment` names the bad item in details {index, dimension_id}; nothing is written then.",
)
def assess(request: HttpRequest, run_id: Id, body: AssessmentsIn):
    version_id = body.version_id
    try:
        if version_id is None:
            rubric = services.rubric_for_run(load_run(run_id))
            if rubric is None or rubric.active_version_id is None:
                raise ApiError(409, "no_active_rubric", "the run's intent has no active rubric; name version_id")
            version_id = rubric.active_version_id
        row = services.rubric_assessment_submit(
            actor=Actor.of_request(request),
            run_id=run_id,
            version_id=version_id,
            items=[item.model_dump() for item in body.assessments],
        )
    except ReviewError as exc:
        raise ApiError(exc.status, exc.code, exc.message, exc.details) from None
    row = RubricScoreRow.objects.select_related("version__rubric").get(pk=row.pk)
    return Status(201, _score_out(row))


@router.get("/{rubric_id}", auth=scoped(READ), response={200: RubricOut, **ERRORS}, summary="One rubric")
def rubric_detail(request: HttpRequest, rubric_id: Id):
    rubric = selectors.rubric_for_user(request.user, rubric_id)
    return _rubric_out(rubric)
