"""A real Celery worker on Redis for the tests that need one: `redis_app` points the app at the test Redis URL and
starts an embedded worker thread (the test settings run tasks eagerly on memory://), `wait_for` polls until a
condition holds and `replay_done` says whether a replay has settled."""

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from config.celery import app
from procedures.models import ReplayRun, ReplayStatus


@pytest.fixture
def redis_app():
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "broker_transport_options")}
    app.conf.update(
        broker_url=settings.TEST_REDIS_URL, task_always_eager=False, broker_transport_options={"visibility_timeout": 60}
    )
    app._pool = None
    app.amqp._producer_pool = None
    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge("celery")
    with start_worker(app, perform_ping_check=False, pool="solo", shutdown_timeout=20):
        yield app
    app.conf.update(saved)
    app._pool = None
    app.amqp._producer_pool = None


def wait_for(predicate, seconds=30.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def replay_done(replay_id):
    return ReplayRun.objects.get(pk=replay_id).status in (ReplayStatus.DONE, ReplayStatus.FAILED)
