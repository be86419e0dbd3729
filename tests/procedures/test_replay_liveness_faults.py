"""A real worker (Redis broker, PostgreSQL) whose pool process is SIGKILLed mid-replay while holding a 15-minute
lease: its liveness stamp goes stale, the check (the test playing Celery beat) releases the lease and the replay is
taken over and finished within a minute, not when the lease runs out."""

import time

import pytest

from accounts.models import AuditEvent
from accounts.services import Actor
from common import liveness
from procedures.mining import services as mining_services
from procedures.models import ReplayRun, ReplayStatus
from tests.faults import broker_url, fault_worker, wait_for

from .factories import REFUND, refund_runs

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
STALE_SECONDS = 6  # the test's stale limit (the default is 30 s, checked every 15 s: found within 45 s)


@pytest.fixture
def shared_cache(settings):
    """This process and the worker read and write the stamps in one Redis database."""
    url = broker_url(5)
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}}
    settings.WAYMARK_LIVENESS_STALE_SECONDS = STALE_SECONDS
    from django.core.cache import cache

    cache.clear()
    yield url
    cache.clear()


def status(replay_id: int) -> str:
    return ReplayRun.objects.get(pk=replay_id).status


def test_a_replay_whose_pool_process_dies_is_finished_long_before_its_lease_runs_out(
    transactional_db, operator, tmp_path, shared_cache
):
    refund_runs()
    env = {"FAULT_LEASE_SECONDS": "900", "WAYMARK_TEST_CACHE_URL": shared_cache, "WAYMARK_LIVENESS_STAMP_SECONDS": "1"}
    with fault_worker("tests.procedures.fault_worker", tmp_path, redis_db=4, points=["loaded"], env=env) as worker:
        replay_id = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND).replays[0].pk
        assert wait_for(lambda: worker.killed() == ["loaded"], 60), worker.log_tail()
        killed_at = time.monotonic()
        held = ReplayRun.objects.get(pk=replay_id)
        assert held.status == ReplayStatus.RUNNING
        assert (held.lease_expires_at - held.started_at).total_seconds() >= 890  # a 15-minute lease

        done = wait_for(lambda: status(replay_id) == ReplayStatus.DONE, 60, tick=liveness.dead_leases_release)
        took = time.monotonic() - killed_at
    assert done, "the replay was not taken over:\n" + worker.log_tail()
    assert took < 60

    replay = ReplayRun.objects.get(pk=replay_id)
    assert replay.attempts == 2 and replay.gate_report["passed"] is True
    released = AuditEvent.objects.get(verb="replayrun.lease_released", target_id=str(replay_id))
    assert released.actor_label == "system" and released.before["lease_owner"] == held.lease_owner
    assert AuditEvent.objects.filter(verb="replay.takeover", target_id=str(replay_id)).count() == 1
    assert AuditEvent.objects.filter(verb="replay.finish", target_id=str(replay_id)).count() == 1
