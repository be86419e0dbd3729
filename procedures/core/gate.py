"""A regression gate over report metrics: every check must pass (trajectory-mining §4, application side).

Modes:
* `no_regression`: the value may be worse than the active version's by at most `tolerance` (absolute), in the
  metric's direction (`higher_is_better`). With no active version the check passes ("no active version"); with an
  active version that has no value for the metric it also passes ("active version has no value").
* `at_least` / `at_most`: an absolute floor or cap, inclusive.
Comparisons forgive float noise (relative 1e-9), so 0.7 passes "no_regression against 0.8 with tolerance 0.1".
A metric the candidate has no value for (absent, None, NaN, not a number) fails its check whatever the mode.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NO_REGRESSION = "no_regression"
AT_LEAST = "at_least"
AT_MOST = "at_most"
MODES = (NO_REGRESSION, AT_LEAST, AT_MOST)


@dataclass(frozen=True, kw_only=True)
class MetricCheck:
    """One rule of the gate: which metric, which mode, and its threshold or tolerance."""

    metric: str
    mode: str
    threshold: float | None = None
    tolerance: float = 0.0
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric.strip():
            raise ValueError("gate metric is required")
        if self.mode not in MODES:
            raise ValueError(f"gate mode must be one of {', '.join(MODES)}")
        if self.mode == NO_REGRESSION:
            if self.threshold is not None:
                raise ValueError("a no_regression check takes a tolerance, not a threshold")
            if _number(self.tolerance) is None or self.tolerance < 0:
                raise ValueError("gate tolerance must be a finite number >= 0")
        elif _number(self.threshold) is None:
            raise ValueError(f"an {self.mode} check needs a finite threshold")

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "threshold": self.threshold,
            "tolerance": self.tolerance,
            "higher_is_better": self.higher_is_better,
        }


@dataclass(frozen=True, kw_only=True)
class GateCheck:
    """The outcome of one `MetricCheck`. For no_regression, `threshold` is the bound derived from the baseline."""

    metric: str
    mode: str
    threshold: float | None
    value: float | None
    baseline: float | None
    passed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "threshold": self.threshold,
            "value": self.value,
            "baseline": self.baseline,
            "passed": self.passed,
            "reason": self.reason,
        }


@dataclass(frozen=True, kw_only=True)
class GateReport:
    passed: bool
    checks: tuple[GateCheck, ...]

    @property
    def failures(self) -> tuple[GateCheck, ...]:
        return tuple(check for check in self.checks if not check.passed)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [check.to_dict() for check in self.checks]}


def regression_gate(
    metrics: Mapping[str, Any], baseline: Mapping[str, Any] | None, checks: Sequence[MetricCheck]
) -> GateReport:
    """Apply every check; the gate passes only when there is at least one check and all of them pass."""
    if not checks:
        raise ValueError("a gate needs at least one check")
    results = tuple(_apply(check, metrics, baseline) for check in checks)
    return GateReport(passed=all(result.passed for result in results), checks=results)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _at_least(value: float, bound: float) -> bool:
    """value >= bound, forgiving float noise such as 0.8 - 0.1 < 0.7."""
    return value >= bound or math.isclose(value, bound, rel_tol=1e-9, abs_tol=1e-12)


def _apply(check: MetricCheck, metrics: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> GateCheck:
    value = _number(metrics.get(check.metric))
    base = None if baseline is None else _number(baseline.get(check.metric))

    def result(passed: bool, reason: str, threshold: float | None = check.threshold) -> GateCheck:
        return GateCheck(
            metric=check.metric,
            mode=check.mode,
            threshold=threshold,
            value=value,
            baseline=base,
            passed=passed,
            reason=reason,
        )

    if value is None:
        return result(False, f"{check.metric} has no value")
    if check.mode == AT_LEAST:
        passed = _at_least(value, check.threshold)
        return result(passed, f"{value:g} {'>=' if passed else '<'} {check.threshold:g}")
    if check.mode == AT_MOST:
        passed = _at_least(check.threshold, value)
        return result(passed, f"{value:g} {'<=' if passed else '>'} {check.threshold:g}")
    if baseline is None:
        return result(True, "no active version")
    if base is None:
        return result(True, "active version has no value")
    if check.higher_is_better:
        bound = base - check.tolerance
        passed = _at_least(value, bound)
        return result(passed, f"{value:g} {'>=' if passed else '<'} {bound:g} (active {base:g})", bound)
    bound = base + check.tolerance
    passed = _at_least(bound, value)
    return result(passed, f"{value:g} {'<=' if passed else '>'} {bound:g} (active {base:g})", bound)
