"""Evolution runs on real Celery workers (Redis broker, PostgreSQL): the spec §10 scenario end to end, and the same
run with its worker process SIGKILLed once at every stage, which must end with identical records, no evaluation
done twice and no second accept."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import connection

from accounts.models import AuditEvent
from accounts.services import Actor
from config.celery import app
from graphs.core.rejections import RejectionMemory
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_start
from graphs.models import EvolutionRun, Revision
from graphs.services import workspace_create
from llm.models import ModelCall

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
TASK = "two-hop question answering over a small corpus"
OUTCOMES = ["accepted", "structural_failure", "rejected", "duplicate_candidate"]
ROOT = Path(__file__).resolve().parents[3]


def broker_url(db: int) -> str:
    return settings.TEST_REDIS_URL.rsplit("/", 1)[0] + f"/{db}"


def point_app_at(url: str) -> dict:
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "broker_transport_options")}
    app.conf.update(broker_url=url, task_always_eager=False, broker_transport_options={"visibility_timeout": 60})
    app._pool = None
    app.amqp._producer_pool = None
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("celery")
    return saved


def restore_app(saved: dict) -> None:
    app.conf.update(saved)
    app._pool = None
    app.amqp._producer_pool = None


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


def finished(run_id: int) -> bool:
    return EvolutionRun.objects.get(pk=run_id).is_finished


def lab(slug: str):
    return workspace_create(actor=Actor.system(), slug=slug, task_description=TASK).workspace


def chain(workspace, kind):
    return list(Revision.objects.filter(workspace=workspace, kind=kind).order_by("seq"))


def entries_without_times(workspace):
    memory = RejectionMemory.from_document(chain(workspace, "rejections")[-1].document)
    documents = [entry.to_document() for entry in memory.entries]
    for document in documents:
        document.pop("created_at")
    return documents


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


# Every stage of a round, and the two moments the spec's resume rules are about: just after the accepted graph was
# appended, and just after the round was recorded. At most three per step: a step that dies more often than
# MAX_CRASHES times in a row fails the run on purpose.
KILL_POINTS = [
    "baseline",
    "rollout:1",
    "validation:1",
    "accepted:1",
    "refiner:2",
    "recorded:2",
    "validation:3",
    "recorded:3",
    "rollout:4",
    "refiner:4",
]


def test_a_run_whose_worker_is_killed_at_every_stage_ends_with_the_same_records(transactional_db, operator, tmp_path):
    reference = lab("reference")
    clean = run_inline(
        evolution_start(actor=Actor(user=operator), workspace=reference, rounds=4, evaluator="two-hop", enqueue=False)
    )
    assert clean.status == "succeeded"

    url = broker_url(12)
    saved = point_app_at(url)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "WAYMARK_TEST_DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        "WAYMARK_EVOLUTION_LEASE_SECONDS": "2",
        "FAULT_BROKER_URL": url,
        "FAULT_DIR": str(tmp_path),
        "FAULT_KILL_POINTS": ",".join(KILL_POINTS),
    }
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.graphs.evolution.fault_worker",
            "worker",
            "--pool",
            "prefork",
            "--concurrency",
            "1",
            "--loglevel",
            "INFO",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        workspace = lab("faulty")
        run = evolution_start(actor=Actor(user=operator), workspace=workspace, rounds=4, evaluator="two-hop")
        done = wait_for(lambda: finished(run.pk), 240)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
        restore_app(saved)
    worker_log = (tmp_path / "worker.log").read_text()
    assert done, "the run did not finish:\n" + worker_log[-4000:]
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == ("succeeded", "max_rounds"), run.error
    killed = sorted(path.name for path in tmp_path.glob("killed-*"))
    assert len(killed) == len(KILL_POINTS), killed
    assert list(run.rounds.values_list("outcome", flat=True)) == OUTCOMES
    assert [r.digest for r in chain(workspace, "graph")] == [r.digest for r in chain(reference, "graph")]
    assert entries_without_times(workspace) == entries_without_times(reference)
    evaluations = (tmp_path / "evaluations.log").read_text().split()
    assert sorted(evaluations) == ["baseline:0", "candidate:1", "candidate:3"], "an evaluation was done twice"
    appends = AuditEvent.objects.filter(
        verb="graph_revision.append", target_id__in=[str(r.pk) for r in chain(workspace, "graph")]
    )
    assert appends.count() == 1, "the accepted candidate was appended twice"
    assert len(chain(workspace, "rejections")) == 4
