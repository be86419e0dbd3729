"""Rubric services: proposals (a malformed reply recorded and retried once, never a half-valid rubric), K model
judges each a ModelCall, people's assessments, the cached score, and promotion of a rubric version."""

from __future__ import annotations

import json

import pytest

from accounts.roles import RoleRequired
from llm.core import ScriptedChatModel
from llm.models import ModelCall
from reviews.errors import Conflict, Invalid, NotAllowed
from reviews.models import PromotionStatus
from reviews.services import judgment_submit, promotion_override, promotion_propose
from rubrics import services as rubric_services
from rubrics.models import (
    RubricAssessmentRow,
    RubricJobStatus,
    RubricScoreRow,
    RubricVersion,
    RubricVersionStatus,
)
from tests.helpers.rubrics import act, make_run, make_version, use_model

GOOD = json.dumps(
    {
        "dimensions": [
            {"id": "task_completed", "description": "Did what was asked.", "weight": 2, "required": True},
            {"id": "policy_followed", "description": "Respected the policy.", "weight": 1},
        ]
    }
)


@pytest.mark.django_db
def test_a_proposal_turns_the_models_reply_into_a_candidate_version(operator, monkeypatch, committed):
    run_id = make_run()
    use_model(monkeypatch, [GOOD])
    job = committed(rubric_services.rubric_propose_start, actor=act(operator), key="Refund request", run_ids=[run_id])
    job.refresh_from_db()
    version = job.result_version
    assert job.status == RubricJobStatus.SUCCEEDED
    assert version.rubric.key == "refund request"
    assert version.number == 1 and version.status == RubricVersionStatus.CANDIDATE
    assert [d["dimension_id"] for d in version.dimensions] == ["task_completed", "policy_followed"]
    assert len(version.digest) == 64 and version.source_run_ids == [run_id]
    call = ModelCall.objects.get(pk=version.model_call_id)
    assert call.role == "rubric" and call.status == "succeeded"


@pytest.mark.django_db
def test_a_malformed_proposal_is_recorded_and_retried_once_with_the_error(operator, monkeypatch, committed):
    run_id = make_run()
    model = use_model(monkeypatch, ['{"dimensions": [{"id": "x", "weight": "heavy"}]}', GOOD])
    job = committed(rubric_services.rubric_propose_start, actor=act(operator), key="refund_request", run_ids=[run_id])
    job.refresh_from_db()
    assert job.status == RubricJobStatus.SUCCEEDED
    rejected, accepted = job.attempts_log
    assert "weight must be numeric" in rejected["error"] and accepted["error"] == ""
    first = ModelCall.objects.get(pk=rejected["call"])
    assert "heavy" in first.response_text and "weight must be numeric" in first.error
    assert "weight must be numeric" in model.requests[1].parts[-1]
    assert job.result_version.model_call_id == accepted["call"]


@pytest.mark.django_db
def test_two_malformed_proposals_fail_the_job_and_write_no_version(operator, monkeypatch, committed):
    run_id = make_run()
    use_model(monkeypatch, ["no json at all", '{"dimensions": []}', GOOD])
    job = committed(rubric_services.rubric_propose_start, actor=act(operator), key="refund_request", run_ids=[run_id])
    job.refresh_from_db()
    assert job.status == RubricJobStatus.FAILED and "rejected twice" in job.error
    assert RubricVersion.objects.count() == 0
    assert ModelCall.objects.filter(role="rubric").exclude(error="").count() == 2


@pytest.mark.django_db
def test_proposing_needs_a_role(viewer, committed):
    with pytest.raises(RoleRequired):
        rubric_services.rubric_propose_start(actor=act(viewer), key="refund_request", run_ids=[make_run()])


@pytest.mark.django_db
def test_k_model_judges_are_each_a_model_call_about_the_run(operator, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    job = committed(
        rubric_services.rubric_judge_start, actor=act(operator), run_id=run_id, version_id=version.pk, judges=3
    )
    job.refresh_from_db()
    assert job.status == RubricJobStatus.SUCCEEDED
    calls = ModelCall.objects.filter(role="judge")
    assert calls.count() == 3
    assert set(calls.values_list("subject_type", "subject_id")) == {("trajectories.run", str(run_id))}
    rows = RubricAssessmentRow.objects.filter(run_id=run_id, version=version)
    assert rows.count() == 3 * len(version.dimensions)
    assert {row.model_call_id for row in rows} == set(calls.values_list("pk", flat=True))
    assert all(row.evidence_steps == [1] for row in rows)  # the failed step
    score = RubricScoreRow.objects.get(run_id=run_id, version=version)
    assert score.rater_count == 3 and score.assessment_count == 6 and 0 <= score.overall <= 1


@pytest.mark.django_db
def test_a_judge_whose_reply_is_rejected_twice_adds_nothing(operator, monkeypatch, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    monkeypatch.setattr(rubric_services, "_judge_model", lambda run, rubric, judge: ScriptedChatModel(["{}", "nope"]))
    job = committed(
        rubric_services.rubric_judge_start, actor=act(operator), run_id=run_id, version_id=version.pk, judges=1
    )
    job.refresh_from_db()
    assert job.status == RubricJobStatus.FAILED
    assert RubricAssessmentRow.objects.count() == 0
    assert ModelCall.objects.filter(role="judge").exclude(error="").count() == 2


@pytest.mark.django_db
def test_a_person_assesses_once_per_dimension_and_the_score_follows(operator, reviewer, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    item = {"dimension_id": "task_completed", "score": 0.2, "evidence_steps": [2, 0, 2], "explanation": "no refund"}
    score = rubric_services.rubric_assessment_submit(
        actor=act(reviewer), run_id=run_id, version_id=version.pk, items=[item]
    )
    assert score.required_failures == ["task_completed"] and score.missing_dimensions == ["policy_followed"]
    again = {**item, "score": 0.9}
    score = rubric_services.rubric_assessment_submit(
        actor=act(reviewer), run_id=run_id, version_id=version.pk, items=[again]
    )
    row = RubricAssessmentRow.objects.get(run_id=run_id, user=reviewer)
    assert row.score == 0.9 and row.evidence_steps == [0, 2]
    assert score.required_failures == [] and score.overall == pytest.approx(0.9)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "item, message",
    [
        ({"dimension_id": "nope", "score": 0.5}, "unknown or repeated"),
        ({"dimension_id": "task_completed", "score": 1.5}, "in [0, 1]"),
        ({"dimension_id": "task_completed", "score": "high"}, "numeric"),
        ({"dimension_id": "task_completed", "score": 0.5, "evidence_steps": [3]}, "outside the trajectory"),
        ({"dimension_id": "task_completed", "score": 0.5, "evidence_steps": [True]}, "integer indices"),
    ],
)
def test_a_bad_assessment_is_refused_naming_the_item_and_nothing_is_written(
    operator, reviewer, item, message, committed
):
    version = make_version(operator, committed)
    run_id = make_run()
    good = {"dimension_id": "policy_followed", "score": 1}
    with pytest.raises(Invalid) as refused:
        rubric_services.rubric_assessment_submit(
            actor=act(reviewer), run_id=run_id, version_id=version.pk, items=[good, item]
        )
    assert message in refused.value.message and refused.value.details["index"] == 1
    assert not RubricAssessmentRow.objects.exists() and not RubricScoreRow.objects.exists()


@pytest.mark.django_db
def test_a_read_only_user_cannot_assess_on_the_page(operator, viewer, committed):
    version = make_version(operator, committed)
    with pytest.raises(RoleRequired):
        rubric_services.rubric_assessment_submit(
            actor=act(viewer), run_id=make_run(), version_id=version.pk, items=[{"dimension_id": "x", "score": 1}]
        )


@pytest.mark.django_db
def test_judging_twice_at_once_is_a_conflict(operator, monkeypatch, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    monkeypatch.setattr(rubric_services, "_enqueue", lambda job: None)
    rubric_services.rubric_judge_start(actor=act(operator), run_id=run_id, version_id=version.pk)
    with pytest.raises(Conflict):
        rubric_services.rubric_judge_start(actor=act(operator), run_id=run_id, version_id=version.pk)


@pytest.mark.django_db
def test_a_held_job_is_not_claimed_twice(operator, monkeypatch, committed):
    monkeypatch.setattr(rubric_services, "_enqueue", lambda job: None)
    job = committed(
        rubric_services.rubric_propose_start, actor=act(operator), key="refund_request", run_ids=[make_run()]
    )
    assert rubric_services._claim(job.pk, "w1") is not None
    assert rubric_services._claim(job.pk, "w2") is None
    assert rubric_services.rubric_propose_run(job_id=job.pk, worker="w2") is None


# --- promotion through the reviews policy ----------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_rubric_version_becomes_active_with_two_approvals_and_an_admin_override(
    operator, reviewer, second_reviewer, admin_user, committed
):
    version = make_version(operator, committed)
    request = promotion_propose(
        actor=act(operator), kind="rubric_version", candidate_id=str(version.pk), rationale="ok"
    )
    assert request.gate_passing is None
    with pytest.raises(NotAllowed):
        judgment_submit(actor=act(operator), request=request, verdict="approve")
    judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    request = judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
    assert request.status == PromotionStatus.APPROVED  # waiting for the override: no gate evidence
    version.refresh_from_db()
    assert version.status == RubricVersionStatus.CANDIDATE and version.rubric.active_version_id is None
    request = promotion_override(actor=act(admin_user), request=request, reason="agreement looks fine")
    assert request.status == PromotionStatus.APPLIED
    version.refresh_from_db()
    assert version.status == RubricVersionStatus.ACTIVE and version.rubric.active_version_id == version.pk
