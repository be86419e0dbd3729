"""Replay of a procedure on held-out cases: per-case results and the seed's report dimensions (pure).

Two modes:
* `offline`: each case is one recorded run; both the candidate and the active version are judged on it. A version
  *passes* a case when the run succeeded AND its tool sequence contains the version's tools in order.
* `live`: each case holds the run the agent produced with the candidate (`run`) and, when there is an active
  version, the run it produced with the active version (`active_run`). A version passes when its run succeeded.
A missing run is an unanswered case for that arm: reported as such, left out of every rate's denominator, never a
pass, never a regression.

Per arm, over answered cases: task_success (share passing), outcome_success (share whose run succeeded),
tool_correctness (share following the tools in order), grounding (retained arguments observed with equal values at
the step where the tool occurs, greedy leftmost alignment, pooled over cases), mean_steps, mean_tokens, mean_cost;
plus answered_rate and the number of counterexamples (failed runs that follow the procedure). The candidate's
metrics add `regressions` (cases the active version passes and the candidate fails, both answered) and
`improvements` (the reverse).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from trajectories.core import TrajectoryStep

from .frozen import thaw
from .gate import AT_LEAST, AT_MOST, NO_REGRESSION, MetricCheck
from .lcs import ToolCodes, subsequence_pattern
from .learn import ProcedureStep, align_leftmost

_tool = attrgetter("tool")

OFFLINE = "offline"
LIVE = "live"
MODES = (OFFLINE, LIVE)
OUTCOMES = ("success", "failure", "unknown")

HIGHER_IS_BETTER = {
    "task_success": True,
    "outcome_success": True,
    "tool_correctness": True,
    "grounding": True,
    "answered_rate": True,
    "mean_steps": False,
    "mean_tokens": False,
    "mean_cost": False,
    "counterexamples": False,
    "regressions": False,
}

DEFAULT_PROCEDURE_CHECKS: tuple[MetricCheck, ...] = (
    MetricCheck(metric="task_success", mode=NO_REGRESSION, tolerance=0.0),
    MetricCheck(metric="tool_correctness", mode=AT_LEAST, threshold=0.5),
    MetricCheck(metric="answered_rate", mode=AT_LEAST, threshold=0.8),
    MetricCheck(metric="regressions", mode=AT_MOST, threshold=0, higher_is_better=False),
    MetricCheck(metric="mean_steps", mode=NO_REGRESSION, tolerance=1.0, higher_is_better=False),
)


@dataclass(frozen=True, kw_only=True)
class CaseRun:
    """One run of a case: its outcome, steps, and token and money totals (summed from the steps when omitted)."""

    outcome: str
    steps: tuple[TrajectoryStep, ...]
    tokens: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"run outcome must be one of {', '.join(OUTCOMES)}")
        object.__setattr__(self, "steps", tuple(self.steps))
        if self.tokens is None:
            object.__setattr__(self, "tokens", sum(step.tokens for step in self.steps))
        if self.cost is None:
            object.__setattr__(self, "cost", sum(step.cost for step in self.steps))


@dataclass(frozen=True, kw_only=True)
class ReplayCase:
    case_id: str
    run: CaseRun | None
    active_run: CaseRun | None = None


@dataclass(frozen=True, kw_only=True)
class ArmResult:
    """How one version fared on one case. Everything but `answered` and `passed` is None when unanswered."""

    answered: bool
    passed: bool
    outcome: str | None = None
    follows: bool | None = None
    observed_arguments: int | None = None
    retained_arguments: int | None = None
    steps: int | None = None
    tokens: int | None = None
    cost: float | None = None

    @property
    def counterexample(self) -> bool:
        return self.outcome == "failure" and bool(self.follows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "answered": self.answered,
            "passed": self.passed,
            "outcome": self.outcome,
            "follows": self.follows,
            "observed_arguments": self.observed_arguments,
            "retained_arguments": self.retained_arguments,
            "steps": self.steps,
            "tokens": self.tokens,
            "cost": self.cost,
            "counterexample": self.counterexample,
        }


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    case_id: str
    candidate: ArmResult
    active: ArmResult | None = None

    @property
    def regression(self) -> bool:
        return self._both_answered() and self.active.passed and not self.candidate.passed

    @property
    def improvement(self) -> bool:
        return self._both_answered() and self.candidate.passed and not self.active.passed

    def _both_answered(self) -> bool:
        return self.active is not None and self.active.answered and self.candidate.answered

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "candidate": self.candidate.to_dict(),
            "active": None if self.active is None else self.active.to_dict(),
            "regression": self.regression,
            "improvement": self.improvement,
        }


@dataclass(frozen=True, kw_only=True)
class ReplayReport:
    mode: str
    cases: tuple[CaseResult, ...]
    metrics: Mapping[str, float | int | None]
    active_metrics: Mapping[str, float | int | None] | None

    @property
    def regressions(self) -> tuple[str, ...]:
        return tuple(case.case_id for case in self.cases if case.regression)

    @property
    def improvements(self) -> tuple[str, ...]:
        return tuple(case.case_id for case in self.cases if case.improvement)

    @property
    def counterexamples(self) -> tuple[str, ...]:
        return tuple(case.case_id for case in self.cases if case.candidate.counterexample)

    @property
    def unanswered(self) -> tuple[str, ...]:
        return tuple(case.case_id for case in self.cases if not case.candidate.answered)

    @property
    def active_unanswered(self) -> tuple[str, ...]:
        return tuple(case.case_id for case in self.cases if case.active is not None and not case.active.answered)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "metrics": dict(self.metrics),
            "active_metrics": None if self.active_metrics is None else dict(self.active_metrics),
            "regressions": list(self.regressions),
            "improvements": list(self.improvements),
            "counterexamples": list(self.counterexamples),
            "unanswered": list(self.unanswered),
            "active_unanswered": list(self.active_unanswered),
            "cases": [case.to_dict() for case in self.cases],
        }


def replay_procedure(
    procedure: Sequence[ProcedureStep],
    cases: Sequence[ReplayCase],
    *,
    active: Sequence[ProcedureStep] | None = None,
    mode: str = OFFLINE,
) -> ReplayReport:
    """Judge the candidate (and the active version, when given) on every case and summarise both."""
    if mode not in MODES:
        raise ValueError(f"replay mode must be one of {', '.join(MODES)}")
    procedure = _checked_procedure(procedure, "candidate")
    active = None if active is None else _checked_procedure(active, "active")
    seen: set[str] = set()
    for case in cases:
        if not isinstance(case.case_id, str) or not case.case_id.strip():
            raise ValueError("replay case id is required")
        if case.case_id in seen:
            raise ValueError(f"replay case {case.case_id!r} is repeated")
        seen.add(case.case_id)
        if mode == OFFLINE and case.active_run is not None:
            raise ValueError("offline replay judges both versions on the recorded run: active_run must be empty")
    codes = ToolCodes()
    judge_candidate = Judge(procedure, codes, mode=mode)
    judge_active = None if active is None else Judge(active, codes, mode=mode)
    results = tuple(
        CaseResult(
            case_id=case.case_id,
            candidate=judge_candidate(case.run),
            active=None if judge_active is None else judge_active(_active_run(case, mode)),
        )
        for case in cases
    )
    metrics = summarize([case.candidate for case in results])
    metrics["regressions"] = sum(case.regression for case in results)
    metrics["improvements"] = sum(case.improvement for case in results)
    active_metrics = None if active is None else summarize([case.active for case in results])
    return ReplayReport(mode=mode, cases=results, metrics=metrics, active_metrics=active_metrics)


class Judge:
    """Judges runs against one procedure: follows (one regex match on the run's tool codes, which also gives the
    greedy leftmost alignment), passes, grounding, cost."""

    def __init__(self, procedure: Sequence[ProcedureStep], codes: ToolCodes, *, mode: str) -> None:
        self.procedure = tuple(procedure)
        self.mode = mode
        self.codes = codes
        self.tools = tuple(step.tool for step in self.procedure)
        self.aligned_match = subsequence_pattern(codes.encode(self.tools), capture=True).match
        self.retained = sum(len(step.arguments) for step in self.procedure)

    def observed(self, aligned_arguments: Sequence[Mapping[str, Any]]) -> int:
        """Retained arguments observed, given the arguments of the aligned steps (see `observed_arguments`)."""
        return observed_in(self.procedure, aligned_arguments)

    def __call__(self, run: CaseRun | None) -> ArmResult:
        if run is None:
            return ArmResult(answered=False, passed=False)
        match = self.aligned_match(self.codes.encode(run.steps, _tool))
        follows = match is not None
        if follows:
            aligned = [run.steps[start] for start, _ in match.regs[1:]]
        else:
            aligned = align_leftmost(self.tools, run.steps)
        return ArmResult(
            answered=True,
            passed=run.outcome == "success" and (follows or self.mode == LIVE),
            outcome=run.outcome,
            follows=follows,
            observed_arguments=observed_arguments(self.procedure, aligned) if self.retained else 0,
            retained_arguments=self.retained,
            steps=len(run.steps),
            tokens=run.tokens,
            cost=run.cost,
        )


def observed_arguments(procedure: Sequence[ProcedureStep], aligned: Sequence[TrajectoryStep]) -> int:
    """Retained arguments seen with an equal value at the aligned step (steps past the alignment see nothing)."""
    return observed_in(procedure, [step.arguments for step in aligned])


def observed_in(procedure: Sequence[ProcedureStep], aligned_arguments: Sequence[Mapping[str, Any]]) -> int:
    """`observed_arguments` given the aligned steps' arguments only."""
    observed = 0
    for wanted, present in zip(procedure, aligned_arguments, strict=False):
        observed += sum(1 for key, value in wanted.arguments.items() if key in present and _same(present[key], value))
    return observed


def summarize(arms: Sequence[ArmResult]) -> dict[str, float | int | None]:
    answered = [arm for arm in arms if arm.answered]
    count = len(answered)
    retained = sum(arm.retained_arguments for arm in answered)

    def share(values: Sequence[bool]) -> float | None:
        return sum(values) / count if count else None

    def mean(values: Sequence[float]) -> float | None:
        return sum(values) / count if count else None

    return {
        "cases": len(arms),
        "answered": count,
        "answered_rate": count / len(arms) if arms else None,
        "task_success": share([arm.passed for arm in answered]),
        "outcome_success": share([arm.outcome == "success" for arm in answered]),
        "tool_correctness": share([bool(arm.follows) for arm in answered]),
        "grounding": sum(arm.observed_arguments for arm in answered) / retained if retained else None,
        "mean_steps": mean([arm.steps for arm in answered]),
        "mean_tokens": mean([arm.tokens for arm in answered]),
        "mean_cost": mean([arm.cost for arm in answered]),
        "counterexamples": sum(arm.counterexample for arm in answered),
    }


def _same(seen: Any, retained: Any) -> bool:
    return thaw(seen) == thaw(retained)


def _active_run(case: ReplayCase, mode: str) -> CaseRun | None:
    return case.run if mode == OFFLINE else case.active_run


def _checked_procedure(procedure: Sequence[ProcedureStep], which: str) -> tuple[ProcedureStep, ...]:
    steps = tuple(getattr(procedure, "steps", procedure))
    if not steps or not all(isinstance(step, ProcedureStep) for step in steps):
        raise ValueError(f"the {which} procedure must be a non-empty sequence of procedure steps")
    return steps
