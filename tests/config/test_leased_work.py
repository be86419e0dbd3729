"""Each app's leased work, as registered with common.liveness: `release` ends only the live leases of the owners it
is given, audits each as "<model>.lease_released" by the system actor, schedules the app's take-over once, and
does nothing the second time; beat's check finishes a dead worker's replay at once instead of after its lease."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import Actor
from common import liveness
from graphs.models import EvolutionRun
from intents.models import IntentProposalRun
from procedures.mining import services as mining_services
from procedures.models import ReplayRun, ReplayStatus
from procedures.replay.services import offline as offline_replay_services
from rubrics.models import Rubric, RubricJob, RubricJobKind
from tests.graphs.evolution_helpers import make_lab
from tests.procedures.factories import REFUND, queued_replay, refund_runs

pytestmark = pytest.mark.django_db
DEAD, LIVE = "box:101:task-a", "box:202:task-b"


def replay_held_by(owner, operator, capture):
    first = ReplayRun.objects.order_by("pk").first()
    if first is None:
        refund_runs()
        with capture(execute=False):
            replay = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND).replays[0]
    else:  # a second replay of the same version
        replay = queued_replay(first.version, compared_with=None, held_out=first.version.held_out_run_ids)
    assert offline_replay_services._claim(replay.pk, owner, actor=Actor.system()) is not None
    return ReplayRun, replay.pk


def run_held_by(owner, operator, capture):
    workspace = make_lab(f"lab-{owner.split(':')[1]}")
    run = EvolutionRun.objects.create(
        workspace=workspace, evaluator="two-hop", rounds_planned=1, status="running", lease_owner=owner,
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )  # fmt: skip
    return EvolutionRun, run.pk


def proposal_held_by(owner, operator, capture):
    run = IntentProposalRun.objects.create(
        status="running", lease_owner=owner, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    return IntentProposalRun, run.pk


def rubric_job_held_by(owner, operator, capture):
    rubric, _ = Rubric.objects.get_or_create(key="refunds")
    job = RubricJob.objects.create(
        kind=RubricJobKind.JUDGE, rubric=rubric, status="running", lease_owner=owner,
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )  # fmt: skip
    return RubricJob, job.pk


KINDS = {
    "procedures.replayrun": replay_held_by,
    "graphs.evolutionrun": run_held_by,
    "intents.intentproposalrun": proposal_held_by,
    "rubrics.rubricjob": rubric_job_held_by,
}


@pytest.mark.parametrize("label", KINDS)
def test_release_ends_only_the_dead_owners_leases_audited_and_takes_over_once(
    label, operator, django_capture_on_commit_callbacks
):
    model, dead_pk = KINDS[label](DEAD, operator, django_capture_on_commit_callbacks)
    _, live_pk = KINDS[label](LIVE, operator, django_capture_on_commit_callbacks)
    work = liveness.registered_leases()[label]
    assert {DEAD, LIVE} <= set(work.holders())
    live_lease = model.objects.get(pk=live_pk).lease_expires_at
    now = timezone.now()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert work.release(owners=[DEAD, "box:303:gone"], now=now) == 1
    assert len(callbacks) == 1  # the app's take-over (its reaper), enqueued once on commit

    dead, live = model.objects.get(pk=dead_pk), model.objects.get(pk=live_pk)
    assert (dead.lease_owner, dead.lease_expires_at, dead.status) == (DEAD, now, "running")
    assert (live.lease_owner, live.lease_expires_at) == (LIVE, live_lease)
    event = AuditEvent.objects.get(verb=f"{model._meta.model_name}.lease_released")
    assert (event.actor_label, event.target_type, event.target_id) == ("system", label, str(dead_pk))
    assert event.before["lease_owner"] == DEAD
    assert DEAD not in work.holders()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert work.release(owners=[DEAD], now=timezone.now()) == 0
    assert callbacks == []
    assert AuditEvent.objects.filter(verb=f"{model._meta.model_name}.lease_released").count() == 1


def test_a_replay_whose_worker_stopped_stamping_is_finished_at_the_next_check(
    operator, django_capture_on_commit_callbacks
):
    """The lease has 15 minutes left, but its owner's process is known dead: the check takes it over now."""
    cache.clear()
    _, pk = replay_held_by(DEAD, operator, django_capture_on_commit_callbacks)
    ReplayRun.objects.filter(pk=pk).update(lease_expires_at=timezone.now() + timedelta(minutes=15))
    liveness.stamp("box:101", at=time.time() - settings.WAYMARK_LIVENESS_STALE_SECONDS - 1)

    with django_capture_on_commit_callbacks(execute=True):  # eager: the reaper, then the replay's take-over
        released = liveness.dead_leases_release()

    assert released["procedures.replayrun"] == 1
    replay = ReplayRun.objects.get(pk=pk)
    assert replay.status == ReplayStatus.DONE and replay.attempts == 2
    assert AuditEvent.objects.filter(verb="replay.takeover", target_id=str(pk)).count() == 1
    assert AuditEvent.objects.get(verb="replay.takeover", target_id=str(pk)).before["lease_owner"] == DEAD


def test_a_replay_whose_owner_has_no_stamp_waits_for_its_lease(operator, django_capture_on_commit_callbacks):
    """An owner from before the stamps (or on a machine whose stamps this cache does not hold) is not known dead."""
    cache.clear()
    _, pk = replay_held_by(DEAD, operator, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert liveness.dead_leases_release()["procedures.replayrun"] == 0
    replay = ReplayRun.objects.get(pk=pk)
    assert (replay.status, replay.lease_owner, replay.attempts) == (ReplayStatus.RUNNING, DEAD, 1)
