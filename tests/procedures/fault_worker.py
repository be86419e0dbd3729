"""A Celery app for the replay fault test's worker subprocess (tests/faults.py): short replay leases and test-only
patches that SIGKILL the pool process once at each named point of an offline replay: the heartbeats ("claimed",
"loaded", "replayed"), inside the finishing transaction ("settling") and after it committed, before the message is
acknowledged ("finished")."""

import os

from tests.faults import die_once_at, note, worker_app

app = worker_app()

from django.conf import settings  # noqa: E402

settings.WAYMARK_REPLAY_LEASE_SECONDS = int(os.environ.get("FAULT_LEASE_SECONDS", "2"))
settings.WAYMARK_REPLAY_MAX_ATTEMPTS = int(os.environ.get("FAULT_MAX_ATTEMPTS", "10"))

from procedures.replay.services import lifecycle as replay_services  # noqa: E402
from procedures.replay.services import offline as offline_replay_services  # noqa: E402

_heartbeat = offline_replay_services.replay_heartbeat


def replay_heartbeat(replay, worker, stage):
    _heartbeat(replay, worker, stage)
    die_once_at(stage)


offline_replay_services.replay_heartbeat = replay_heartbeat

_settle_version = replay_services.settle_version


def settle_version(version_id):
    status = _settle_version(version_id)
    die_once_at("settling")
    return status


replay_services.settle_version = settle_version

_finish = offline_replay_services.finish_replay


def finish(*args, **kwargs):
    replay = _finish(*args, **kwargs)
    note("finishes.log", f"{replay.pk}:{replay.status}")
    die_once_at("finished")
    return replay


offline_replay_services.finish_replay = finish
