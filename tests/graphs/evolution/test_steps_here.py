"""A step task goes on with its run's next steps for a time slice (WAYMARK_EVOLUTION_SLICE_SECONDS) instead of sending
each as a message; once the slice is over the next step goes out as a message, so a long run shares the workers."""

import pytest
from celery import signals
from celery.contrib.testing.worker import start_worker

import graphs.tasks
from accounts.services import Actor
from config.celery import app
from graphs.evolution import services
from graphs.evolution.services import StepsHere, evolution_start
from graphs.models import EvolutionRun
from graphs.services import workspace_create
from tests.faults import broker_url, point_app_at, restore_app, wait_for

from .records import run_record

TASK = "two-hop question answering over a small corpus"
OUTCOMES = ["accepted", "structural_failure", "rejected", "duplicate_candidate"]


# -- the offer --------------------------------------------------------------------------------------------------------


def test_an_open_offer_keeps_its_own_runs_next_step_once_per_step():
    with StepsHere(7, 60) as here:
        assert StepsHere.keep(7)
        assert not StepsHere.keep(7)  # one next step per step: a second hand-over is sent
        assert here.take() and not here.take()
        assert not StepsHere.keep(8)  # another run's next step is sent
        assert StepsHere.keep(7) and here.take()
    assert not StepsHere.keep(7)  # no offer open: sent


def test_an_offer_whose_slice_is_over_keeps_nothing():
    with StepsHere(7, 0) as here:
        assert not StepsHere.keep(7)
        assert not here.take()


def test_an_inner_offer_hides_the_outer_one_until_it_closes():
    with StepsHere(7, 60) as outer:
        with StepsHere(8, 60) as inner:
            assert not StepsHere.keep(7)
            assert StepsHere.keep(8) and inner.take()
        assert StepsHere.keep(7) and outer.take()


# -- the task ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def messages(monkeypatch) -> list[tuple[int, float | None]]:
    """The step messages sent (not delivered: the test runs the task itself)."""
    sent: list[tuple[int, float | None]] = []
    monkeypatch.setattr(graphs.tasks.evolution_step, "delay", lambda run_id: sent.append((run_id, None)))
    monkeypatch.setattr(
        graphs.tasks.evolution_step, "apply_async", lambda args, countdown=None: sent.append((args[0], countdown))
    )
    return sent


def a_run(operator, slug: str, rounds: int = 4) -> EvolutionRun:
    workspace = workspace_create(actor=Actor.system(), slug=slug, task_description=TASK).workspace
    return evolution_start(
        actor=Actor(user=operator), workspace=workspace, rounds=rounds, evaluator="two-hop", enqueue=False
    )


def test_one_task_runs_every_step_of_a_run_within_its_slice(transactional_db, operator, messages):
    run = a_run(operator, "lab")

    graphs.tasks.evolution_step.run(run.pk)

    run.refresh_from_db()
    assert (run.status, run.stopped_reason, run.rounds_done) == ("succeeded", "max_rounds", 4)
    assert list(run.rounds.values_list("outcome", flat=True)) == OUTCOMES
    assert messages == []  # each step handed the run on to the task itself


def test_a_task_whose_slice_is_over_sends_the_next_step(transactional_db, operator, messages, settings):
    settings.WAYMARK_EVOLUTION_SLICE_SECONDS = 0
    run = a_run(operator, "lab")

    graphs.tasks.evolution_step.run(run.pk)

    run.refresh_from_db()
    assert run.rounds_done == 0 and run.best is not None  # the baseline only
    assert messages == [(run.pk, None)]
    wait = services.lease_wait(run.pk)
    assert wait is None or wait <= 0  # handed over: the message's step takes the run at once


def test_the_steps_a_task_keeps_record_what_one_message_a_step_records(transactional_db, operator, messages, settings):
    kept = a_run(operator, "kept")
    graphs.tasks.evolution_step.run(kept.pk)
    settings.WAYMARK_EVOLUTION_SLICE_SECONDS = 0
    sent = a_run(operator, "sent")
    for _ in range(5):  # the baseline and four rounds, one task each
        graphs.tasks.evolution_step.run(sent.pk)
    assert len(messages) == 4  # after the baseline and rounds 1-3; round 4's step ended the run
    kept.refresh_from_db()
    sent.refresh_from_db()
    assert sent.is_finished and run_record(kept) == run_record(sent)


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.parametrize(("slice_seconds", "tasks"), [(60, 1), (0, 5)])
def test_a_worker_takes_one_message_a_slice(transactional_db, operator, settings, slice_seconds, tasks):
    settings.WAYMARK_EVOLUTION_SLICE_SECONDS = slice_seconds
    started: list[str] = []

    def count(sender=None, **kwargs) -> None:
        if sender is not None and sender.name == "graphs.evolution_step":
            started.append(sender.name)

    signals.task_prerun.connect(count, weak=False)
    saved = point_app_at(broker_url(13))
    try:
        run = a_run(operator, "lab")
        with start_worker(app, perform_ping_check=False, pool="solo", shutdown_timeout=20):
            graphs.tasks.evolution_step.delay(run.pk)
            assert wait_for(lambda: EvolutionRun.objects.get(pk=run.pk).is_finished, 60), "the run did not finish"
    finally:
        restore_app(saved)
        signals.task_prerun.disconnect(count)
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == ("succeeded", "max_rounds"), run.error
    assert list(run.rounds.values_list("outcome", flat=True)) == OUTCOMES
    assert len(started) == tasks
