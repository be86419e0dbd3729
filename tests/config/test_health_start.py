"""/healthz right after a cold start (issue 24): "starting", not "degraded", until a worker stamps its heartbeat,
which a worker does as soon as it is ready; "degraded" again once the grace is over or a worker that stamped since
went quiet."""

import time

import pytest
from celery.signals import worker_ready
from django.core.cache import cache

from config import health_start
from config.heartbeat import HEARTBEAT_KEY


@pytest.fixture(autouse=True)
def fresh(monkeypatch, settings):
    settings.WAYMARK_HEARTBEAT_STALE_SECONDS = 180
    monkeypatch.setattr(health_start, "_started_at", None)
    cache.delete(HEARTBEAT_KEY)
    yield
    cache.delete(HEARTBEAT_KEY)


def status(client) -> str:
    response = client.get("/healthz")
    assert response.status_code == 200
    return response.json()["status"]


def test_a_just_started_web_process_says_starting_until_a_ready_worker_stamps(client, db):
    health_start.note_web_started()
    assert status(client) == "starting"

    worker_ready.send(sender=None)  # what a worker sends once it takes tasks (the heartbeat runs eagerly here)

    assert status(client) == "ok"


def test_a_stamp_left_from_before_the_start_says_starting_too(client, db):
    cache.set(HEARTBEAT_KEY, time.time() - 3600, timeout=None)  # the last run's, kept by the file cache
    health_start.note_web_started()
    assert status(client) == "starting"


def test_after_the_grace_no_heartbeat_is_degraded(client, db):
    health_start.note_web_started(at=time.time() - 181)
    assert status(client) == "degraded"


def test_a_worker_that_stamped_since_the_start_and_went_quiet_is_degraded(client, db, settings):
    settings.WAYMARK_HEARTBEAT_STALE_SECONDS = 60
    health_start.note_web_started(at=time.time() - 50)
    cache.set(HEARTBEAT_KEY, time.time() - 40, timeout=None)
    assert status(client) == "ok"
    settings.WAYMARK_HEARTBEAT_STALE_SECONDS = 30  # the same stamp, now stale: written after the start
    assert status(client) == "degraded"


def test_a_process_that_serves_no_wsgi_application_never_says_starting(client, db):
    assert status(client) == "degraded"


def test_the_wsgi_application_notes_when_the_web_process_started():
    import importlib

    import config.wsgi

    before = time.time()
    importlib.reload(config.wsgi)
    assert health_start._started_at is not None and health_start._started_at >= before
