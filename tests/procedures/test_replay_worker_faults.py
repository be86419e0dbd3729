"""An offline replay on a real Celery worker (Redis broker, PostgreSQL) whose pool process is SIGKILLed once at
every stage: the redelivered message takes the replay over when the dead worker's lease runs out, and the replay
finishes exactly once, with its case rows and gate report written once."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from accounts.models import AuditEvent
from accounts.services import Actor
from procedures import services
from procedures.models import ProcedureVersion, ReplayCase, ReplayRun, ReplayStatus, VersionStatus
from tests.graphs.evolution.test_worker import broker_url, point_app_at, restore_app, wait_for

from .factories import REFUND, refund_runs

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[2]
KILL_POINTS = ["claimed", "loaded", "replayed", "settling", "finished"]


def start_worker(tmp_path: Path, url: str, points: list[str]) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "WAYMARK_TEST_DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        "FAULT_BROKER_URL": url,
        "FAULT_DIR": str(tmp_path),
        "FAULT_KILL_POINTS": ",".join(points),
        "FAULT_LEASE_SECONDS": "2",
    }
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - the worker's output; closed with the process
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.procedures.fault_worker",
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


def finished(replay_id: int) -> bool:
    return ReplayRun.objects.get(pk=replay_id).status in (ReplayStatus.DONE, ReplayStatus.FAILED)


def test_an_offline_replay_whose_worker_is_killed_at_every_stage_finishes_once(transactional_db, operator, tmp_path):
    refund_runs()
    url = broker_url(9)
    saved = point_app_at(url)
    worker = start_worker(tmp_path, url, KILL_POINTS)
    try:
        mined = services.procedure_mine(actor=Actor(user=operator), intent=REFUND)
        replay_id = mined.replays[0].pk
        done = wait_for(lambda: finished(replay_id), 120)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        restore_app(saved)
    worker_log = (tmp_path / "worker.log").read_text()
    assert done, "the replay did not finish:\n" + worker_log[-4000:]
    killed = sorted(path.name.removeprefix("killed-") for path in tmp_path.glob("killed-*"))
    assert killed == sorted(KILL_POINTS), worker_log[-4000:]

    replay = ReplayRun.objects.get(pk=replay_id)
    version = ProcedureVersion.objects.get(pk=mined.version.pk)
    assert replay.status == ReplayStatus.DONE, replay.error
    assert replay.gate_report["passed"] is True
    assert replay.attempts == 5  # four claims died before the finish committed; the fifth finished
    assert ReplayCase.objects.filter(replay=replay).count() == len(version.held_out_run_ids)
    assert version.status == VersionStatus.READY
    assert AuditEvent.objects.filter(verb="replay.finish", target_id=str(replay_id)).count() == 1
    assert AuditEvent.objects.filter(verb="replay.takeover", target_id=str(replay_id)).count() == 4
    finishes = (tmp_path / "finishes.log").read_text().split()
    assert finishes == [f"{replay_id}:done"], "the finish ran more than once or was lost"
