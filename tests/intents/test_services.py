"""Proposal runs through the real services with scripted models: batches, malformed replies, ledger, embeddings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import Actor
from intents import services
from intents.models import Embedding, IntentBatchRun, IntentCandidateRecord, IntentProposalBatch, IntentProposalRun
from llm.models import ModelCall
from tests.intents.helpers import EMBEDDER, failed_run, intent_row, reply, stored_runs, tid, use_model

pytestmark = pytest.mark.django_db

WORKER = "test-worker"


def start(operator, **kwargs) -> IntentProposalRun:
    return services.intent_proposal_start(actor=Actor(user=operator), enqueue=False, **kwargs)


def run_all(run: IntentProposalRun) -> IntentProposalRun:
    for _ in range(50):
        result = services.intent_proposal_step(run_id=run.pk, worker=WORKER)
        if result is None or not result.next_step:
            break
    run.refresh_from_db()
    return run


def test_it_splits_the_selection_into_batches_and_audits_the_start(operator):
    runs = stored_runs(5)
    run = start(operator, batch_size=2)
    batches = list(run.batches.order_by("seq"))
    assert [len(batch.trajectory_ids) for batch in batches] == [2, 2, 1]
    assert batches[0].trajectory_ids == [tid(runs[0]), tid(runs[1])]
    assert IntentBatchRun.objects.filter(batch__run=run).count() == 5
    assert (run.runs_total, run.batches_total, run.status) == (5, 3, "queued")
    assert AuditEvent.objects.filter(verb="intent_proposal.start", target_id=str(run.pk)).count() == 1


def test_it_refuses_an_empty_selection_and_bad_parameters(operator):
    stored_runs(1)
    with pytest.raises(services.ProposalRefused, match="no stored run"):
        start(operator, failed_only=True)
    with pytest.raises(services.ProposalRefused, match="batch size"):
        start(operator, batch_size=0)
    now = timezone.now()
    with pytest.raises(services.ProposalRefused, match="window"):
        start(operator, window_from=now, window_to=now - timedelta(hours=1))
    assert not IntentProposalRun.objects.exists()


def test_the_selection_filters_by_window_intent_and_outcome(operator):
    stored_runs(2, intent="refund_request")
    failed = failed_run()
    run = start(operator, intent="CHANGE_FLIGHT")
    assert run.batches.get().trajectory_ids == [tid(failed)]
    run = start(operator, failed_only=True)
    assert run.runs_total == 1
    with pytest.raises(services.ProposalRefused):
        start(operator, window_from=timezone.now() + timedelta(hours=1))


def test_a_valid_reply_stores_candidates_with_evidence_and_embeds_their_labels_once(operator, monkeypatch):
    first, second = stored_runs(2)
    use_model(
        monkeypatch,
        reply(intent_row(first, "Refund an order"), intent_row(second, "refund an order", kind="declared")),
    )
    run = run_all(start(operator, batch_size=2))
    assert run.status == "succeeded"
    assert (run.batches_done, run.candidates_count, run.malformed_replies) == (1, 2, 0)
    records = list(IntentCandidateRecord.objects.order_by("id"))
    assert [record.kind for record in records] == ["inferred", "declared"]
    assert records[0].evidence == [{"run_id": first.pk, "trajectory_id": tid(first), "start": 0, "end": 1}]
    assert records[0].normalized == "refund an order"
    assert records[0].batch.run_id == run.pk
    # "Refund an order" and "refund an order" are two texts; each stored once under the embedder.
    assert Embedding.objects.filter(embedder="test-embedder-v1").count() == 2
    assert sorted(EMBEDDER.embedded) == ["Refund an order", "refund an order"]
    vector = Embedding.objects.first().as_array()
    assert vector.shape == (8,)


def test_a_text_already_embedded_is_not_embedded_again(operator, monkeypatch):
    first, second = stored_runs(2)
    use_model(monkeypatch, reply(intent_row(first, "refund")), reply(intent_row(second, "refund")))
    run_all(start(operator, batch_size=1))
    assert IntentCandidateRecord.objects.count() == 2
    assert Embedding.objects.count() == 1
    assert EMBEDDER.embedded == ["refund"]


def test_every_call_is_in_the_ledger_with_the_batch_as_subject(operator, monkeypatch):
    all_runs = stored_runs(3)
    use_model(monkeypatch, *[reply(intent_row(item)) for item in all_runs])
    run = run_all(start(operator, batch_size=1))
    calls = list(ModelCall.objects.filter(role="intents").order_by("id"))
    batches = list(run.batches.order_by("seq"))
    assert len(calls) == 3
    assert [(call.subject_type, call.subject_id) for call in calls] == [
        ("intents.intentproposalbatch", str(batch.pk)) for batch in batches
    ]
    assert [batch.model_call_ids for batch in batches] == [[call.pk] for call in calls]
    assert all(call.status == "succeeded" and call.input_tokens > 0 for call in calls)


def test_a_malformed_reply_is_recorded_and_retried_once_with_the_error(operator, monkeypatch):
    (stored,) = stored_runs(1)
    models = use_model(monkeypatch, "I think it was a refund, no JSON here", reply(intent_row(stored)))
    run = run_all(start(operator))
    batch = run.batches.get()
    assert batch.status == "succeeded" and run.status == "succeeded"
    assert run.malformed_replies == 1 and run.candidates_count == 1
    (entry,) = batch.rejected_replies
    assert entry["attempt"] == 1 and entry["text"] == "I think it was a refund, no JSON here"
    assert "must return a JSON object" in entry["error"]
    assert batch.raw_reply == "I think it was a refund, no JSON here"
    second = models[0].requests[1]
    assert entry["error"] in second.parts[-1] and "no JSON here" in second.parts[-1]
    assert second.parts[0] == models[0].requests[0].parts[0]
    first_call = ModelCall.objects.get(pk=entry["model_call_id"])
    assert "must return a JSON object" in first_call.error
    assert len(batch.model_call_ids) == 2


def test_twice_malformed_marks_the_batch_malformed_and_stores_nothing(operator, monkeypatch):
    (stored,) = stored_runs(1)
    out_of_range = reply(intent_row(stored, start=0, end=9))
    half_valid = reply(intent_row(stored), {"intent": "", "evidence": []})
    use_model(monkeypatch, out_of_range, half_valid)
    run = run_all(start(operator))
    batch = run.batches.get()
    assert batch.status == "malformed"
    assert [entry["error"] for entry in batch.rejected_replies] == [
        "trajectory intent evidence is outside the trajectory",
        "trajectory intent is required",
    ]
    assert batch.raw_reply == half_valid
    assert not IntentCandidateRecord.objects.exists() and not Embedding.objects.exists()
    assert (run.status, run.batches_done, run.batches_malformed, run.malformed_replies) == ("succeeded", 1, 1, 2)
    assert "malformed" in run.error


def test_a_model_that_refuses_the_request_fails_only_its_batch(operator, monkeypatch):
    first, _ = stored_runs(2)
    use_model(monkeypatch, reply(intent_row(first)))  # the script runs out at the second batch
    run = run_all(start(operator, batch_size=1))
    assert [batch.status for batch in run.batches.order_by("seq")] == ["succeeded", "failed"]
    assert "ScriptExhausted" in run.batches.get(seq=2).error
    # A run with a failed batch has failed, with the counts and the reason; the other batch's candidate is kept.
    assert run.status == "failed" and run.batches_failed == 1
    assert run.error.startswith("1 of 2 batches failed (batch 2: ScriptExhausted: ")
    assert run.error.endswith("; 1 succeeded: 1 candidate kept")


def test_a_transient_model_error_releases_the_lease_for_a_retry(operator, monkeypatch):
    stored_runs(1)
    from llm.core import ModelUnavailable

    class Down:
        model_id, provider = "down", "scripted"

        def complete(self, request):
            raise ModelUnavailable("503")

    monkeypatch.setattr("intents.services.proposal_model", lambda batch, briefs: Down())
    run = start(operator)
    with pytest.raises(ModelUnavailable):
        services.intent_proposal_step(run_id=run.pk, worker=WORKER)
    run.refresh_from_db()
    assert run.status == "running" and run.lease_owner == "" and "503" in run.error
    assert run.batches.get().status == "running"


def test_a_held_run_is_not_claimed_twice(operator, monkeypatch):
    stored_runs(1)
    run = start(operator)
    IntentProposalRun.objects.filter(pk=run.pk).update(
        status="running", lease_owner="other", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    assert services.intent_proposal_step(run_id=run.pk, worker=WORKER) is None
    assert services.lease_wait(run.pk) > 0


def test_a_batch_claimed_too_often_fails_and_the_run_goes_on(operator, monkeypatch):
    _, second = stored_runs(2)
    use_model(monkeypatch, reply(intent_row(second)))
    run = start(operator, batch_size=1)
    IntentProposalBatch.objects.filter(run=run, seq=1).update(status="running", attempts=services.MAX_BATCH_CLAIMS)
    run = run_all(run)
    assert [batch.status for batch in run.batches.order_by("seq")] == ["failed", "succeeded"]


def test_cancel_stops_a_queued_run_and_its_pending_batches(operator):
    stored_runs(2)
    run = start(operator, batch_size=1)
    cancelled = services.intent_proposal_cancel(actor=Actor(user=operator), run=run)
    assert cancelled.status == "cancelled"
    assert set(run.batches.values_list("status", flat=True)) == {"cancelled"}
    with pytest.raises(services.ProposalRefused):
        services.intent_proposal_cancel(actor=Actor(user=operator), run=run)


def test_cancel_of_a_running_run_stops_it_at_the_next_step(operator, monkeypatch):
    first, second = stored_runs(2)
    use_model(monkeypatch, reply(intent_row(first)), reply(intent_row(second)))
    run = start(operator, batch_size=1)
    services.intent_proposal_step(run_id=run.pk, worker=WORKER)
    IntentProposalRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    services.intent_proposal_step(run_id=run.pk, worker=WORKER)
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert [batch.status for batch in run.batches.order_by("seq")] == ["succeeded", "cancelled"]
    assert IntentCandidateRecord.objects.count() == 1


def test_the_stand_in_model_proposes_declared_and_hindsight_intents(operator, settings):
    settings.ANTHROPIC_API_KEY = ""
    (success,) = stored_runs(1, intent="refund_request")
    failed = failed_run()
    run = run_all(start(operator, batch_size=2))
    assert run.scripted and run.status == "succeeded"
    rows = {(record.kind, record.intent): record for record in IntentCandidateRecord.objects.all()}
    assert set(rows) == {
        ("declared", "refund_request"),
        ("declared", "change_flight"),
        ("hindsight", "change_flight"),
    }
    hindsight = rows[("hindsight", "change_flight")]
    assert "step 1 (book_flight)" in hindsight.actual_outcome and "seat map unavailable" in hindsight.actual_outcome
    assert hindsight.evidence[0]["run_id"] == failed.pk
    assert rows[("declared", "refund_request")].evidence[0] == {
        "run_id": success.pk,
        "trajectory_id": tid(success),
        "start": 0,
        "end": 1,
    }
    assert ModelCall.objects.get(role="intents").model_id == "scripted-intents"


def test_the_prompt_is_redacted(operator, monkeypatch, settings):
    from trajectories.services import _redactor

    settings.WAYMARK_REDACT_PATTERNS = [r"sk-[A-Za-z0-9]+"]
    _redactor.cache_clear()
    stored = stored_runs(1)[0]
    # The run was stored with the pattern on; write a secret in after the fact, as an older run might hold one.
    stored.steps.filter(ordinal=0).update(observation="the key is sk-abc123")
    models = use_model(monkeypatch, reply(intent_row(stored)))
    run_all(start(operator))
    prompt = models[0].requests[0].parts[0]
    assert "sk-abc123" not in prompt and "[redacted]" in prompt
    _redactor.cache_clear()


def test_the_schedule_proposes_only_runs_not_yet_covered(operator, monkeypatch, settings):
    settings.ANTHROPIC_API_KEY = ""
    stored_runs(2)
    first = services.intent_proposals_schedule()
    assert first is not None and first.runs_total == 2 and first.scheduled
    assert services.intent_proposals_schedule() is None  # the scheduled run is still open
    run_all(first)
    assert services.intent_proposals_schedule() is None  # nothing new
    (new,) = stored_runs(1)
    second = services.intent_proposals_schedule()
    assert second.batches.get().trajectory_ids == [tid(new)]


def test_the_schedule_is_off_at_zero_minutes(settings):
    settings.WAYMARK_INTENT_PROPOSE_EVERY_MINUTES = 0
    stored_runs(1)
    assert services.intent_proposals_schedule() is None


def test_runs_of_a_malformed_batch_may_be_proposed_again(operator, monkeypatch, settings):
    stored_runs(1)
    use_model(monkeypatch, "nope", "still nope")
    run_all(start(operator))
    again = start(operator, only_new=True)
    assert again.runs_total == 1


def test_the_reaper_finds_lapsed_and_lost_runs(operator):
    stored_runs(3)
    lapsed, lost, held = start(operator), start(operator), start(operator)
    now = timezone.now()
    IntentProposalRun.objects.filter(pk=lapsed.pk).update(status="running", lease_expires_at=now - timedelta(seconds=1))
    IntentProposalRun.objects.filter(pk=lost.pk).update(created_at=now - timedelta(minutes=5))
    IntentProposalRun.objects.filter(pk=held.pk).update(status="running", lease_expires_at=now + timedelta(minutes=1))
    assert sorted(services.intent_proposals_to_resume()) == sorted([lapsed.pk, lost.pk])


def test_a_run_that_keeps_crashing_fails_with_the_reason(operator):
    stored_runs(1)
    run = start(operator)
    IntentProposalRun.objects.filter(pk=run.pk).update(attempts=services.MAX_CRASHES, error="boom")
    result = services.intent_proposal_step(run_id=run.pk, worker=WORKER)
    assert result.run.status == "failed" and "boom" in result.run.error
    assert AuditEvent.objects.filter(verb="intent_proposal.finish", target_id=str(run.pk)).exists()


def test_the_default_embedder_is_the_offline_hashed_ngram_one(operator, monkeypatch, settings):
    from intents.core.embed import HashedNgramEmbedder
    from intents.embeddings import get_embedder

    settings.WAYMARK_INTENT_EMBEDDER = ""
    embedder = get_embedder()
    assert isinstance(embedder, HashedNgramEmbedder)
    (stored,) = stored_runs(1)
    use_model(monkeypatch, reply(intent_row(stored, "reset a password")))
    run_all(start(operator))
    row = Embedding.objects.get()
    assert row.embedder == embedder.name and row.dimensions == embedder.dimensions
    assert row.as_array().shape == (embedder.dimensions,)


def test_a_factory_that_cannot_be_imported_is_a_configuration_error(settings):
    from django.core.exceptions import ImproperlyConfigured

    from intents.embeddings import get_embedder

    settings.WAYMARK_INTENT_EMBEDDER = "no.such.module.factory"
    with pytest.raises(ImproperlyConfigured, match="WAYMARK_INTENT_EMBEDDER"):
        get_embedder()
