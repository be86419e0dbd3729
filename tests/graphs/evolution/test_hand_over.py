"""A round's record hands the run over to its next step: it gives the lease up (the holder's name stays), clears the
stage and a transient error's message, and the step writes on the run afterwards only what the record did not say."""

import pytest
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import Actor
from graphs.core.evolve import _Evolution
from graphs.evolution import services, stores
from graphs.evolution.services import evolution_start, evolution_step
from graphs.models import EvolutionRun
from graphs.services import workspace_create

pytestmark = pytest.mark.django_db(transaction=True)
TASK = "two-hop question answering over a small corpus"


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    """The next steps the steps send (not run: the test runs each step itself)."""
    steps: list[int] = []
    monkeypatch.setattr(services, "_enqueue_on_commit", lambda run_id, countdown=None: steps.append(run_id))
    return steps


def a_run(operator, rounds: int = 4) -> EvolutionRun:
    workspace = workspace_create(actor=Actor.system(), slug="lab", task_description=TASK).workspace
    run = evolution_start(actor=Actor(user=operator), workspace=workspace, rounds=rounds, evaluator="two-hop")
    evolution_step(run_id=run.pk, worker="first")  # the baseline: its step hands the run over by itself
    return run


def test_a_recorded_round_leaves_the_run_free_for_the_next_step_at_once(operator, sent):
    run = a_run(operator)
    EvolutionRun.objects.filter(pk=run.pk).update(error="TimeoutError: the model did not answer")
    sent.clear()

    result = evolution_step(run_id=run.pk, worker="first")

    run.refresh_from_db()
    assert result is not None and result.next_step and sent == [run.pk]
    assert run.rounds_done == 1 and run.status == EvolutionRun.Status.RUNNING
    assert run.lease_owner == "first" and run.lease_expires_at <= timezone.now()  # given up, the name kept
    assert (run.stage, run.error, run.attempts) == ("", "", 0)
    assert services.lease_wait(run.pk) <= 0
    assert evolution_step(run_id=run.pk, worker="second") is not None  # taken at once, not after the lease
    run.refresh_from_db()
    assert run.rounds_done == 2


def test_the_step_that_recorded_the_last_round_ends_the_run_under_the_name_it_kept(operator, sent):
    run = a_run(operator, rounds=1)

    result = evolution_step(run_id=run.pk, worker="first")

    run.refresh_from_db()
    assert result is not None and not result.next_step
    assert (run.status, run.stopped_reason, run.rounds_done) == ("succeeded", "max_rounds", 1)
    assert (run.lease_owner, run.lease_expires_at) == ("", None)
    assert AuditEvent.objects.filter(verb="evolution.finish", target_id=str(run.pk)).count() == 1


def test_a_run_taken_by_another_worker_after_the_record_is_ended_by_that_worker(operator, sent, monkeypatch):
    """The reaper may send a run whose record gave its lease up before the recording step ended it; whoever holds
    the run then ends it, once, from the record."""
    run = a_run(operator, rounds=1)
    save = stores.RunRejectionStore.save

    def recorded_then_taken(self, memory, *, expected_ref, iteration):
        ref = save(self, memory, expected_ref=expected_ref, iteration=iteration)
        assert services._claim(run.pk, "reaped", timezone.now()) is not None
        return ref

    monkeypatch.setattr(stores.RunRejectionStore, "save", recorded_then_taken)
    evolution_step(run_id=run.pk, worker="first")
    run.refresh_from_db()
    assert run.status == EvolutionRun.Status.RUNNING and run.lease_owner == "reaped"  # not ended by "first"

    monkeypatch.setattr(stores.RunRejectionStore, "save", save)
    EvolutionRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now())  # "reaped" died meanwhile
    evolution_step(run_id=run.pk, worker="third")

    run.refresh_from_db()
    assert (run.status, run.stopped_reason, run.rounds_done) == ("succeeded", "max_rounds", 1)
    assert run.rounds.count() == 1
    assert AuditEvent.objects.filter(verb="evolution.finish", target_id=str(run.pk)).count() == 1


def test_a_warning_after_the_record_is_written_with_the_hand_over(operator, sent, monkeypatch):
    run = a_run(operator)
    stop_reason = _Evolution._stop_reason

    def warning_after_the_record(self, report, decision):
        self.warn("a warning the record did not see")
        return stop_reason(self, report, decision)

    monkeypatch.setattr(_Evolution, "_stop_reason", warning_after_the_record)
    evolution_step(run_id=run.pk, worker="first")

    run.refresh_from_db()
    assert run.warnings[-1] == "a warning the record did not see"
    assert (run.lease_owner, run.lease_expires_at) == ("", None)
    assert run.rounds_done == 1 and run.status == EvolutionRun.Status.RUNNING
