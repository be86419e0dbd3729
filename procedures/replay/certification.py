"""A replay's with-versus-without certificate (uplift): the held-out cases paired across the replay's two arms.

* A live replay pairs the agent's run under the candidate with its run under the version it replaces, or, for a
  first version, with its run under no procedure at all (the `none` arm: the job carries no procedure).
* An offline replay pairs the candidate's judgment of each recorded run with the active version's judgment of the
  same run. A first version replayed offline has nothing to be paired with (a recorded run was not made without
  the candidate in any sense the judge can tell): it carries no certificate, and the review page says that a live
  replay certifies it.

A procedure has no graded per-case score, so a case's score is its success (1 or 0): the certificate's two
differences coincide. The task id is the held-out run's id; a task's model is its recorded run's
`metadata.model`. Issued inside finish_replay's transaction, so a replay finished twice (a worker killed and its
replay taken over) is certified once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from procedures import core
from trajectories.selectors import run_models
from uplift.core.certificate import ArmOutcome, PairedTask
from uplift.services import SplitExhausted, certificate_issue

KIND = "procedure_version"


def _arm(result: core.ArmResult | None, run_id: int | None = None) -> ArmOutcome:
    if result is None or not result.answered:
        return ArmOutcome(answered=False)
    return ArmOutcome(passed=result.passed, run_id=run_id)


class CasePairs:
    """Collects a replay's cases as paired tasks, one at a time (offline replays stream their cases)."""

    def __init__(self, *, against_none: bool = False) -> None:
        self.against_none = against_none
        self.tasks: list[PairedTask] = []

    def add(
        self,
        case: core.CaseResult,
        *,
        control: core.ArmResult | None = None,
        runs: Mapping[str, int | None] | None = None,
    ) -> None:
        """`control` is the none arm's result (live first versions); otherwise the case's active arm is."""
        runs = runs or {}
        other = control if self.against_none else case.active
        self.tasks.append(
            PairedTask(
                task_id=case.case_id,
                control=_arm(other, runs.get("control")),
                candidate=_arm(case.candidate, runs.get("candidate")),
            )
        )


def with_models(tasks: Iterable[PairedTask]) -> list[PairedTask]:
    """The tasks with each one's model: its held-out run's `metadata.model` (one query)."""
    tasks = list(tasks)
    models = run_models([int(task.task_id) for task in tasks])
    return [
        PairedTask(
            task_id=t.task_id,
            control=t.control,
            candidate=t.candidate,
            critical=t.critical,
            model=models.get(int(t.task_id), ""),
        )
        for t in tasks
    ]


def certify_replay(replay: Any, pairs: CasePairs, *, actor: Any) -> dict[str, Any]:
    """Inside finish_replay's transaction: issue the replay's certificate and return what its gate report says of
    it ({"id", "passed", "sentence", …}, or {"refused": why} when the split is exhausted)."""
    version = replay.version
    try:
        certificate = certificate_issue(
            actor=actor,
            kind=KIND,
            parent_key=str(version.procedure_id),
            candidate_id=str(version.pk),
            replaces_id=str(replay.compared_with_id) if replay.compared_with_id else None,
            tasks=with_models(pairs.tasks),
            drawn_at=replay.created_at,
            provenance={"replay": replay.pk, "mode": replay.mode},
        )
    except SplitExhausted as exhausted:
        return {"refused": str(exhausted), "passed": False, "split": exhausted.split.key[:12]}
    return {
        "id": certificate.pk,
        "passed": certificate.passed,
        "sentence": certificate.sentence,
        "reasons": certificate.reasons,
        "decision_number": certificate.decision_number,
    }
