"""Periodic mining on a real Celery worker (Redis broker, PostgreSQL) whose pool process is SIGKILLed once inside
the mining transaction and once between its commit and the replay's message: beat's next ticks leave exactly one
version, whose offline replay (its message lost with the worker) is recovered by requeue_expired_replays and
finishes once; no audit event is written twice.

Mining holds no lease of its own: the durable transaction is the claim (docs/decisions.md, "Work that survives a
dead worker")."""

import pytest

from accounts.models import AuditEvent
from procedures import tasks
from procedures.mining import intent_key
from procedures.models import Procedure, ProcedureVersion, ReplayRun, ReplayStatus, VersionStatus
from tests.faults import fault_worker, wait_for

from .factories import REFUND, refund_runs

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
KILL_POINTS = ["learned", "committed"]
KEY = intent_key(REFUND)


def beat() -> None:
    """What Celery beat sends: mining every 10 minutes, the replay requeue every minute (here, every tick)."""
    tasks.mine_new_runs.delay()
    tasks.requeue_expired_replays.delay()


def replay_done() -> bool:
    return ReplayRun.objects.filter(version__procedure__intent=KEY, status=ReplayStatus.DONE).exists()


def test_mining_whose_worker_is_killed_before_and_after_commit_makes_one_version_replayed_once(
    transactional_db, tmp_path
):
    run_ids = refund_runs()
    with fault_worker("tests.procedures.mining_fault_worker", tmp_path, redis_db=3, points=KILL_POINTS) as worker:
        tasks.mine_new_runs.delay()
        # The redelivered message mines again after the first kill; the second kill loses the replay's message.
        assert wait_for(lambda: worker.killed() == sorted(KILL_POINTS), 45), worker.log_tail()
        assert wait_for(replay_done, 45, tick=beat), "the replay did not finish:\n" + worker.log_tail()
        for _ in range(2):  # more beat ticks change nothing
            beat()
        wait_for(lambda: False, 3)

    procedure = Procedure.objects.get(intent=KEY)
    version = ProcedureVersion.objects.get(procedure=procedure)  # exactly one version
    assert version.status == VersionStatus.READY
    replay = ReplayRun.objects.get(version=version)  # and one replay of it
    assert replay.status == ReplayStatus.DONE and replay.gate_report["passed"] is True
    assert replay.attempts == 1  # its message was lost, never claimed by the dead worker
    assert worker.lines("finishes.log") == [f"{replay.pk}:done"], "the replay finished more than once"
    assert procedure.mined_through_run_id == max(run_ids)

    def events(verb: str) -> int:
        return AuditEvent.objects.filter(verb=verb).count()

    assert (events("procedure.create"), events("procedure_version.create"), events("replay.finish")) == (1, 1, 1)
    assert events("procedure.mined") == 0  # later ticks found no new runs to mine
