"""A step that keeps dying without progress fails the run with the last error it saw."""

import pytest

from accounts.services import Actor
from graphs.evolution.services import MAX_CRASHES, evolution_start, evolution_step
from graphs.models import EvolutionRun
from graphs.services import workspace_create

pytestmark = pytest.mark.django_db


def test_a_run_whose_step_keeps_dying_fails_with_the_last_error():
    workspace = workspace_create(actor=Actor.system(), slug="lab").workspace
    run = evolution_start(actor=Actor.system(), workspace=workspace, rounds=2, evaluator="two-hop", enqueue=False)
    EvolutionRun.objects.filter(pk=run.pk).update(
        attempts=MAX_CRASHES, error="ModelTimeout: the provider did not answer in time"
    )
    evolution_step(run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == ("failed", "crashed")
    assert run.error == (
        f"gave up after {MAX_CRASHES} attempts in a row without progress: ModelTimeout: the provider did not answer "
        "in time"
    )
    assert run.started_at is not None and run.finished_at is not None


def test_a_transient_error_releases_the_run_and_keeps_the_error_for_later(monkeypatch):
    from graphs.evolution import services

    workspace = workspace_create(actor=Actor.system(), slug="lab").workspace
    run = evolution_start(actor=Actor.system(), workspace=workspace, rounds=2, evaluator="two-hop", enqueue=False)

    def unreachable(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(services, "evolve", unreachable)
    with pytest.raises(ConnectionError):
        evolution_step(run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert run.status == "running" and run.lease_owner == "" and "broker unreachable" in run.error
    monkeypatch.undo()
    evolution_step(run_id=run.pk, worker="w2")
    run.refresh_from_db()
    assert run.baseline_score == 0.5 and run.error == ""
