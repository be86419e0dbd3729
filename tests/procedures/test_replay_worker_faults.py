"""An offline replay on a real Celery worker (Redis broker, PostgreSQL) whose pool process is SIGKILLed once at
every stage: the redelivered message takes the replay over when the dead worker's lease runs out, and the replay
finishes exactly once, with its case rows and gate report written once."""

import pytest

from accounts.models import AuditEvent
from accounts.services import Actor
from procedures.mining import intent_key
from procedures.mining import services as mining_services
from procedures.models import Procedure, ProcedureVersion, ReplayCase, ReplayRun, ReplayStatus, VersionStatus
from tests.faults import fault_worker, wait_for
from uplift.models import Certificate, SplitDecision

from .factories import REFUND, refund_runs, stored_version

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
KILL_POINTS = ["claimed", "loaded", "replayed", "settling", "finished"]


def finished(replay_id: int) -> bool:
    return ReplayRun.objects.get(pk=replay_id).status in (ReplayStatus.DONE, ReplayStatus.FAILED)


def test_an_offline_replay_whose_worker_is_killed_at_every_stage_finishes_once(transactional_db, operator, tmp_path):
    refund_runs()
    # An active version to replace: the replay is paired against it and certifies the candidate (issue 26).
    procedure = Procedure.objects.create(intent=intent_key(REFUND), title="refund")
    active = stored_version(procedure, "issue_refund", number=1, status=VersionStatus.ACTIVE)
    Procedure.objects.filter(pk=procedure.pk).update(active_version=active)
    with fault_worker("tests.procedures.fault_worker", tmp_path, redis_db=9, points=KILL_POINTS) as worker:
        mined = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND)
        replay_id = mined.replays[0].pk
        done = wait_for(lambda: finished(replay_id), 120)
    assert done, "the replay did not finish:\n" + worker.log_tail()
    assert worker.killed() == sorted(KILL_POINTS), worker.log_tail()

    replay = ReplayRun.objects.get(pk=replay_id)
    version = ProcedureVersion.objects.get(pk=mined.version.pk)
    assert replay.status == ReplayStatus.DONE, replay.error
    assert replay.gate_report["passed"] is True
    assert replay.attempts == 5  # four claims died before the finish committed; the fifth finished
    assert ReplayCase.objects.filter(replay=replay).count() == 2 * len(version.held_out_run_ids)  # both arms
    assert version.status == VersionStatus.READY
    assert AuditEvent.objects.filter(verb="replay.finish", target_id=str(replay_id)).count() == 1
    assert AuditEvent.objects.filter(verb="replay.takeover", target_id=str(replay_id)).count() == 4
    assert worker.lines("finishes.log") == [f"{replay_id}:done"], "the finish ran more than once or was lost"
    # Certified once, in the finish's transaction: one certificate, one decision on its split.
    certificate = Certificate.objects.get(candidate_id=str(version.pk))
    assert certificate.replaces_id == str(active.pk) and replay.gate_report["certificate"]["id"] == certificate.pk
    assert SplitDecision.objects.filter(split=certificate.split).count() == 1
