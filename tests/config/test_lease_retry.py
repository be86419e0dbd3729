"""A step whose claim found its run held tries again when the lease runs out, including a lease that ran out between
the claim and the look at it (a wait of 0): else the run would wait for beat's reaper (a minute), and a fault test's
run, with no beat, for ever."""

from __future__ import annotations

import pytest

import graphs.tasks
import intents.tasks
from graphs import certification_services
from graphs.evolution import services as evolution_services
from intents import services as intent_services

CASES = [
    (graphs.tasks.evolution_step, evolution_services, "evolution_step"),
    (graphs.tasks.certification_step, certification_services, "certification_step"),
    (intents.tasks.intent_proposal_step, intent_services, "intent_proposal_step"),
]


@pytest.mark.parametrize(("task", "module", "step"), CASES)
@pytest.mark.parametrize(("wait", "countdown"), [(1.5, 2.5), (0.0, 1.0), (None, None)])
def test_a_held_run_is_tried_again_when_its_lease_runs_out(monkeypatch, task, module, step, wait, countdown):
    sent = []
    monkeypatch.setattr(module, step, lambda **kwargs: None)  # the claim found the run held (or finished)
    monkeypatch.setattr(module, "lease_wait", lambda run_id: wait)
    monkeypatch.setattr(task, "apply_async", lambda args, countdown: sent.append((args, countdown)))
    task.run(7)
    assert sent == ([] if countdown is None else [((7,), countdown)])
