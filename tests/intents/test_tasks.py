"""The Celery path: starting enqueues the first step on commit, each step the next, until the run has ended."""

from __future__ import annotations

import pytest

from accounts.services import Actor
from intents import services, tasks
from intents.models import IntentCandidateRecord, IntentProposalRun
from tests.intents.helpers import intent_row, reply, stored_runs, use_model

pytestmark = pytest.mark.django_db


def test_a_started_run_completes_through_its_tasks(operator, monkeypatch, django_capture_on_commit_callbacks):
    first, second, third = stored_runs(3)
    use_model(monkeypatch, *(reply(intent_row(item)) for item in (first, second, third)))
    with django_capture_on_commit_callbacks(execute=True):
        run = services.intent_proposal_start(actor=Actor(user=operator), batch_size=1)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.batches_done == 3
    assert IntentCandidateRecord.objects.count() == 3


def test_the_beat_task_starts_and_runs_a_scheduled_proposal(settings, django_capture_on_commit_callbacks):
    settings.ANTHROPIC_API_KEY = ""
    stored_runs(2)
    with django_capture_on_commit_callbacks(execute=True):
        run_id = tasks.propose_new_runs()
    run = IntentProposalRun.objects.get(pk=run_id)
    assert run.scheduled and run.status == "succeeded" and run.candidates_count == 2
    assert tasks.propose_new_runs() is None


def test_the_reap_task_resumes_a_run_whose_worker_died(operator, monkeypatch, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    (stored,) = stored_runs(1)
    use_model(monkeypatch, reply(intent_row(stored)))
    run = services.intent_proposal_start(actor=Actor(user=operator), enqueue=False)
    IntentProposalRun.objects.filter(pk=run.pk).update(
        status="running", lease_owner="dead", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.proposal_reap() == [run.pk]
    run.refresh_from_db()
    assert run.status == "succeeded" and run.candidates_count == 1


def test_a_finished_run_is_left_alone(operator, monkeypatch, django_capture_on_commit_callbacks):
    stored_runs(1)
    run = services.intent_proposal_start(actor=Actor(user=operator), enqueue=False)
    services.intent_proposal_cancel(actor=Actor(user=operator), run=run)
    tasks.intent_proposal_step.delay(run.pk)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.attempts == 0


def test_the_beat_schedule_has_the_proposal_entries(settings):
    assert settings.CELERY_BEAT_SCHEDULE["resume-intent-proposals"]["task"] == "intents.proposal_reap"
    assert settings.CELERY_BEAT_SCHEDULE["propose-intents"]["task"] == "intents.propose_new_runs"


# -- a provider that does not answer (issue 25, item 4): the real Anthropic adapter behind a stand-in (HTTP mocked) --


def answered_by(monkeypatch, models: dict[int, object]) -> None:
    """Batch `seq` is sent to models[seq]."""
    monkeypatch.setattr("intents.services.proposal_model", lambda batch, briefs: models[batch.seq])


def started(operator, monkeypatch, django_capture_on_commit_callbacks, **options) -> IntentProposalRun:
    """A run worked through its Celery tasks to its end: each step's task, the next step enqueued on commit, and
    Celery's own retries of a step that raised a transient error (eager, so the retries run at once; propagation
    off, as a worker would not propagate a retry)."""
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_eager_propagates", False)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.intent_proposal_start(actor=Actor(user=operator), **options)
    run.refresh_from_db()
    return run


def test_sustained_429s_end_the_batch_failed_with_the_reason_and_the_run_failed(
    operator, monkeypatch, django_capture_on_commit_callbacks
):
    from intents.models import IntentProposalBatch
    from llm.core import ScriptedChatModel
    from llm.models import ModelCall
    from tests.llm.stand_in import StandIn, rate_limited

    _, second = stored_runs(2)
    provider = StandIn(rate_limited)
    answered_by(monkeypatch, {1: provider.model(max_retries=1), 2: ScriptedChatModel([reply(intent_row(second))])})
    run = started(operator, monkeypatch, django_capture_on_commit_callbacks, batch_size=1)
    limited, answered = run.batches.order_by("seq")
    assert (limited.status, answered.status) == (
        IntentProposalBatch.Status.FAILED,
        IntentProposalBatch.Status.SUCCEEDED,
    )
    assert limited.attempts == services.MAX_BATCH_CLAIMS
    assert limited.error.startswith(f"gave up after {services.MAX_BATCH_CLAIMS} attempts: ModelUnavailable: ")
    assert "HTTP 429: rate limited" in limited.error
    calls = ModelCall.objects.filter(role="intents", subject_id=str(limited.pk)).order_by("id")
    assert limited.model_call_ids == [call.pk for call in calls]
    assert len(calls) == services.MAX_BATCH_CLAIMS and len(provider.requests) == 2 * services.MAX_BATCH_CLAIMS
    assert {(call.status, call.diagnostics["http_status"]) for call in calls} == {("failed", 429)}
    assert run.status == IntentProposalRun.Status.FAILED
    assert (run.batches_done, run.batches_failed, run.candidates_count) == (2, 1, 1)
    assert run.error.startswith("1 of 2 batches failed (batch 1: gave up after 3 attempts: ModelUnavailable: ")
    assert run.error.endswith("; 1 succeeded: 1 candidate kept")
    assert IntentCandidateRecord.objects.count() == 1


@pytest.mark.parametrize("kind", ["max_tokens", "empty"])
def test_a_reply_short_of_an_answer_fails_its_batch_at_once_with_the_reason(
    operator, monkeypatch, django_capture_on_commit_callbacks, kind
):
    from llm.models import ModelCall
    from tests.llm.stand_in import stand_in_model

    stored_runs(1)
    answered_by(monkeypatch, {1: stand_in_model(kind)})
    run = started(operator, monkeypatch, django_capture_on_commit_callbacks)
    batch = run.batches.get()
    assert batch.status == "failed" and batch.attempts == 1  # not transient: asked once
    assert batch.error.startswith("ModelReplyIncomplete: ")
    call = ModelCall.objects.get(role="intents")
    assert batch.model_call_ids == [call.pk]
    assert call.status == "failed" and call.diagnostics["kind"] == kind
    assert run.status == "failed" and run.candidates_count == 0
    assert not IntentCandidateRecord.objects.exists()


@pytest.mark.parametrize("kind", ["html", "not_json", "not_a_message"])
def test_a_body_that_is_no_reply_is_retried_and_then_fails_the_batch(
    operator, monkeypatch, django_capture_on_commit_callbacks, kind
):
    from llm.models import ModelCall
    from tests.llm.stand_in import stand_in_model

    stored_runs(1)
    answered_by(monkeypatch, {1: stand_in_model(kind)})
    run = started(operator, monkeypatch, django_capture_on_commit_callbacks)
    batch = run.batches.get()
    assert batch.status == "failed" and batch.attempts == services.MAX_BATCH_CLAIMS
    assert batch.error.startswith(f"gave up after {services.MAX_BATCH_CLAIMS} attempts: ModelReplyInvalid: ")
    assert set(ModelCall.objects.values_list("diagnostics__kind", flat=True)) == {kind}
    assert run.status == "failed" and not IntentCandidateRecord.objects.exists()


def test_a_batch_answered_after_a_transient_error_succeeds_without_that_error(
    operator, monkeypatch, django_capture_on_commit_callbacks
):
    from tests.llm.stand_in import StandIn, message, rate_limited

    (stored,) = stored_runs(1)
    answers = [rate_limited(), rate_limited(), httpx2_response(message(reply(intent_row(stored))))]
    provider = StandIn(lambda: answers.pop(0))
    answered_by(monkeypatch, {1: provider.model(max_retries=1)})
    run = started(operator, monkeypatch, django_capture_on_commit_callbacks)
    batch = run.batches.get()
    assert (batch.status, batch.attempts, batch.error) == ("succeeded", 2, "")
    assert len(batch.model_call_ids) == 2  # the rate-limited call, then the answered one
    assert (run.status, run.error, run.candidates_count) == ("succeeded", "", 1)


def httpx2_response(body):
    import httpx2

    return httpx2.Response(200, json=body)
