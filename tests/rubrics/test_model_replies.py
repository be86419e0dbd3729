"""Rubric judging and proposing when the model's reply is not an answer (issue 25, item 4), with the real Anthropic
adapter behind a stand-in provider (HTTP mocked): the judge adds nothing, its failed call is named in the job's log
with the reason, the ledger keeps the diagnostics, and a job none of whose judges answered fails saying so."""

from __future__ import annotations

import pytest

from llm.models import ModelCall
from rubrics import services as rubric_services
from rubrics.models import RubricAssessmentRow, RubricJobStatus, RubricScoreRow
from tests.helpers.rubrics import act, make_run, make_version
from tests.llm.stand_in import NOT_ANSWERS, stand_in_model

pytestmark = pytest.mark.django_db


def judge(operator, committed, judges):
    version = make_version(operator, committed)
    run_id = make_run()
    job = committed(
        rubric_services.rubric_judge_start, actor=act(operator), run_id=run_id, version_id=version.pk, judges=judges
    )
    job.refresh_from_db()
    return job, run_id, version


@pytest.mark.parametrize("kind", sorted(NOT_ANSWERS))
def test_a_judge_whose_reply_is_not_an_answer_adds_nothing_and_the_job_fails_with_the_reason(
    operator,
    monkeypatch,
    committed,
    kind,
):
    monkeypatch.setattr(rubric_services, "_judge_model", lambda run, rubric, index: stand_in_model(kind, max_retries=0))
    job, run_id, _ = judge(operator, committed, judges=1)
    assert job.status == RubricJobStatus.FAILED
    call = ModelCall.objects.get(role="judge")
    assert call.status == "failed" and call.diagnostics
    assert job.error.startswith("no judge's assessments were accepted: claude-sonnet-4-6#1 gave no answer: ")
    assert call.error.split(": ", 1)[1] in job.error
    (entry,) = [entry for entry in job.attempts_log if entry["who"].startswith("claude-sonnet-4-6#")]
    assert entry["call"] == call.pk
    assert entry["error"].startswith("no answer: ")
    assert not RubricAssessmentRow.objects.filter(run_id=run_id).exists()
    assert not RubricScoreRow.objects.filter(run_id=run_id).exists()


def test_the_judges_that_answered_count_and_the_one_that_did_not_is_logged(operator, monkeypatch, committed):
    real = rubric_services._judge_model

    def model(run, rubric, index):
        return stand_in_model("max_tokens", max_retries=0) if index == 2 else real(run, rubric, index)

    monkeypatch.setattr(rubric_services, "_judge_model", model)
    job, run_id, version = judge(operator, committed, judges=3)
    assert job.status == RubricJobStatus.SUCCEEDED
    score = RubricScoreRow.objects.get(run_id=run_id, version=version)
    assert score.rater_count == 2
    failed = ModelCall.objects.get(role="judge", status="failed")
    assert failed.diagnostics["kind"] == "max_tokens"
    assert [entry["call"] for entry in job.attempts_log if entry["error"].startswith("no answer")] == [failed.pk]


def test_a_proposal_whose_reply_is_cut_fails_naming_the_call(operator, monkeypatch, committed):
    monkeypatch.setattr(rubric_services, "get_chat_model", lambda: stand_in_model("max_tokens", max_retries=0))
    job = committed(
        rubric_services.rubric_propose_start, actor=act(operator), key="refund_request", run_ids=[make_run()]
    )
    job.refresh_from_db()
    assert job.status == RubricJobStatus.FAILED and job.result_version is None
    assert job.error.startswith("the model gave no answer: ModelReplyIncomplete: ")
    call = ModelCall.objects.get(role="rubric")
    assert call.diagnostics["kind"] == "max_tokens"
    assert [entry["call"] for entry in job.attempts_log] == [call.pk]
