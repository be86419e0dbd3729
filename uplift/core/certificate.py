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

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

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

    def task_columns(self) -> dict[str, Any]:
        """The per-task rows as columns (TASK_COLUMNS, one list each, in the tasks' order): what a certificate
        stores. About a seventh of the rows' JSON, and lists of plain values encode at C speed."""
        return task_columns(self.tasks)


TASK_COLUMNS = (
    "task_id", "critical", "model", "outcome",
    "control_passed", "control_score", "control_answered", "control_run_id",
    "candidate_passed", "candidate_score", "candidate_answered", "candidate_run_id",
)  # fmt: skip
_OUTCOME = {(True, True): "both_passed", (False, False): "both_failed", (False, True): "repair"}


def task_columns(tasks: Iterable[PairedTask]) -> dict[str, Any]:
    tasks = tuple(tasks)
    controls = [task.control for task in tasks]
    candidates = [task.candidate for task in tasks]
    c_answered = [arm.answered for arm in controls]
    k_answered = [arm.answered for arm in candidates]
    c_passed = [arm.passed and arm.answered for arm in controls]
    k_passed = [arm.passed and arm.answered for arm in candidates]
    outcome = [
        (_OUTCOME.get((before, after), "breakage") if answered else "excluded")
        for before, after, answered in zip(c_passed, k_passed, c_answered, strict=True)
    ]
    columns = {
        "task_id": [task.task_id for task in tasks],
        "critical": [task.critical for task in tasks],
        "model": [task.model for task in tasks],
        "outcome": outcome,
        "control_passed": c_passed,
        "control_score": [arm.value if arm.answered else None for arm in controls],
        "control_answered": c_answered,
        "control_run_id": [arm.run_id for arm in controls],
        "candidate_passed": k_passed,
        "candidate_score": [arm.value if arm.answered else None for arm in candidates],
        "candidate_answered": k_answered,
        "candidate_run_id": [arm.run_id for arm in candidates],
    }
    return {"schema": SCHEMA, "columns": columns}


def task_rows(document: Any) -> list[dict[str, Any]]:
    """The per-task rows of a stored certificate's tasks: its columns (task_columns), or the rows themselves as
    certificates stored them before columns."""
    if isinstance(document, list):
        return document
    if not isinstance(document, Mapping) or not isinstance(document.get("columns"), Mapping):
        return []
    columns = document["columns"]
    rows = []
    for values in zip(*(columns.get(name, ()) for name in TASK_COLUMNS), strict=False):
        row = dict(zip(TASK_COLUMNS, values, strict=True))
        rows.append(
            {
                "task_id": row["task_id"],
                "critical": row["critical"],
                "model": row["model"],
                "outcome": row["outcome"],
                "control": {key: row[f"control_{key}"] for key in ("passed", "score", "answered", "run_id")},
                "candidate": {key: row[f"candidate_{key}"] for key in ("passed", "score", "answered", "run_id")},
            }
        )
    return rows


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


def betting_order(task_id: str) -> tuple[int, str]:
    """The order the intervals read the pairs in: a hash of the task id (CRC-32, then the id for ties), so it is
    fixed for a set of tasks and owes nothing to their outcomes (the betting interval is valid for an order chosen
    independently of the data; sorted by outcome it is not). Not a secret: nothing is gained by choosing ids."""
    return zlib.crc32(task_id.encode()), task_id


def certify(tasks: Iterable[PairedTask], *, alpha: float, critical: Iterable[str] = ()) -> Certificate:
    """The certificate of `tasks` at level 1 - alpha (the tasks are listed in the order given; the intervals read
    them in `betting_order`); a task is critical when it says so or its id is in `critical`."""
    tasks = tuple(tasks)
    critical = frozenset(critical)
    if critical:
        tasks = tuple(
            task if task.critical or task.task_id not in critical else replace(task, critical=True) for task in tasks
        )
    ids = [task.task_id for task in tasks]
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        twice = next(task_id for task_id in ids if task_id in seen or seen.add(task_id))
        raise ValueError(f"task {twice!r} is paired twice")
    # Columns, not a loop with branches per task (10,000 tasks a certificate): ids are unique, so the sort never
    # compares two tasks themselves.
    answered = [task for task in tasks if task.control.answered]
    crc = np.fromiter((zlib.crc32(task.task_id.encode()) for task in answered), dtype=np.int64, count=len(answered))
    order = np.lexsort((np.array([task.task_id for task in answered], dtype=str), crc)) if answered else []
    compared = [answered[i] for i in order]  # betting_order, as arrays
    before = np.fromiter((task.control.passed for task in compared), dtype=float, count=len(compared))
    after = np.fromiter(
        (task.candidate.answered and task.candidate.passed for task in compared), dtype=float, count=len(compared)
    )
    success = after - before
    ungraded = all(task.control.score is None and task.candidate.score is None for task in compared)
    if ungraded:  # every score is its success: one difference twice, one interval does
        score = success
    else:
        score = np.fromiter((t.candidate.value - t.control.value for t in compared), dtype=float, count=len(compared))
    repairs, breakages = int(np.sum(success > 0)), int(np.sum(success < 0))
    both_passed = int(np.sum((before == 1) & (after == 1)))
    counts = {
        "repair": repairs,
        "breakage": breakages,
        "both_passed": both_passed,
        "both_failed": len(compared) - repairs - breakages - both_passed,
    }
    success_interval = difference_interval(success, alpha)
    score_interval = success_interval if ungraded else difference_interval(score, alpha)
    return Certificate(
        n=len(compared),
        repairs=counts["repair"],
        breakages=counts["breakage"],
        both_passed=counts["both_passed"],
        both_failed=counts["both_failed"],
        critical_breakages=tuple(t.task_id for t in compared if t.critical and t.outcome == "breakage"),
        success=Difference.of(success_interval),
        score=Difference.of(score_interval),
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
