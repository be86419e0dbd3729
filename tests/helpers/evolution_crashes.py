"""An evolution worker's death in process (issue 30): an exception no handler catches, raised once at a chosen point
(`die_once`), a run taken through one crash and its lease run out (`run_through_one_crash`), and the ledger the
four-round scenario must leave (`assert_ledger_of_the_scenario`)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from graphs.evolution.demo import run_inline
from graphs.models import EvolutionRun
from tests.graphs.evolution.records import run_record


class WorkerDied(BaseException):
    """A SIGKILL seen from inside: nothing after it runs and no `except Exception` handler sees it."""


def always(*args, **kwargs) -> bool:
    return True


def recording(iteration: int):
    """When RunRejectionStore.save records round `iteration`."""
    return lambda *args, **kwargs: kwargs["iteration"] == iteration


def die_once(monkeypatch, owner, name: str, *, before: bool = False, when=always) -> None:
    """Make `owner.name` kill the worker the first time `when(*args, **kwargs)` holds: after it returned (its
    transaction committed), or before it starts when `before`."""
    original = getattr(owner, name)
    died = []

    def dying(*args, **kwargs):
        fatal = not died and when(*args, **kwargs)
        if fatal:
            died.append(name)
        if fatal and before:
            raise WorkerDied(name)
        result = original(*args, **kwargs)
        if fatal:
            raise WorkerDied(name)
        return result

    monkeypatch.setattr(owner, name, dying)


def run_through_one_crash(run: EvolutionRun) -> EvolutionRun:
    """Run the steps until the worker dies, let its lease run out, and run the rest."""
    with pytest.raises(WorkerDied):
        run_inline(run)
    EvolutionRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    return run_inline(run)


def assert_ledger_of_the_scenario(run: EvolutionRun) -> None:
    """Rounds 1 (accepted) and 3 (rejected) scored on the validation split, each once; round 1's candidate was
    certified from its own evaluations (the retained skeleton is the active revision) as the split's second
    decision."""
    uplift = run_record(run)["uplift"]
    assert [decisions for _, _, decisions in uplift["splits"]] == [3]
    assert uplift["ledger"] == [(1, "evolution_round", True), (2, "certificate", True), (3, "evolution_round", False)]
    assert uplift["certifications"] == [("round", "done", 1, True, False)]
