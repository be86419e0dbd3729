"""Intents learn from production runs only (issue 24, "replay runs leak into intent proposals"): a run a live replay
made (source `waymark-evaluation`, left out by `Run.objects.production()`) is never proposed, by hand or by the
schedule, never a batch's input, never a client's evidence, and a candidate that cites one (stored before this
rule) is counted by no window, raises no novelty alert and moves no drift report. One test per learner."""

from __future__ import annotations

import pytest

from accounts.services import Actor
from intents import services
from intents.models import IntentBatchRun, IntentCandidateRecord, NoveltyAlert
from intents.windows import services as windows
from tests.intents.helpers import reply, stored_runs, tid, use_model
from tests.intents.windows_helpers import DAY, T0, activate_taxonomy, candidate, chosen_embedder, window_of
from trajectories.choices import EVALUATION_SOURCE

pytestmark = pytest.mark.django_db
chosen_embedder = chosen_embedder  # the fixture, used by the window tests below


@pytest.fixture
def replayed():
    """Two runs a live replay made (answers of evaluation jobs) and one production run, stored in that order."""
    evaluation = stored_runs(2, source=EVALUATION_SOURCE)
    (production,) = stored_runs(1)
    return evaluation, production


def proposed_run_ids(run) -> set[int]:
    return set(IntentBatchRun.objects.filter(batch__run=run).values_list("trajectory_run_id", flat=True))


def test_a_proposal_run_started_by_hand_reads_no_evaluation_run(operator, replayed):
    evaluation, production = replayed
    run = services.intent_proposal_start(actor=Actor(user=operator), enqueue=False)
    assert proposed_run_ids(run) == {production.pk} and run.runs_total == 1
    assert all(tid(item) not in batch.trajectory_ids for item in evaluation for batch in run.batches.all())


def test_a_scheduled_proposal_run_reads_no_evaluation_run(replayed, settings):
    settings.WAYMARK_INTENT_PROPOSE_EVERY_MINUTES = 60
    _, production = replayed
    run = services.intent_proposals_schedule()
    assert run is not None and proposed_run_ids(run) == {production.pk}


def test_a_batch_holding_an_evaluation_run_sends_only_its_production_runs_to_the_model(operator, replayed, monkeypatch):
    """A batch cut before the rule (its links name an evaluation run) still never shows that run to the model."""
    evaluation, production = replayed
    run = services.intent_proposal_start(actor=Actor(user=operator), enqueue=False)
    batch = run.batches.get()
    IntentBatchRun.objects.create(batch=batch, trajectory_run=evaluation[0])
    models = use_model(
        monkeypatch,
        reply({"intent": "Refund an order", "evidence": [{"trajectory_id": tid(production), "start": 0, "end": 1}]}),
    )
    services.intent_proposal_step(run_id=run.pk, worker="w")
    batch.refresh_from_db()
    assert batch.status == "succeeded", batch.error
    prompt = "\n".join(part for request in models[0].requests for part in request.parts)
    assert tid(production) in prompt and tid(evaluation[0]) not in prompt
    stored = IntentCandidateRecord.objects.get()
    assert [item["run_id"] for item in stored.evidence] == [production.pk]


def replay_candidate(label: str, run, *, at=T0):
    """A candidate citing a run a live replay made, as a proposal stored it before the rule."""
    record = candidate(label, at=at, run=tid(run))
    record.evidence = [{**record.evidence[0], "run_id": run.pk}]
    record.save(update_fields=["evidence"])
    return record


def test_a_window_analysis_counts_no_candidate_citing_an_evaluation_run(operator, replayed, chosen_embedder):
    evaluation, _ = replayed
    kept = window_of("refund an order", "change a flight")
    leaked = replay_candidate("book a hotel", evaluation[0], at=T0 + DAY / 2)
    analysis = windows.window_analyze(actor=Actor(user=operator), start=T0, end=T0 + DAY)
    members = {cid for cluster in analysis.clusters for cid in cluster["candidate_ids"]}
    assert members == {record.candidate_id for record in kept} and leaked.candidate_id not in members
    assert analysis.candidates_count == 2


def test_novelty_raises_no_alert_for_a_candidate_citing_an_evaluation_run(operator, replayed, chosen_embedder):
    evaluation, _ = replayed
    reviewed = window_of("refund an order", at=T0 - 3 * DAY, run_prefix="demo:rev")
    activate_taxonomy([("intent-refund", "refund an order", [reviewed[0].candidate_id])])
    window_of("cancel a subscription")
    replay_candidate("book a hotel", evaluation[0], at=T0 + DAY / 2)
    analysis = windows.window_analyze(actor=Actor(user=operator), start=T0, end=T0 + DAY)
    assert [row["label"] for row in analysis.novelty] == ["cancel a subscription"]
    assert list(NoveltyAlert.objects.values_list("label", flat=True)) == ["cancel a subscription"]


def test_drift_compares_windows_without_the_candidates_citing_evaluation_runs(operator, replayed, chosen_embedder):
    evaluation, _ = replayed
    window_of("refund an order")
    window_of("refund my order", at=T0 + DAY, run_prefix="demo:later")
    replay_candidate("book a hotel", evaluation[0], at=T0 + DAY + DAY / 2)
    replay_candidate("change a flight", evaluation[1], at=T0 + DAY + DAY / 2)
    actor = Actor(user=operator)
    before = windows.window_analyze(actor=actor, start=T0, end=T0 + DAY)
    after = windows.window_analyze(actor=actor, start=T0 + DAY, end=T0 + 2 * DAY)
    report = windows.drift_compare(actor=actor, before=before, after=after, matching="medoid")
    assert (report.before_total, report.after_total) == (1, 1)
    assert report.new == [] and report.retired == []
    assert report.jsd == pytest.approx(0.0)
