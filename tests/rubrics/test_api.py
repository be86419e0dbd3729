"""/api/v1/rubrics: reads with rubrics:read, a reviewer's own assessments with rubrics:write (a scope of reviewers and
operators only), refusals with the Error schema naming the bad item, nothing partial written."""

from __future__ import annotations

import pytest

from rubrics.models import RubricAssessmentRow, RubricScoreRow
from tests.helpers.rubrics import make_run, make_version

pytestmark = pytest.mark.django_db


def test_a_client_reads_rubrics_and_a_runs_scores(operator, reviewer, make_token, api_client, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    token = make_token(reviewer, "rubrics:read", "rubrics:write")
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
    reviewer,
    make_token,
    api_client,
    committed,
):
    version = make_version(operator, committed)
    run_id = make_run()
    token = make_token(reviewer, "rubrics:write")
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
def test_malformed_bodies_are_422(reviewer, make_token, api_client, body):
    token = make_token(reviewer, "rubrics:write")
    response = api_client.post(f"/api/v1/rubrics/runs/{make_run()}/assessments", body, token=token)
    assert response.status_code == 422 and response.json()["code"] == "invalid"


def test_scopes_and_tokens_are_required(operator, viewer, outsider, make_token, api_client, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    body = {"version_id": version.pk, "assessments": [{"dimension_id": "task_completed", "score": 1}]}
    read_only = make_token(viewer, "rubrics:read")
    assert api_client.post(f"/api/v1/rubrics/runs/{run_id}/assessments", body, token=read_only).status_code == 403
    assert api_client.get("/api/v1/rubrics").status_code == 401
    assert api_client.get("/api/v1/rubrics", token=make_token(viewer, "graphs:read")).status_code == 403
    assert not RubricAssessmentRow.objects.exists()


def test_unknown_runs_and_versions_are_404_and_no_active_rubric_is_409(reviewer, make_token, api_client):
    token = make_token(reviewer, "rubrics:read", "rubrics:write")
    assert api_client.get("/api/v1/rubrics/runs/999999/scores", token=token).status_code == 404
    body = {"version_id": 424242, "assessments": [{"dimension_id": "x", "score": 1}]}
    run_id = make_run()
    assert api_client.post(f"/api/v1/rubrics/runs/{run_id}/assessments", body, token=token).status_code == 404
    response = api_client.post(
        f"/api/v1/rubrics/runs/{run_id}/assessments", {"assessments": [{"dimension_id": "x", "score": 1}]}, token=token
    )
    assert response.status_code == 409 and response.json()["code"] == "no_active_rubric"


def assess_over_api(api_client, token, run_id, version, score=0.4):
    body = {"version_id": version.pk, "assessments": [{"dimension_id": "task_completed", "score": score}]}
    return api_client.post(f"/api/v1/rubrics/runs/{run_id}/assessments", body, token=token)


def test_a_read_only_user_gets_no_rubrics_write_and_an_old_token_of_hers_writes_nothing(
    operator,
    viewer,
    make_token,
    api_client,
    committed,
):
    """Issue 24: vera (no role) made a token and changed a run's score over the API."""
    from accounts.roles import Role
    from accounts.services import Actor, user_roles_set

    with pytest.raises(ValueError, match="rubrics:write needs the reviewer or operator role"):
        make_token(viewer, "rubrics:write")
    version = make_version(operator, committed)
    run_id = make_run()
    user_roles_set(actor=Actor.system(), user=viewer, roles=[Role.REVIEWER])
    kept = make_token(viewer, "rubrics:read", "rubrics:write")  # made while she was a reviewer
    user_roles_set(actor=Actor.system(), user=viewer, roles=[])
    response = assess_over_api(api_client, kept, run_id, version)
    assert response.status_code == 403 and response.json()["code"] == "missing_scope"
    assert not RubricAssessmentRow.objects.exists() and not RubricScoreRow.objects.exists()
    assert api_client.get(f"/api/v1/rubrics/runs/{run_id}/scores", token=kept).status_code == 200  # still reads


def test_a_runs_scores_are_sealed_over_the_api_until_the_readers_own_assessment(
    operator,
    reviewer,
    viewer,
    make_token,
    api_client,
    committed,
):
    from accounts.roles import Role
    from tests.factories import user_with

    version = make_version(operator, committed)
    run_id = make_run()
    assert assess_over_api(api_client, make_token(reviewer, "rubrics:write"), run_id, version, 0.9).status_code == 201
    rob = user_with(Role.REVIEWER, username="rob")
    robs = make_token(rob, "rubrics:read", "rubrics:write")
    scores = f"/api/v1/rubrics/runs/{run_id}/scores"
    assert api_client.get(scores, token=robs).json() == {"run_id": run_id, "scores": []}  # sealed: absent
    assert api_client.get(scores, token=make_token(viewer, "rubrics:read")).json()["scores"][0]["rater_count"] == 1
    posted = assess_over_api(api_client, robs, run_id, version, 0.3)
    assert posted.status_code == 201 and posted.json()["rater_count"] == 2
    seen = api_client.get(scores, token=robs).json()["scores"]
    assert len(seen) == 1 and seen[0]["dimension_scores"]["task_completed"] == pytest.approx(0.6)


def test_an_evaluation_run_is_not_assessed(operator, reviewer, make_token, api_client, committed):
    from trajectories.choices import EVALUATION_SOURCE

    version = make_version(operator, committed)
    run_id = make_run(source=EVALUATION_SOURCE, external_id="job-1")
    response = assess_over_api(api_client, make_token(reviewer, "rubrics:write"), run_id, version)
    assert response.status_code == 409 and response.json()["code"] == "evaluation_run"
    assert not RubricAssessmentRow.objects.exists()
