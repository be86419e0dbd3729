"""Beat finds runs nobody is working on: a running run whose worker died (its lease ran out) and a queued run whose
first message was lost. A run a live worker holds, a fresh queued run and a finished run are left alone; a
redelivered message for a held run does nothing but wait for the lease."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import Actor
from graphs.evolution.services import evolution_runs_to_resume, evolution_start, evolution_step, lease_wait
from graphs.models import EvolutionRun
from graphs.services import workspace_create

pytestmark = pytest.mark.django_db


def run_in(slug: str, **fields) -> EvolutionRun:
    workspace = workspace_create(actor=Actor.system(), slug=slug).workspace
    run = evolution_start(actor=Actor.system(), workspace=workspace, rounds=2, evaluator="two-hop", enqueue=False)
    EvolutionRun.objects.filter(pk=run.pk).update(**fields)
    return run


def test_beat_resumes_only_the_runs_nobody_works_on():
    now = timezone.now()
    dead = run_in("dead", status="running", lease_owner="w1", lease_expires_at=now - timedelta(seconds=5))
    lost = run_in("lost", created_at=now - timedelta(minutes=5))
    run_in("held", status="running", lease_owner="w2", lease_expires_at=now + timedelta(minutes=4))
    run_in("fresh")
    run_in("done", status="succeeded", finished_at=now)
    assert sorted(evolution_runs_to_resume(now)) == sorted([dead.pk, lost.pk])


def test_a_redelivered_message_waits_for_the_lease_of_a_live_worker():
    held = run_in("held", status="running", lease_owner="w2", lease_expires_at=timezone.now() + timedelta(minutes=4))
    assert evolution_step(run_id=held.pk, worker="w3") is None
    held.refresh_from_db()
    assert held.lease_owner == "w2" and held.rounds_done == 0
    assert 200 < lease_wait(held.pk) <= 240


def test_the_next_worker_takes_over_a_run_whose_worker_died():
    dead = run_in("dead", status="running", lease_owner="w1", lease_expires_at=timezone.now() - timedelta(seconds=1))
    result = evolution_step(run_id=dead.pk, worker="w4")
    assert result is not None
    dead.refresh_from_db()
    assert dead.baseline_score == 0.5 and dead.attempts == 0
