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


def test_a_finished_run_is_left_alone(operator, monkeypatch):
    stored_runs(1)
    run = services.intent_proposal_start(actor=Actor(user=operator), enqueue=False)
    services.intent_proposal_cancel(actor=Actor(user=operator), run=run)
    tasks.intent_proposal_step.delay(run.pk)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.attempts == 0


def test_the_beat_schedule_has_the_proposal_entries(settings):
    assert settings.CELERY_BEAT_SCHEDULE["resume-intent-proposals"]["task"] == "intents.proposal_reap"
    assert settings.CELERY_BEAT_SCHEDULE["propose-intents"]["task"] == "intents.propose_new_runs"
