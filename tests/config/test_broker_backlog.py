"""No flood of no-op messages on restart (issue 30, finding 6): on the embedded broker (kombu's filesystem transport)
a backlog of periodic messages that waited past their period is dropped unrun by the worker, and real work queued
behind it runs within seconds.

The backlog is what beat leaves when no worker takes its messages for half an hour, sent two hours ago with the
`expires` the beat schedule gives each entry (config/settings/base.py): a message per period of every entry. Behind
it, a real task: the first step of an intent proposal over three stored runs, which enqueues the next steps until the
run succeeds. The worker is started as the Procfile starts it (under scripts/supervise.py).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups (Linux)")

# Seconds from the worker's "ready" to the proposal run succeeded: about 1 s on 2 cores, 23 s when the backlog runs.
REAL_WORK_WITHIN = 10.0

PREPARE = textwrap.dedent(
    """
    from datetime import timedelta

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from accounts.services import Actor
    from config.celery import app
    from intents.services import intent_proposal_start
    from tests.demo_data import push_user_runs

    call_command("migrate", interactive=False, verbosity=0)
    push_user_runs(3)
    sent = app.now() - timedelta(hours=2)  # the backlog's age: beat sent it while no worker ran
    ids = []
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        period = entry["schedule"].total_seconds()
        after = entry.get("options", {}).get("expires")  # what beat gives the message: None is "never expires"
        expires = sent + timedelta(seconds=after) if after is not None else None
        for _ in range(max(1, int(1800 // period))):  # half an hour of this entry's messages
            ids.append(app.send_task(entry["task"], expires=expires).id)
    print("backlog", *ids)
    run = intent_proposal_start(actor=Actor.system(), batch_size=1)  # its first step is sent on commit: behind
    print("proposal", run.pk)
    """
)


def procfile_command(name: str) -> str:
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith(f"{name}:"))
    return line.split(":", 1)[1].strip()


def embedded_env(var_dir: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WAYMARK_", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "CELERY_"))
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", WAYMARK_VAR_DIR=str(var_dir))
    return env


def proposal_status(var_dir: Path, run_id: int) -> str:
    with sqlite3.connect(var_dir / "waymark.sqlite3", timeout=5) as db:
        row = db.execute("SELECT status FROM intents_intentproposalrun WHERE id = ?", (run_id,)).fetchone()
    return row[0]


def test_a_backlog_of_expired_periodic_messages_is_dropped_unrun_and_real_work_behind_it_runs_at_once(tmp_path):
    env = embedded_env(tmp_path)
    prepared = subprocess.run(
        [sys.executable, "-c", PREPARE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert prepared.returncode == 0, prepared.stderr
    lines = dict(line.split(" ", 1) for line in prepared.stdout.splitlines() if line.startswith(("backlog", "prop")))
    backlog, run_id = lines["backlog"].split(), int(lines["proposal"])
    assert len(backlog) > 300
    assert len(list((tmp_path / "broker" / "queue").iterdir())) == len(backlog) + 1  # the backlog and the step

    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            ["/bin/sh", "-c", procfile_command("worker")],  # as honcho runs a Procfile line
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log.read_text() and time.monotonic() < deadline:
            assert worker.poll() is None, log.read_text()
            time.sleep(0.05)
        ready = time.monotonic()
        while proposal_status(tmp_path, run_id) != "succeeded" and time.monotonic() < ready + 30:
            time.sleep(0.1)
        took = time.monotonic() - ready
        output = log.read_text()
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)

    assert proposal_status(tmp_path, run_id) == "succeeded", output
    assert took < REAL_WORK_WITHIN, (took, output)
    discarded = {line.rsplit("[", 1)[1].rstrip("]. ") for line in output.splitlines() if "Discarding revoked" in line}
    assert discarded == set(backlog), f"{len(set(backlog) - discarded)} of the backlog not dropped:\n{output}"
    ran = [line for line in output.splitlines() if " succeeded in " in line or " raised " in line]
    assert not [line for line in ran if any(message_id in line for message_id in backlog)]  # none of them run
    names = [line.split("Task ", 1)[1].split("[", 1)[0] for line in ran]
    # The real work only, and the heartbeat a worker sends itself once it is ready (config/heartbeat.py).
    assert set(names) == {"intents.proposal_step", "config.heartbeat.heartbeat"}, ran
    assert names.count("config.heartbeat.heartbeat") == 1
    assert not list((tmp_path / "broker" / "queue").iterdir())  # nothing left behind
