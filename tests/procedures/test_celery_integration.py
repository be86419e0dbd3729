"""A real Celery worker on Redis: mine → offline replay → gate report stored; and a live replay the demo agent
answers over HTTP, settled by the worker. The test settings run tasks eagerly on memory://, so this test points the
app at Redis and starts an embedded worker thread."""

import io

import pytest
from django.core.management import call_command

from accounts.services import Actor
from procedures.mining import services as mining_services
from procedures.models import ProcedureVersion, ReplayRun, ReplayStatus, VersionStatus
from tests.helpers.celery_workers import redis_app, replay_done, wait_for

from .factories import REFUND, refund_runs

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
__all__ = ["redis_app"]  # the worker fixture, used by name


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
