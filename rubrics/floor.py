"""The rubric floor of a procedure's replay gate: runs an agent made while replaying a candidate procedure are judged
by the model judges under the active rubric of the procedure's intent, and the floor passes only when every run
scores at least the floor overall with no required failure.

procedures' live replay calls `rubric_floor_check` (procedures may import rubrics; rubrics imports no procedures
module). It runs
the judges inline, outside any transaction (each judge is its own ModelCall, as in a judging job), so the replay's
settling task decides the gate with the scores in hand. A run already judged under the version (a succeeded judging
job) is not judged again; a run whose judging job is open elsewhere makes the result `pending`, and the caller leaves
the replay running until a later settle finds the job finished.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .models import Rubric, RubricJob, RubricJobStatus, RubricScoreRow
from .runs import intent_key
from .services import judges_setting, rubric_judge_for_gate

CHECK = "rubric_floor"


@dataclass(frozen=True)
class RunFloorCheck:
    """One replayed run against the floor: its overall, required failures and missing dimensions."""

    run_id: int
    overall: float | None
    required_failures: tuple[str, ...]
    missing: tuple[str, ...]
    passed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "overall": self.overall,
            "required_failures": list(self.required_failures),
            "missing": list(self.missing),
            "passed": self.passed,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class FloorResult:
    """applied=False: nothing was judged (no active rubric) and the gate is left as it is. pending=True: a run's
    judging is still open elsewhere; the caller decides nothing yet."""

    floor: float
    applied: bool
    passed: bool
    reason: str
    rubric_key: str = ""
    rubric_version: int | None = None
    rubric_version_id: int | None = None
    runs: tuple[RunFloorCheck, ...] = field(default_factory=tuple)
    pending: bool = False

    @property
    def lowest(self) -> float | None:
        values = [run.overall for run in self.runs if run.overall is not None]
        return min(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "floor": self.floor,
            "applied": self.applied,
            "passed": self.passed,
            "reason": self.reason,
            "rubric_key": self.rubric_key,
            "rubric_version": self.rubric_version,
            "rubric_version_id": self.rubric_version_id,
            "lowest": self.lowest,
            "runs": [run.to_dict() for run in self.runs],
        }

    def as_check(self) -> dict[str, Any]:
        """The floor as one row of a regression gate report (same keys as procedures.core.gate.GateCheck)."""
        return {
            "metric": CHECK,
            "mode": "at_least",
            "threshold": self.floor,
            "value": self.lowest,
            "baseline": None,
            "passed": self.passed,
            "reason": self.reason,
        }


def _at_least(value: float, bound: float) -> bool:
    return value >= bound or math.isclose(value, bound, rel_tol=1e-9, abs_tol=1e-12)


def _run_check(run_id: int, job: RubricJob, score: RubricScoreRow | None, floor: float) -> RunFloorCheck:
    if job.status != RubricJobStatus.SUCCEEDED or score is None:
        reason = f"not scored: {job.error or 'the judges gave no assessment'}"
        return RunFloorCheck(run_id, None, (), (), False, reason)
    failures = tuple(score.required_failures)
    overall = float(score.overall)
    problems = []
    if failures:
        problems.append(f"required failures: {', '.join(failures)}")
    if not _at_least(overall, floor):
        problems.append(f"overall {overall:.2f} < {floor:g}")
    reason = "; ".join(problems) if problems else f"overall {overall:.2f} >= {floor:g}"
    return RunFloorCheck(run_id, overall, failures, tuple(score.missing_dimensions), not problems, reason)


def rubric_floor_check(*, intent: str, run_ids: Sequence[int], floor: float, judges: int | None = None) -> FloorResult:
    """Judge `run_ids` under the active rubric of `intent` and hold them to `floor` (see the module docstring).
    No active rubric: not applied. No run to judge: fails (nothing shows the floor is met)."""
    key = intent_key(intent)
    rubric = Rubric.objects.select_related("active_version__rubric").filter(key=key).first() if key else None
    version = rubric.active_version if rubric is not None else None
    if version is None:
        return FloorResult(floor=floor, applied=False, passed=True, reason=f"no active rubric for {key!r}")
    identity = {"rubric_key": key, "rubric_version": version.number, "rubric_version_id": version.pk}
    run_ids = sorted(set(run_ids))
    if not run_ids:
        return FloorResult(floor=floor, applied=True, passed=False, reason="no replayed run to judge", **identity)
    judges = judges or judges_setting()
    jobs = {}
    for run_id in run_ids:
        job = rubric_judge_for_gate(run_id, version, judges)
        if job is None:
            return FloorResult(
                floor=floor,
                applied=True,
                passed=False,
                pending=True,
                reason=f"run {run_id} is being judged",
                **identity,
            )
        jobs[run_id] = job
    scores = {row.run_id: row for row in RubricScoreRow.objects.filter(run_id__in=run_ids, version=version)}
    runs = tuple(_run_check(run_id, jobs[run_id], scores.get(run_id), floor) for run_id in run_ids)
    failing = [run for run in runs if not run.passed]
    if failing:
        reason = f"{len(failing)} of {len(runs)} run(s) below the floor: " + "; ".join(
            f"run {run.run_id}: {run.reason}" for run in failing[:5]
        )
    else:
        reason = f"{len(runs)} run(s) judged under {key} v{version.number}, all >= {floor:g} with no required failure"
    return FloorResult(floor=floor, applied=True, passed=not failing, reason=reason, runs=runs, **identity)
