"""Gates (spec §4): whether a measured candidate replaces the best graph so far.

`decide(best, candidate)` called with the same object twice is the perfect-score probe: it never accepts, and its
`stop` says whether the score is already perfect. The scalar gates compare mean scores, PairedGate bootstraps paired
per-task deltas, and ObjectiveGate judges named metrics with paired Hoeffding intervals and six dispositions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .documents import sha256_digest
from .evaluation import Decision, Evaluation, TaskOutcome
from .objectives import (
    LEXICOGRAPHIC,
    Interval,
    MetricSpec,
    ObjectiveContext,
    ObjectiveError,
    ObjectiveSpec,
    candidate_mean_interval,
    is_finite_number,
    paired_delta_interval,
)

SCALAR_DECIMALS = 4
OBJECTIVE_DECIMALS = 6

ACCEPTED = "accepted"
REJECTED = "rejected"
EQUIVALENT = "equivalent"
UNRESOLVED = "unresolved"
UNMEASURED = "unmeasured"
INVALID = "invalid"
DISPOSITIONS = (ACCEPTED, REJECTED, EQUIVALENT, UNRESOLVED, UNMEASURED, INVALID)
PROBE = "probe"

REASON_CODES = (
    "context_mismatch",
    "missing_context",
    "deferred_evaluation",
    "duplicate_task_ids",
    "incomplete_pairing",
    "invalid_value",
    "insufficient_units",
    "constraint_violation",
    "constraint_unmeasured",
    "constraint_unresolved",
    "metric_unmeasured",
    "improvement",
    "metric_regression",
    "interval_too_wide",
    "all_metrics_equivalent",
    "trade_off",
)
INSUFFICIENT_PAIRED_TASKS = "insufficient_paired_tasks"

BASELINE = "baseline"
CANDIDATE = "candidate"
SIDES = (BASELINE, CANDIDATE)


@runtime_checkable
class Gate(Protocol):
    """Decides whether `candidate` replaces `best`; `best is candidate` is the perfect-score probe."""

    def decide(self, best: Evaluation, candidate: Evaluation) -> Decision: ...


def _check_perfect(perfect: Any) -> float | None:
    if perfect is None:
        return None
    if not is_finite_number(perfect) or not 0.0 <= perfect <= 1.0:
        raise ValueError(f"perfect must be None or a score in [0, 1], not {perfect!r}")
    return float(perfect)


def _reaches(score: float | None, perfect: float | None) -> bool:
    return perfect is not None and score is not None and score >= perfect


def _rounded(value: float | None, decimals: int) -> float | None:
    return None if value is None else round(float(value), decimals)


# ---------------------------------------------------------------------------------------------------------------------
# Scalar gates


def _scalar_scores(best: Evaluation, candidate: Evaluation) -> tuple[float, float]:
    if best.score is None or candidate.score is None:
        raise ValueError(f"a scalar gate needs both scores; got best={best.score!r}, candidate={candidate.score!r}")
    return best.score, candidate.score


def _scalar_decision(best: float, candidate: float, accepted: bool, perfect: float | None) -> Decision:
    feedback = {
        "best_score": _rounded(best, SCALAR_DECIMALS),
        "candidate_score": _rounded(candidate, SCALAR_DECIMALS),
        "accepted": accepted,
    }
    return Decision(accepted=accepted, feedback=feedback, stop=_reaches(candidate if accepted else best, perfect))


class TieAcceptingGate:
    """The paper's rule and the default: accept iff candidate ≥ best (a tie is accepted)."""

    def __init__(self, perfect: float | None = None) -> None:
        self.perfect = _check_perfect(perfect)

    def decide(self, best: Evaluation, candidate: Evaluation) -> Decision:
        best_score, candidate_score = _scalar_scores(best, candidate)
        accepted = best is not candidate and candidate_score >= best_score
        return _scalar_decision(best_score, candidate_score, accepted, self.perfect)

    def __repr__(self) -> str:
        return f"TieAcceptingGate(perfect={self.perfect!r})"


class StrictImprovementGate:
    """Accept iff candidate > best + minimum_delta (a tie is rejected)."""

    def __init__(self, perfect: float | None = 1.0, minimum_delta: float = 0.0) -> None:
        self.perfect = _check_perfect(perfect)
        if not is_finite_number(minimum_delta) or minimum_delta < 0:
            raise ValueError(f"minimum_delta must be a finite number ≥ 0, not {minimum_delta!r}")
        self.minimum_delta = float(minimum_delta)

    def decide(self, best: Evaluation, candidate: Evaluation) -> Decision:
        best_score, candidate_score = _scalar_scores(best, candidate)
        accepted = best is not candidate and candidate_score > best_score + self.minimum_delta
        return _scalar_decision(best_score, candidate_score, accepted, self.perfect)

    def __repr__(self) -> str:
        return f"StrictImprovementGate(perfect={self.perfect!r}, minimum_delta={self.minimum_delta!r})"


# ---------------------------------------------------------------------------------------------------------------------
# Paired bootstrap gate


def _score_or_mean(evaluation: Evaluation) -> float | None:
    if evaluation.score is not None:
        return evaluation.score
    outcomes = evaluation.per_task
    return math.fsum(o.score for o in outcomes) / len(outcomes) if outcomes else None


def _scores_by_task(outcomes: Sequence[TaskOutcome]) -> dict[str, float]:
    """Score per task id; a task reported more than once counts with its mean score."""
    grouped: dict[str, list[float]] = {}
    for outcome in outcomes:
        grouped.setdefault(outcome.task_id, []).append(outcome.score)
    return {task_id: math.fsum(scores) / len(scores) for task_id, scores in grouped.items()}


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer, not {value!r}")
    return value


class PairedGate:
    """Pairs tasks by id and bootstraps the mean paired delta; accepts a non-negative mean that wins often enough."""

    def __init__(
        self,
        min_win_probability: float = 0.9,
        min_tasks: int = 20,
        resamples: int = 2000,
        seed: int = 17,
        perfect: float | None = 1.0,
    ) -> None:
        if not is_finite_number(min_win_probability) or not 0.5 <= min_win_probability <= 1.0:
            raise ValueError(f"min_win_probability must lie in [0.5, 1], not {min_win_probability!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, not {seed!r}")
        self.min_win_probability = float(min_win_probability)
        self.min_tasks = _positive_int(min_tasks, "min_tasks")
        self.resamples = _positive_int(resamples, "resamples")
        self.seed = seed
        self.perfect = _check_perfect(perfect)

    def decide(self, best: Evaluation, candidate: Evaluation) -> Decision:
        best_score, candidate_score = _score_or_mean(best), _score_or_mean(candidate)
        scores = {
            "best_score": _rounded(best_score, SCALAR_DECIMALS),
            "candidate_score": _rounded(candidate_score, SCALAR_DECIMALS),
        }
        if best is candidate:
            return Decision(accepted=False, feedback=scores, stop=_reaches(best_score, self.perfect))
        if not best.per_task or not candidate.per_task:
            raise ValueError("PairedGate needs per_task outcomes on both evaluations")
        deltas = self._paired_deltas(best, candidate)
        if len(deltas) < self.min_tasks:
            feedback = {"reason": INSUFFICIENT_PAIRED_TASKS, "paired_tasks": len(deltas), "min_tasks": self.min_tasks}
            return Decision(accepted=False, feedback={**feedback, **scores}, stop=_reaches(best_score, self.perfect))
        means = self._bootstrap_means(deltas, self._rng(best.ref, candidate.ref))
        mean_delta = float(np.mean(deltas))
        win_probability = float(np.mean(means >= 0.0))
        accepted = mean_delta >= 0.0 and win_probability >= self.min_win_probability
        low, high = np.percentile(means, [2.5, 97.5])
        feedback = {
            "paired_tasks": len(deltas),
            "mean_delta": _rounded(mean_delta, SCALAR_DECIMALS),
            "delta_95_ci": [_rounded(low, SCALAR_DECIMALS), _rounded(high, SCALAR_DECIMALS)],
            "win_probability": _rounded(win_probability, SCALAR_DECIMALS),
            "min_win_probability": self.min_win_probability,
            **scores,
        }
        stop = _reaches(candidate_score if accepted else best_score, self.perfect)
        return Decision(accepted=accepted, feedback=feedback, stop=stop)

    @staticmethod
    def _paired_deltas(best: Evaluation, candidate: Evaluation) -> np.ndarray:
        base, cand = _scores_by_task(best.per_task), _scores_by_task(candidate.per_task)
        shared = sorted(base.keys() & cand.keys())
        return np.array([cand[task_id] - base[task_id] for task_id in shared], dtype=float)

    def _rng(self, best_ref: str | None, candidate_ref: str | None) -> np.random.Generator:
        """Seeded from the gate's seed and the two refs, so a decision is reproducible."""
        digest = sha256_digest(["paired_gate", self.seed, best_ref, candidate_ref])
        return np.random.default_rng(int(digest[:16], 16))

    def _bootstrap_means(self, deltas: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """`resamples` means of resampled deltas, drawn in blocks of about a million indices."""
        n = len(deltas)
        block = max(1, 1_000_000 // n)
        means = []
        for start in range(0, self.resamples, block):
            rows = min(block, self.resamples - start)
            means.append(deltas[rng.integers(0, n, size=(rows, n))].mean(axis=1))
        return np.concatenate(means)

    def __repr__(self) -> str:
        return (
            f"PairedGate(min_win_probability={self.min_win_probability!r}, min_tasks={self.min_tasks!r}, "
            f"resamples={self.resamples!r}, seed={self.seed!r}, perfect={self.perfect!r})"
        )


# ---------------------------------------------------------------------------------------------------------------------
# Objective gate


@dataclass
class _Verdict:
    """The end of the check order: a disposition, its reasons and the metric that decided, if one did."""

    disposition: str
    reasons: list[str]
    decisive_metric: str | None = None


@dataclass
class _Measured:
    """One metric's numbers: paired oriented deltas and candidate values, over the expected ids in order."""

    spec: MetricSpec
    known: bool
    deltas: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    candidate: list[float] = field(default_factory=list)
    oriented: Interval | None = None
    candidate_interval: Interval | None = None

    @property
    def name(self) -> str:
        return self.spec.name


def _as_context(value: Any) -> Any:
    if isinstance(value, Mapping):
        try:
            return ObjectiveContext.from_document(value)
        except (ObjectiveError, TypeError):
            return value
    return value


def _json_value(value: Any) -> Any:
    """A reported invalid value, kept JSON-safe: finite numbers, bools, strings and None as they are."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float) and is_finite_number(value):
        return value
    return repr(value)


def _r(value: float | None) -> float | None:
    return _rounded(value, OBJECTIVE_DECIMALS)


class ObjectiveGate:
    """Judges named metrics under one objective and one context (spec §4), in check order 1–8.

    Only the disposition `accepted` accepts; `stop` is always False, so perfect quality never ends a run.
    """

    def __init__(self, objective: ObjectiveSpec, context: ObjectiveContext) -> None:
        if not isinstance(objective, ObjectiveSpec):
            raise ObjectiveError(f"ObjectiveGate needs an ObjectiveSpec, not {type(objective).__name__}")
        if not isinstance(context, ObjectiveContext):
            raise ObjectiveError(f"ObjectiveGate needs an ObjectiveContext, not {type(context).__name__}")
        if context.objective_digest != objective.digest:
            raise ObjectiveError("the context is bound to another objective (objective_digest differs)")
        self.objective = objective
        self.context = context
        self.objective_digest = objective.digest
        self.context_digest = context.digest

    def __repr__(self) -> str:
        return f"ObjectiveGate(objective={self.objective_digest[:12]}, context={self.context_digest[:12]})"

    def decide(self, best: Evaluation, candidate: Evaluation) -> Decision:
        feedback = self._base_feedback(best, candidate)
        if best is candidate:
            return self._finish(feedback, _Verdict(PROBE, []))
        sides = {BASELINE: best, CANDIDATE: candidate}
        verdict = (
            self._check_context(sides, feedback) or self._check_deferred(sides) or self._check_pairing(sides, feedback)
        )
        if verdict:
            return self._finish(feedback, verdict)
        values, verdict = self._read_values(sides, feedback)
        if verdict:
            return self._finish(feedback, verdict)
        if self.context.units < self.objective.min_units:
            return self._finish(feedback, _Verdict(UNRESOLVED, ["insufficient_units"]))
        measured = self._measure(values)
        feedback["metrics"] = [self._metric_report(item) for item in measured]
        verdict = self._check_constraints(measured, feedback) or self._apply_mode(measured, feedback["metrics"])
        return self._finish(feedback, verdict)

    # -- feedback ------------------------------------------------------------------------------------------------------

    def _base_feedback(self, best: Evaluation, candidate: Evaluation) -> dict[str, Any]:
        objective, expected = self.objective, set(self.context.expected_task_ids)
        return {
            "schema": 1,
            "disposition": None,
            "reasons": [],
            "objective_digest": self.objective_digest,
            "context_digest": self.context_digest,
            "mode": objective.mode,
            "baseline_ref": best.ref,
            "candidate_ref": candidate.ref,
            "coverage": {
                "expected": self.context.units,
                BASELINE: len(expected & {o.task_id for o in best.per_task}),
                CANDIDATE: len(expected & {o.task_id for o in candidate.per_task}),
            },
            "uncertainty": {
                "method": objective.uncertainty,
                "alpha": objective.alpha,
                "intervals": objective.interval_count(),
                "alpha_interval": objective.alpha_interval,
                "units": self.context.units,
                "min_units": objective.min_units,
            },
            "metrics": [],
            "unknown_metrics": [],
            "decisive_metric": None,
            "constraints": {},
        }

    @staticmethod
    def _finish(feedback: dict[str, Any], verdict: _Verdict) -> Decision:
        feedback["disposition"] = verdict.disposition
        feedback["reasons"] = list(verdict.reasons)
        feedback["decisive_metric"] = verdict.decisive_metric
        return Decision(accepted=verdict.disposition == ACCEPTED, feedback=feedback, stop=False)

    # -- checks 1 to 4 -------------------------------------------------------------------------------------------------

    def _check_context(self, sides: Mapping[str, Evaluation], feedback: dict[str, Any]) -> _Verdict | None:
        """1. Each side's context must equal the gate's."""
        mismatch = {}
        for side, evaluation in sides.items():
            context = _as_context(evaluation.objective_context)
            if context != self.context:
                mismatch[side] = self.context.mismatches(context) or ["objective_context"]
        if not mismatch:
            return None
        feedback["context_mismatch"] = mismatch
        reasons = []
        if any(names == ["missing_context"] for names in mismatch.values()):
            reasons.append("missing_context")
        if any(names != ["missing_context"] for names in mismatch.values()):
            reasons.append("context_mismatch")
        return _Verdict(INVALID, reasons)

    @staticmethod
    def _check_deferred(sides: Mapping[str, Evaluation]) -> _Verdict | None:
        """2. An empty per_task on either side is a deferred evaluation."""
        if any(not evaluation.per_task for evaluation in sides.values()):
            return _Verdict(UNMEASURED, ["deferred_evaluation"])
        return None

    def _check_pairing(self, sides: Mapping[str, Evaluation], feedback: dict[str, Any]) -> _Verdict | None:
        """3. Every expected id exactly once on each side, and nothing else."""
        expected = set(self.context.expected_task_ids)
        pairing, reasons = {}, []
        for side, evaluation in sides.items():
            counts = Counter(outcome.task_id for outcome in evaluation.per_task)
            problems = {
                "duplicates": sorted(task_id for task_id, count in counts.items() if count > 1),
                "missing": sorted(expected - counts.keys()),
                "unexpected": sorted(counts.keys() - expected),
            }
            if any(problems.values()):
                pairing[side] = problems
            if problems["duplicates"] and "duplicate_task_ids" not in reasons:
                reasons.append("duplicate_task_ids")
        if any(problems["missing"] or problems["unexpected"] for problems in pairing.values()):
            reasons.append("incomplete_pairing")
        if not pairing:
            return None
        feedback["pairing"] = pairing
        return _Verdict(INVALID, reasons)

    def _read_values(
        self, sides: Mapping[str, Evaluation], feedback: dict[str, Any]
    ) -> tuple[dict[str, dict[str, dict[str, float]]], _Verdict | None]:
        """4. Each metric's value per side and task: null (or absent) is unknown; anything else must be in bounds."""
        values: dict[str, dict[str, dict[str, float]]] = {side: {} for side in sides}
        unknown: set[str] = set()
        invalid: list[dict[str, Any]] = []
        for side, evaluation in sides.items():
            for outcome in evaluation.per_task:
                for metric in self.objective.metrics:
                    value = (outcome.metrics or {}).get(metric.name)
                    if value is None:
                        unknown.add(metric.name)
                    elif metric.in_bounds(value):
                        values[side].setdefault(metric.name, {})[outcome.task_id] = float(value)
                    else:
                        invalid.append(
                            {
                                "side": side,
                                "task_id": outcome.task_id,
                                "metric": metric.name,
                                "value": _json_value(value),
                            }
                        )
        feedback["unknown_metrics"] = [metric.name for metric in self.objective.metrics if metric.name in unknown]
        if invalid:
            feedback["invalid_values"] = invalid
            return values, _Verdict(INVALID, ["invalid_value"])
        return values, None

    # -- 6. the per-metric report --------------------------------------------------------------------------------------

    def _measure(self, values: Mapping[str, Mapping[str, Mapping[str, float]]]) -> list[_Measured]:
        unknown = set()
        for metric in self.objective.metrics:
            if any(len(values[side].get(metric.name, {})) < self.context.units for side in SIDES):
                unknown.add(metric.name)
        return [self._measure_one(metric, values, metric.name not in unknown) for metric in self.objective.metrics]

    def _measure_one(self, metric: MetricSpec, values: Mapping[str, Any], known: bool) -> _Measured:
        if not known:
            return _Measured(metric, known=False)
        ids = self.context.expected_task_ids
        baseline = [values[BASELINE][metric.name][task_id] for task_id in ids]
        candidate = [values[CANDIDATE][metric.name][task_id] for task_id in ids]
        deltas = [metric.oriented(cand, base) for cand, base in zip(candidate, baseline, strict=True)]
        alpha_interval = self.objective.alpha_interval
        return _Measured(
            metric,
            known=True,
            deltas=deltas,
            baseline=baseline,
            candidate=candidate,
            oriented=paired_delta_interval(deltas, metric.width, alpha_interval),
            candidate_interval=candidate_mean_interval(candidate, metric.width, alpha_interval),
        )

    @staticmethod
    def _metric_report(item: _Measured) -> dict[str, Any]:
        metric = item.spec
        report: dict[str, Any] = {
            "name": metric.name,
            "role": metric.role,
            "direction": metric.direction,
            "unit": metric.unit,
            "thresholds": metric.thresholds(),
            "known": item.known,
            "informational": not metric.optimized,
            "reached": False,
            "verdict": None,
        }
        if item.known:
            n = len(item.deltas)
            mean_delta = math.fsum(c - b for c, b in zip(item.candidate, item.baseline, strict=True)) / n
            report.update(
                baseline_mean=_r(math.fsum(item.baseline) / n),
                candidate_mean=_r(math.fsum(item.candidate) / n),
                mean_delta=_r(mean_delta),
                oriented_mean_delta=_r(item.oriented.mean),
                oriented_interval=[_r(item.oriented.lower), _r(item.oriented.upper)],
                radius=_r(item.oriented.radius),
            )
        return report

    # -- 7. absolute constraints ---------------------------------------------------------------------------------------

    def _check_constraints(self, measured: Sequence[_Measured], feedback: dict[str, Any]) -> _Verdict | None:
        constrained = [item for item in measured if item.spec.optimized and item.spec.constrained]
        statuses = {item.name: self._constraint_status(item) for item in constrained}
        feedback["constraints"] = statuses
        for status, disposition, reason in (
            ("violated", REJECTED, "constraint_violation"),
            ("unmeasured", UNMEASURED, "constraint_unmeasured"),
            ("unresolved", UNRESOLVED, "constraint_unresolved"),
        ):
            names = [name for name, value in statuses.items() if value["status"] == status]
            if names:
                return _Verdict(disposition, [reason], names[0])
        return None

    @staticmethod
    def _constraint_status(item: _Measured) -> dict[str, Any]:
        if not item.known:
            return {"status": "unmeasured"}
        metric, interval = item.spec, item.candidate_interval
        floor, ceiling = metric.floor, metric.ceiling
        violated = (floor is not None and interval.upper < floor) or (ceiling is not None and interval.lower > ceiling)
        unresolved = (floor is not None and interval.lower < floor) or (
            ceiling is not None and interval.upper > ceiling
        )
        status = "violated" if violated else "unresolved" if unresolved else "satisfied"
        return {
            "status": status,
            "floor": metric.floor,
            "ceiling": metric.ceiling,
            "candidate_mean": _r(interval.mean),
            "interval": [_r(interval.lower), _r(interval.upper)],
        }

    # -- 8. the mode rule ----------------------------------------------------------------------------------------------

    def _apply_mode(self, measured: Sequence[_Measured], reports: list[dict[str, Any]]) -> _Verdict:
        optimized = [(item, report) for item, report in zip(measured, reports, strict=True) if item.spec.optimized]
        if self.objective.mode == LEXICOGRAPHIC:
            return _lexicographic(optimized)
        return _pareto(optimized)


def _lexicographic(optimized: Sequence[tuple[_Measured, dict[str, Any]]]) -> _Verdict:
    """Walk the optimized metrics in order; the first that is not shown equivalent decides."""
    for item, report in optimized:
        report["reached"] = True
        verdict = _lexicographic_verdict(item)
        report["verdict"] = verdict
        if verdict != EQUIVALENT:
            return _Verdict(*_LEXICOGRAPHIC_OUTCOMES[verdict], item.name)
    return _Verdict(EQUIVALENT, ["all_metrics_equivalent"])


_LEXICOGRAPHIC_OUTCOMES = {
    UNMEASURED: (UNMEASURED, ["metric_unmeasured"]),
    "improved": (ACCEPTED, ["improvement"]),
    "regressed": (REJECTED, ["metric_regression"]),
    UNRESOLVED: (UNRESOLVED, ["interval_too_wide"]),
}


def _lexicographic_verdict(item: _Measured) -> str:
    if not item.known:
        return UNMEASURED
    interval, metric = item.oriented, item.spec
    if interval.lower > metric.min_improvement:
        return "improved"
    if interval.upper < 0:
        return "regressed"
    if interval.within(metric.equivalence_margin):
        return EQUIVALENT
    return UNRESOLVED


def _pareto_verdict(item: _Measured) -> str:
    interval, metric = item.oriented, item.spec
    if interval.lower > metric.min_improvement:
        return "improved"
    if interval.upper < -metric.non_regression_margin:
        return "regressed"
    if interval.lower >= 0:
        return "held"
    if interval.lower >= -metric.non_regression_margin:
        return "tolerated_loss"
    return UNRESOLVED


def _pareto(optimized: Sequence[tuple[_Measured, dict[str, Any]]]) -> _Verdict:
    """Accept an improvement with every metric protected; a regression next to an improvement is a trade-off."""
    verdicts = {}
    for item, report in optimized:
        report["reached"] = True
        report["verdict"] = verdicts[item.name] = _pareto_verdict(item) if item.known else UNMEASURED
    unknown = [name for name, verdict in verdicts.items() if verdict == UNMEASURED]
    if unknown:
        return _Verdict(UNMEASURED, ["metric_unmeasured"], unknown[0])
    improved = [name for name, verdict in verdicts.items() if verdict == "improved"]
    regressed = [name for name, verdict in verdicts.items() if verdict == "regressed"]
    protected = all(item.oriented.lower >= -item.spec.non_regression_margin for item, _ in optimized)
    if improved and protected:
        return _Verdict(ACCEPTED, ["improvement"], improved[0])
    if regressed:
        return _Verdict(REJECTED, ["trade_off" if improved else "metric_regression"], regressed[0])
    if all(item.oriented.within(item.spec.equivalence_margin) for item, _ in optimized):
        return _Verdict(EQUIVALENT, ["all_metrics_equivalent"])
    wide = [item.name for item, _ in optimized if not item.oriented.within(item.spec.equivalence_margin)]
    return _Verdict(UNRESOLVED, ["interval_too_wide"], wide[0])
