"""The with-versus-without certificate of a candidate: the same held-out tasks under the candidate and under the
version it replaces (or under no artifact), paired task by task.

Per task both outcomes (passed, score in [0, 1]); in total the repairs (failed → passed), the breakages
(passed → failed), the breakages on the critical tasks operators tagged, and the mean paired difference of success
and of score, each with a betting confidence interval (uplift.core.betting) at the level the split's reuse budget
leaves (uplift.core.reuse). A policy (uplift.core.policy) then says whether the certificate passes.

Pairing rules: a task the control arm did not answer cannot be compared and is left out (listed); a task the
candidate arm did not answer counts as a candidate failure with score 0 (the candidate has to prove itself). A
missing score is 1 for a pass and 0 for a failure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .betting import Interval, difference_interval

SCHEMA = 1


@dataclass(frozen=True)
class ArmOutcome:
    """What one arm did on one task. `answered` False: no run came back (the pass and score are then ignored)."""

    passed: bool = False
    score: float | None = None
    answered: bool = True
    run_id: int | None = None

    @property
    def value(self) -> float:
        if not self.answered:
            return 0.0
        if self.score is None:
            return 1.0 if self.passed else 0.0
        return min(1.0, max(0.0, float(self.score)))

    @property
    def success(self) -> bool:
        return self.answered and self.passed


@dataclass(frozen=True)
class PairedTask:
    task_id: str
    control: ArmOutcome
    candidate: ArmOutcome
    critical: bool = False
    model: str = ""  # the agent's model on this task (runs' metadata.model), "" when unknown

    @property
    def comparable(self) -> bool:
        return self.control.answered

    @property
    def outcome(self) -> str:
        """repair, breakage, both_passed or both_failed (of a comparable task)."""
        before, after = self.control.success, self.candidate.success
        if before == after:
            return "both_passed" if before else "both_failed"
        return "repair" if after else "breakage"


@dataclass(frozen=True)
class Difference:
    """A mean paired difference on [-1, 1] (candidate minus control) with its interval; mean None when no task
    could be compared (the interval is then the whole scale)."""

    mean: float | None
    low: float
    high: float

    @classmethod
    def of(cls, interval: Interval) -> Difference:
        mean = None if interval.n == 0 else interval.mean
        return cls(mean=mean, low=interval.low, high=interval.high)

    def to_document(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Certificate:
    n: int
    repairs: int
    breakages: int
    both_passed: int
    both_failed: int
    critical_breakages: tuple[str, ...]
    success: Difference
    score: Difference
    alpha: float
    excluded: tuple[str, ...]  # tasks the control arm did not answer
    candidate_unanswered: tuple[str, ...]
    models: tuple[str, ...]  # the agents' models the tasks were measured with, sorted
    tasks: tuple[PairedTask, ...] = field(repr=False, default=())

    @property
    def confidence(self) -> float:
        return 1 - self.alpha

    def difference(self, metric: str) -> Difference:
        if metric not in ("success", "score"):
            raise ValueError(f"unknown metric {metric!r}: success or score")
        return self.success if metric == "success" else self.score

    def totals(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "n": self.n,
            "repairs": self.repairs,
            "breakages": self.breakages,
            "both_passed": self.both_passed,
            "both_failed": self.both_failed,
            "critical_breakages": list(self.critical_breakages),
            "success": self.success.to_document(),
            "score": self.score.to_document(),
            "alpha": self.alpha,
            "confidence": self.confidence,
            "excluded": list(self.excluded),
            "candidate_unanswered": list(self.candidate_unanswered),
            "models": list(self.models),
        }

    def task_rows(self) -> list[dict[str, Any]]:
        """The per-task rows (task id, critical, model, outcome, both arms): computed once, a fresh list each call."""
        rows = self.__dict__.get("_task_rows")
        if rows is None:
            rows = self.__dict__["_task_rows"] = [_task_row(task) for task in self.tasks]
        return list(rows)


def _task_row(task: PairedTask) -> dict[str, Any]:
    control, candidate = task.control, task.candidate
    if not control.answered:
        outcome = "excluded"
    elif control.passed == (after := candidate.answered and candidate.passed):
        outcome = "both_passed" if after else "both_failed"
    else:
        outcome = "repair" if after else "breakage"
    return {
        "task_id": task.task_id,
        "critical": task.critical,
        "model": task.model,
        "outcome": outcome,
        "control": _arm_document(control),
        "candidate": _arm_document(candidate),
    }


def _arm_document(arm: ArmOutcome) -> dict[str, Any]:
    if not arm.answered:
        return {"passed": False, "score": None, "answered": False, "run_id": arm.run_id}
    score = arm.score
    value = (1.0 if arm.passed else 0.0) if score is None else min(1.0, max(0.0, float(score)))
    return {"passed": arm.passed, "score": value, "answered": True, "run_id": arm.run_id}


def betting_order(task_id: str) -> bytes:
    """The order the intervals read the pairs in: a hash of the task id, so it is fixed for a set of tasks and owes
    nothing to their outcomes (the betting interval is valid for an order chosen independently of the data; sorted
    by outcome it is not)."""
    return hashlib.sha256(f"waymark-certificate\0{task_id}".encode()).digest()


def certify(tasks: Iterable[PairedTask], *, alpha: float) -> Certificate:
    """The certificate of `tasks` at level 1 - alpha (the tasks are listed in the order given; the intervals read
    them in `betting_order`)."""
    tasks = tuple(tasks)
    seen: set[str] = set()
    for task in tasks:
        if task.task_id in seen:
            raise ValueError(f"task {task.task_id!r} is paired twice")
        seen.add(task.task_id)
    compared = sorted((task for task in tasks if task.control.answered), key=lambda task: betting_order(task.task_id))
    counts = {"repair": 0, "breakage": 0, "both_passed": 0, "both_failed": 0}
    success, score = [], []
    for task in compared:  # PairedTask.outcome and ArmOutcome.success/.value, inlined (10,000 tasks a certificate)
        control, candidate = task.control, task.candidate
        before, after = control.passed, candidate.answered and candidate.passed
        if before == after:
            counts["both_passed" if before else "both_failed"] += 1
        else:
            counts["repair" if after else "breakage"] += 1
        success.append(float(after) - float(before))
        score.append(candidate.value - control.value)
    return Certificate(
        n=len(compared),
        repairs=counts["repair"],
        breakages=counts["breakage"],
        both_passed=counts["both_passed"],
        both_failed=counts["both_failed"],
        critical_breakages=tuple(t.task_id for t in compared if t.critical and t.outcome == "breakage"),
        success=Difference.of(difference_interval(success, alpha)),
        score=Difference.of(difference_interval(score, alpha)),
        alpha=alpha,
        excluded=tuple(t.task_id for t in tasks if not t.comparable),
        candidate_unanswered=tuple(t.task_id for t in compared if not t.candidate.answered),
        models=tuple(sorted({t.model for t in compared if t.model})),
        tasks=tasks,
    )


def paired_tasks(
    control: Mapping[str, ArmOutcome],
    candidate: Mapping[str, ArmOutcome],
    *,
    critical: Iterable[str] = (),
    models: Mapping[str, str] | None = None,
) -> list[PairedTask]:
    """Pair two arms' outcomes by task id (sorted), every task of either arm: a task one arm lacks is unanswered
    there."""
    critical = set(critical)
    models = models or {}
    missing = ArmOutcome(answered=False)
    return [
        PairedTask(
            task_id=task_id,
            control=control.get(task_id, missing),
            candidate=candidate.get(task_id, missing),
            critical=task_id in critical,
            model=models.get(task_id, ""),
        )
        for task_id in sorted(set(control) | set(candidate), key=_natural)
    ]


def _natural(task_id: str) -> tuple:
    """Numeric ids in numeric order (run ids), others after them in text order."""
    return (0, int(task_id), "") if task_id.isdigit() else (1, 0, task_id)
