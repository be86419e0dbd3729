"""Worker liveness (common/liveness.py): each process that runs tasks keeps a stamp; the leases of a process whose
stamp went stale are handed to their app to release, and nothing else is (no stamp: the lease runs out as before)."""

import os
import socket
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.cache import cache

from common import liveness
from config.celery import app


@pytest.fixture(autouse=True)
def _clean_stamps():
    cache.clear()
    yield
    liveness.stop_stamping()
    cache.clear()


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(liveness, "_registry", {})
    return liveness._registry


def stale() -> float:
    return time.time() - settings.WAYMARK_LIVENESS_STALE_SECONDS - 1


def test_an_owner_names_its_process_by_host_and_pid():
    assert liveness.owner_process("web-3:4242:5f1c-task") == "web-3:4242"
    assert liveness.owner_process("web-3:4242:") == "web-3:4242"
    for unknown in ("dead-worker", "web-3:pid:task", ":42:task", "", "agent-1"):
        assert liveness.owner_process(unknown) is None
    assert liveness.process_name() == f"{socket.gethostname()}:{os.getpid()}"


def test_only_a_stale_stamp_means_dead():
    liveness.stamp("h:1", at=stale())
    liveness.stamp("h:2", at=time.time())
    assert liveness.dead_processes({"h:1", "h:2", "h:3"}) == {"h:1"}  # h:3 has no stamp: unknown, not dead
    assert liveness.dead_owners(["h:1:a", "h:1:b", "h:2:c", "h:3:d", "not-a-worker"]) == ["h:1:a", "h:1:b"]


def test_release_gets_only_the_dead_owners_of_each_kind(registry):
    liveness.stamp("h:1", at=stale())
    liveness.stamp("h:2", at=time.time())
    calls = []

    def release(*, owners, now):
        calls.append(sorted(owners))
        return len(owners)

    liveness.register_leases("tests.a", holders=lambda: ["h:1:x", "h:2:y", "h:9:z", "legacy"], release=release)
    liveness.register_leases("tests.b", holders=lambda: ["h:2:y"], release=release)

    assert liveness.dead_leases_release() == {"tests.a": 1, "tests.b": 0}
    assert calls == [["h:1:x"]]  # tests.b had no dead owner: release is not called at all


def test_a_kind_that_fails_does_not_stop_the_others(registry):
    liveness.stamp("h:1", at=stale())

    def broken():
        raise RuntimeError("database gone")

    liveness.register_leases("tests.broken", holders=broken, release=lambda **_: 0)
    liveness.register_leases("tests.ok", holders=lambda: ["h:1:x"], release=lambda *, owners, now: len(owners))
    assert liveness.dead_leases_release() == {"tests.broken": -1, "tests.ok": 1}


def test_registering_something_not_callable_fails_at_start_up(registry):
    with pytest.raises(TypeError, match="callable"):
        liveness.register_leases("tests.thing", holders="nope", release=lambda **_: 0)


def test_a_stamping_process_stays_alive_and_its_stamp_goes_stale_once_it_stops(settings):
    settings.WAYMARK_LIVENESS_STAMP_SECONDS = 0.05
    settings.WAYMARK_LIVENESS_STALE_SECONDS = 1.0
    me = liveness.process_name()
    liveness.start_stamping()
    first = cache.get(liveness.STAMP_PREFIX + me)
    assert first is not None
    time.sleep(0.5)
    assert cache.get(liveness.STAMP_PREFIX + me) > first  # refreshed by the thread
    assert liveness.dead_processes({me}) == set()
    liveness.stop_stamping()
    time.sleep(1.3)
    assert liveness.dead_processes({me}) == {me}


def test_a_pool_process_starts_stamping_when_celery_initialises_it():
    from celery.signals import worker_process_init

    worker_process_init.send(sender="celery@test")
    assert cache.get(liveness.STAMP_PREFIX + liveness.process_name()) is not None


def test_beat_looks_for_dead_workers_well_within_a_minute():
    entry = settings.CELERY_BEAT_SCHEDULE["release-dead-leases"]
    app.loader.import_default_modules()
    assert entry["task"] in app.tasks
    assert entry["schedule"] <= timedelta(seconds=20)
    assert settings.WAYMARK_LIVENESS_STAMP_SECONDS * 3 <= settings.WAYMARK_LIVENESS_STALE_SECONDS
    found_within = settings.WAYMARK_LIVENESS_STALE_SECONDS + entry["schedule"].total_seconds()
    assert found_within <= 60


def test_every_kind_of_worker_lease_is_registered():
    assert {"procedures.replayrun", "graphs.evolutionrun", "intents.intentproposalrun", "rubrics.rubricjob"} <= set(
        liveness.registered_leases()
    )
