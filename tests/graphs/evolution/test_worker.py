"""Evolution runs on real Celery workers (Redis broker, PostgreSQL): the spec §10 scenario end to end, and the same
run with its worker process SIGKILLed once at every stage and between every two durable writes of a step, which must
end with the records of the same run without a crash (issue 30), no evaluation done twice and no second accept."""

import pytest
from celery.contrib.testing.worker import start_worker

from accounts.models import AuditEvent
from accounts.services import Actor
from config.celery import app
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_start
from graphs.models import EvolutionRun
from graphs.services import workspace_create
from llm.models import ModelCall
from tests.faults import broker_url, fault_worker, point_app_at, restore_app, wait_for
from tests.helpers.evolution_crashes import assert_ledger_of_the_scenario

from .records import chain, run_record

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
TASK = "two-hop question answering over a small corpus"
OUTCOMES = ["accepted", "structural_failure", "rejected", "duplicate_candidate"]


def finished(run_id: int) -> bool:
    return EvolutionRun.objects.get(pk=run_id).is_finished


def lab(slug: str):
    return workspace_create(actor=Actor.system(), slug=slug, task_description=TASK).workspace


def test_a_worker_runs_the_scripted_scenario_to_the_end(transactional_db, operator):
    saved = point_app_at(broker_url(13))
    try:
        workspace = lab("lab")
        with start_worker(app, perform_ping_check=False, pool="solo", shutdown_timeout=20):
            run = evolution_start(actor=Actor(user=operator), workspace=workspace, rounds=4, evaluator="two-hop")
            assert wait_for(lambda: finished(run.pk), 60), "the worker did not finish the run"
    finally:
        restore_app(saved)
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == ("succeeded", "max_rounds"), run.error
    assert list(run.rounds.values_list("outcome", flat=True)) == OUTCOMES
    assert ModelCall.objects.filter(role="refiner", subject_id__startswith=f"{run.pk}:").count() == 4
    assert run.meter["evaluations"] == 3
    assert (run.baseline_score, run.best_score) == (0.5, 1.0)
    graphs = chain(workspace, "graph")
    assert [revision.meta["origin"] for revision in graphs] == ["skeleton", "accepted"]
    assert len(graphs[1].document["nodes"]) == 5 and len(graphs[1].document["edges"]) == 5
    assert len(chain(workspace, "rejections")) == 4


# Every stage of a round and every moment between two durable writes of a step: after the baseline was measured
# (settle:baseline), after round 1's graph was appended (accepted:1), after a round was recorded and before the step
# records it on the run (recorded:k; recorded:1 is the window where the retained best used to go stale, issue 30),
# after that record and before the next step is sent (enqueue:3), after the last round was recorded (recorded:4) and
# while the run is being ended (end:max_rounds). At most four in a row without progress: a step that dies more often
# than MAX_CRASHES times in a row fails the run on purpose.
KILL_POINTS = [
    "baseline",
    "settle:baseline",
    "rollout:1",
    "validation:1",
    "accepted:1",
    "recorded:1",
    "refiner:2",
    "recorded:2",
    "validation:3",
    "enqueue:3",
    "rollout:4",
    "refiner:4",
    "recorded:4",
    "end:max_rounds",
]


def test_a_run_whose_worker_is_killed_at_every_stage_ends_as_the_run_without_a_crash(
    transactional_db, operator, tmp_path
):
    reference = lab("reference")
    clean = run_inline(
        evolution_start(actor=Actor(user=operator), workspace=reference, rounds=4, evaluator="two-hop", enqueue=False)
    )
    assert clean.status == "succeeded"

    with fault_worker(
        "tests.graphs.evolution.fault_worker",
        tmp_path,
        redis_db=12,
        points=KILL_POINTS,
        env={"WAYMARK_EVOLUTION_LEASE_SECONDS": "2"},
    ) as worker:
        workspace = lab("faulty")
        run = evolution_start(actor=Actor(user=operator), workspace=workspace, rounds=4, evaluator="two-hop")
        done = wait_for(lambda: finished(run.pk), 240)
    assert done, "the run did not finish:\n" + worker.log_tail()
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == ("succeeded", "max_rounds"), run.error
    assert worker.killed() == sorted(KILL_POINTS), worker.log_tail()
    assert list(run.rounds.values_list("outcome", flat=True)) == OUTCOMES
    assert run_record(run) == run_record(clean)
    assert_ledger_of_the_scenario(run)  # each round counted once on the split, its certificate issued once
    evaluations = worker.lines("evaluations.log")
    assert sorted(evaluations) == ["baseline:0", "candidate:1", "candidate:3"], "an evaluation was done twice"
    appends = AuditEvent.objects.filter(
        verb="graph_revision.append", target_id__in=[str(r.pk) for r in chain(workspace, "graph")]
    )
    assert appends.count() == 1, "the accepted candidate was appended twice"
    assert len(chain(workspace, "rejections")) == 4
