"""A real Celery worker on Redis: mine → offline replay → gate report stored; and a live replay the demo agent
answers over HTTP, settled by the worker. The test settings run tasks eagerly on memory://, so this test points the
app at Redis and starts an embedded worker thread."""

import io
import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.core.management import call_command

from accounts.services import Actor
from config.celery import app
from procedures.mining import services as mining_services
from procedures.models import ProcedureVersion, ReplayRun, ReplayStatus, VersionStatus

from .factories import REFUND, refund_runs

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


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


def test_a_worker_replays_a_mined_version_and_stores_the_gate_report(transactional_db, redis_app, operator):
    refund_runs(successes=10, failures=4)

    result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=False)

    (replay,) = result.replays
    assert wait_for(lambda: replay_done(replay.pk)), "the worker did not finish the offline replay"
    replay.refresh_from_db()
    assert replay.status == ReplayStatus.DONE and replay.gate_report["passed"] is True
    assert replay.metrics["candidate"]["cases"] == len(replay.held_out_run_ids)
    assert ProcedureVersion.objects.get(pk=result.version.pk).status == VersionStatus.READY


def test_a_worker_settles_a_live_replay_the_demo_agent_answers(
    transactional_db, redis_app, live_server, operator, make_token, make_agent_token
):
    refund_runs(successes=10, failures=2)
    result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    offline, live = sorted(result.replays, key=lambda replay: replay.mode != "offline")
    assert wait_for(lambda: replay_done(offline.pk))
    assert wait_for(lambda: ReplayRun.objects.get(pk=live.pk).status == ReplayStatus.RUNNING)

    call_command(
        "run_demo_agent",
        "--once",
        "--token",
        make_agent_token("evaluations:run"),
        "--url",
        live_server.url,
        stdout=io.StringIO(),
    )

    assert wait_for(lambda: replay_done(live.pk)), "the worker did not settle the live replay"
    live.refresh_from_db()
    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is True
    assert live.report["unanswered"] == []
    assert ProcedureVersion.objects.get(pk=result.version.pk).status == VersionStatus.READY
