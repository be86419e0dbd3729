"""The Celery app of the mining fault test's worker subprocess (tests/faults.py): short replay leases, and test-only
patches that SIGKILL the pool process once at the named points of mining:

- "learned": the version was learned and every row written, inside the mining transaction (it rolls back);
- "committed": the transaction committed, before the replay's message is sent (the message is lost).

Every finished replay is noted in finishes.log, so the test can tell a replay finished exactly once."""

import os

from tests.faults import die_once_at, note, worker_app

app = worker_app()

from django.conf import settings  # noqa: E402
from django.db import transaction  # noqa: E402

settings.WAYMARK_REPLAY_LEASE_SECONDS = int(os.environ.get("FAULT_LEASE_SECONDS", "2"))

from procedures.mining import services as mining_services  # noqa: E402
from procedures.replay.services import offline as offline_replay_services  # noqa: E402

_enqueue = mining_services.enqueue_replay_on_commit


def enqueue_replay_on_commit(replay):
    # Callbacks run in the order they were registered: this one runs after commit, before the replay's message.
    transaction.on_commit(lambda: die_once_at("committed"))
    _enqueue(replay)
    die_once_at("learned")  # the last thing inside procedure_mine's transaction


mining_services.enqueue_replay_on_commit = enqueue_replay_on_commit  # where procedure_mine looks it up

_finish = offline_replay_services.finish_replay


def finish(*args, **kwargs):
    replay = _finish(*args, **kwargs)
    note("finishes.log", f"{replay.pk}:{replay.status}")
    return replay


offline_replay_services.finish_replay = finish
