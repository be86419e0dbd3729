"""An intent proposal run on a real Celery worker (Redis broker, PostgreSQL) whose pool process is SIGKILLed once
during a batch's model call and once right after a batch settled (the middle one and the last): the run finishes,
every batch is settled once with one accepted model call, and neither the counts, the candidates nor the ledger's
accepted calls are doubled."""

import json

import pytest

from accounts.models import AuditEvent
from accounts.services import Actor
from intents import services, tasks
from intents.models import Embedding, IntentCandidateRecord, IntentProposalBatch, IntentProposalRun
from llm.models import ModelCall
from tests.faults import fault_worker, wait_for
from tests.intents.helpers import stored_runs, tid

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
KILL_POINTS = ["model:2", "settled:3", "settled:4"]
LABELS = ["refund an order", "cancel an order", "change an address", "track a parcel"]


def test_a_proposal_run_whose_worker_is_killed_mid_call_and_after_settling_finishes_once(
    transactional_db, operator, tmp_path
):
    runs = stored_runs(4)
    (tmp_path / "labels.json").write_text(
        json.dumps({tid(run): label for run, label in zip(runs, LABELS, strict=True)})
    )
    with fault_worker("tests.intents.fault_worker", tmp_path, redis_db=5, points=KILL_POINTS) as worker:
        run = services.intent_proposal_start(actor=Actor(user=operator), batch_size=1)

        def finished() -> bool:
            run.refresh_from_db()
            return run.is_finished

        # A redelivered message waits for the dead worker's lease; beat's reaper is the backstop for a lost one.
        done = wait_for(finished, 50, tick=tasks.proposal_reap.delay, every=3)
        assert done, "the run did not finish:\n" + worker.log_tail()

    assert worker.killed() == sorted(KILL_POINTS), worker.log_tail()
    assert run.status == IntentProposalRun.Status.SUCCEEDED, run.error
    assert (run.batches_total, run.batches_done, run.candidates_count) == (4, 4, 4)
    assert (run.batches_malformed, run.batches_failed, run.malformed_replies) == (0, 0, 0)

    batches = list(IntentProposalBatch.objects.filter(run=run).order_by("seq"))
    assert [batch.status for batch in batches] == ["succeeded"] * 4
    assert [batch.attempts for batch in batches] == [1, 2, 1, 1]  # batch 2 was asked again after the kill
    assert [batch.candidates_count for batch in batches] == [1, 1, 1, 1]
    accepted = [call_id for batch in batches for call_id in batch.model_call_ids]
    assert len(accepted) == 4 == len(set(accepted))  # one accepted call per batch, none settled twice

    calls = ModelCall.objects.filter(role="intents")
    assert calls.filter(status="succeeded").count() == 4
    assert set(calls.filter(status="succeeded").values_list("pk", flat=True)) == set(accepted)
    assert calls.exclude(status="succeeded").count() == 1  # the dead call's row (the stuck-work reaper ends it)

    candidates = IntentCandidateRecord.objects.filter(batch__run=run)
    assert sorted(candidates.values_list("intent", flat=True)) == sorted(LABELS)
    assert Embedding.objects.filter(embedder="test-embedder-v1").count() == len(LABELS)
    assert AuditEvent.objects.filter(verb="intent_proposal.finish", target_id=str(run.pk)).count() == 1
