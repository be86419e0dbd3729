"""A Celery app for the replay fault test's worker subprocess: the project's app on the test database and a Redis
broker, with short replay leases and test-only patches that SIGKILL the pool process once at each named point of
an offline replay: the heartbeats ("claimed", "loaded", "replayed"), inside the finishing transaction ("settling")
and after it committed, before the message is acknowledged ("finished")."""

import os
import signal
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
django.setup()

from django.conf import settings  # noqa: E402

from config.celery import app  # noqa: E402
from procedures import services  # noqa: E402

app.conf.update(broker_url=os.environ["FAULT_BROKER_URL"], task_always_eager=False)
settings.WAYMARK_REPLAY_LEASE_SECONDS = int(os.environ.get("FAULT_LEASE_SECONDS", "2"))
settings.WAYMARK_REPLAY_MAX_ATTEMPTS = int(os.environ.get("FAULT_MAX_ATTEMPTS", "10"))

MARKERS = Path(os.environ["FAULT_DIR"])
POINTS = [point for point in os.environ.get("FAULT_KILL_POINTS", "").split(",") if point]


def die_once_at(point: str) -> None:
    if point not in POINTS:
        return
    marker = MARKERS / f"killed-{point}"
    if marker.exists():
        return
    marker.write_text(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)


_heartbeat = services.replay_heartbeat


def replay_heartbeat(replay, worker, stage):
    _heartbeat(replay, worker, stage)
    die_once_at(stage)


services.replay_heartbeat = replay_heartbeat

_settle_version = services._settle_version


def settle_version(version_id):
    status = _settle_version(version_id)
    die_once_at("settling")
    return status


services._settle_version = settle_version

_finish = services._finish


def finish(*args, **kwargs):
    replay = _finish(*args, **kwargs)
    with open(MARKERS / "finishes.log", "a") as log:
        log.write(f"{replay.pk}:{replay.status}\n")
    die_once_at("finished")
    return replay


services._finish = finish
