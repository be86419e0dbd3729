"""Evolution runs for the page tests, created and driven through the real services.

Under the test settings Celery is eager, but a page test runs inside one database transaction, so the step that
`evolution_start` enqueues on commit never fires there; in a live-server (transactional) test it does, and the whole
run then finishes inside the start request. `run_to_end` makes a run finish either way: it runs the steps in process
until the run has ended (a no-op for a run that already has).
"""

from __future__ import annotations

from accounts.services import Actor
from graphs import services as graph_services
from graphs.evolution.services import evolution_start, evolution_step
from graphs.models import EvolutionRun

TASK = "Answer two-hop questions: find the bridge entity, then the answer."
MAX_STEPS = 200


def make_lab(slug: str = "lab"):
    """A workspace seeded with the skeleton (its seed active)."""
    return graph_services.workspace_create(actor=Actor.system(), slug=slug, task_description=TASK).workspace


def start(workspace, user=None, *, rounds: int = 4, evaluator: str = "two-hop", **options) -> EvolutionRun:
    actor = Actor(user=user) if user is not None else Actor.system()
    return evolution_start(actor=actor, workspace=workspace, rounds=rounds, evaluator=evaluator, **options)


def run_to_end(run: EvolutionRun) -> EvolutionRun:
    """Step the run in process until it has ended; the refreshed run."""
    for _ in range(MAX_STEPS):
        run.refresh_from_db()
        if run.is_finished:
            return run
        result = evolution_step(run_id=run.pk, worker="t")
        if result is None:
            run.refresh_from_db()
            if not run.is_finished:
                raise AssertionError(f"run {run.pk} is held by another worker ({run.lease_owner!r})")
    raise AssertionError(f"run {run.pk} did not end in {MAX_STEPS} steps")
