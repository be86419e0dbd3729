"""A graph revision's paired evaluation as a certificate's tasks (uplift.core.certificate): the same validation tasks
measured under the candidate and under the control (the revision it replaces, or no graph), paired by task id.

A task outcome's meta may say `answered: False` (an evaluation job no agent answered): that arm did not answer the
task (uplift's pairing rules: a control that did not answer leaves the task out, a candidate that did not answer
counts as a failure). `meta.run` names the run that answered, when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping

from uplift.core.certificate import ArmOutcome, PairedTask, paired_tasks

from .evaluation import Evaluation, TaskOutcome

__all__ = ["arm_outcome", "arms", "pair_evaluations", "run_ids"]


def _run_id(outcome: TaskOutcome) -> int | None:
    run = (outcome.meta or {}).get("run")
    return run if isinstance(run, int) and not isinstance(run, bool) else None


def arm_outcome(outcome: TaskOutcome) -> ArmOutcome:
    """One task of one arm: passed and score as measured, unanswered when the meta says so."""
    answered = (outcome.meta or {}).get("answered", True) is not False
    return ArmOutcome(passed=outcome.passed, score=outcome.score, answered=answered, run_id=_run_id(outcome))


def arms(evaluation: Evaluation) -> dict[str, ArmOutcome]:
    """Task id → outcome; ValueError when the evaluation measured one task twice (it cannot be paired)."""
    found: dict[str, ArmOutcome] = {}
    for outcome in evaluation.per_task:
        if outcome.task_id in found:
            raise ValueError(f"the evaluation measured task {outcome.task_id!r} twice: it cannot be paired")
        found[outcome.task_id] = arm_outcome(outcome)
    return found


def pair_evaluations(
    control: Evaluation, candidate: Evaluation, *, models: Mapping[str, str] | None = None
) -> list[PairedTask]:
    """Every task either arm measured, paired by id (a task one arm lacks is unanswered there); `models` gives a
    task's agent model."""
    return paired_tasks(arms(control), arms(candidate), models=models)


def run_ids(evaluation: Evaluation) -> dict[str, int]:
    """Task id → the id of the run that answered it (tasks answered by a stored run only)."""
    return {outcome.task_id: run for outcome in evaluation.per_task if (run := _run_id(outcome)) is not None}
