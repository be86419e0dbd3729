"""/api/v1/rubrics: reads with rubrics:read, a client's own assessments with rubrics:write, refusals with the Error
schema naming the bad item, nothing partial written."""

from __future__ import annotations

import pytest

from reviews.rubric_models import RubricAssessmentRow, RubricScoreRow
from tests.reviews.test_rubric_services import committed, make_run, make_version  # noqa: F401

pytestmark = pytest.mark.django_db


def test_a_client_reads_rubrics_and_a_runs_scores(operator, viewer, make_token, api_client, committed):  # noqa: F811
    version = make_version(operator, committed)
    run_id = make_run()
    token = make_token(viewer, "rubrics:read", "rubrics:write")
    body = {"version_id": version.pk, "assessments": [{"dimension_id": "task_completed", "score": 0.4}]}
    posted = api_client.post(f"/api/v1/rubrics/runs/{run_id}/assessments", body, token=token)
    assert posted.status_code == 201, posted.content
    assert posted.json()["required_failures"] == ["task_completed"]
    listing = api_client.get("/api/v1/rubrics", token=token).json()
    assert listing["items"][0]["versions"][0]["dimensions"][0]["dimension_id"] == "task_completed"
    scores = api_client.get(f"/api/v1/rubrics/runs/{run_id}/scores", token=token).json()
    assert scores["scores"][0]["overall"] == pytest.approx(0.4)
    one = api_client.get(f"/api/v1/rubrics/{version.rubric_id}", token=token)
    assert one.status_code == 200 and one.json()["active_version"] is None


def test_a_bad_item_is_answered_422_naming_it_and_nothing_is_written(
    operator,
    viewer,
    make_token,
    api_client,
    committed,  # noqa: F811
):
    version = make_version(operator, committed)
    run_id = make_run()
    token = make_token(viewer, "rubrics:write")
    body = {
        "version_id": version.pk,
        "assessments": [
            {"dimension_id": "task_completed", "score": 1, "evidence_steps": [0]},
            {"dimension_id": "policy_followed", "score": 0.5, "evidence_steps": [99]},
        ],
    }
    response = api_client.post(f"/api/v1/rubrics/runs/{run_id}/assessments", body, token=token)
    assert response.status_code == 422
    error = response.json()
    assert error["code"] == "invalid_assessment" and error["details"] == {"index": 1, "dimension_id": "policy_followed"}
    assert "outside the trajectory" in error["message"]
    assert not RubricAssessmentRow.objects.exists() and not RubricScoreRow.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"assessments": []},
        {"assessments": [{"dimension_id": "task_completed", "score": 1, "extra": 1}]},
        {"version_id": 1, "assessments": [{"dimension_id": "task_completed", "score": 1}], "what": 2},
    ],
)
def test_malformed_bodies_are_422(viewer, make_token, api_client, body):
    token = make_token(viewer, "rubrics:write")
    response = api_client.post(f"/api/v1/rubrics/runs/{make_run()}/assessments", body, token=token)
    assert response.status_code == 422 and response.json()["code"] == "invalid"


def test_scopes_and_tokens_are_required(operator, viewer, outsider, make_token, api_client, committed):  # noqa: F811
    version = make_version(operator, committed)
    run_id = make_run()
    body = {"version_id": version.pk, "assessments": [{"dimension_id": "task_completed", "score": 1}]}
    read_only = make_token(viewer, "rubrics:read")
    assert api_client.post(f"/api/v1/rubrics/runs/{run_id}/assessments", body, token=read_only).status_code == 403
    assert api_client.get("/api/v1/rubrics").status_code == 401
    assert api_client.get("/api/v1/rubrics", token=make_token(viewer, "graphs:read")).status_code == 403
    assert not RubricAssessmentRow.objects.exists()


def test_unknown_runs_and_versions_are_404_and_no_active_rubric_is_409(viewer, make_token, api_client):
    token = make_token(viewer, "rubrics:read", "rubrics:write")
    assert api_client.get("/api/v1/rubrics/runs/999999/scores", token=token).status_code == 404
    body = {"version_id": 424242, "assessments": [{"dimension_id": "x", "score": 1}]}
    run_id = make_run()
    assert api_client.post(f"/api/v1/rubrics/runs/{run_id}/assessments", body, token=token).status_code == 404
    response = api_client.post(
        f"/api/v1/rubrics/runs/{run_id}/assessments", {"assessments": [{"dimension_id": "x", "score": 1}]}, token=token
    )
    assert response.status_code == 409 and response.json()["code"] == "no_active_rubric"
