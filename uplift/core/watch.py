"""The watch after activation: an always-valid test of canary against control, looked at as often as wanted.

Each run made under a watched parent lands in one arm (canary: the candidate; control: the version it replaced) with
an outcome in [0, 1] per metric (success 1/0; score, or the success when the run has none). The watch asks, after
every new batch of runs, whether the difference of means Δ = mean(canary) − mean(control) is known to be below 0 (a
regression: roll back) or above −margin (non-inferior: promote).

**The test: an asymptotic confidence sequence** (Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas, "Time-uniform
central limit theory and asymptotic confidence sequences", Annals of Statistics 2024) for Δ, the Gaussian-mixture
boundary (Robbins' normal mixture) on the difference of the two arms' running means with plug-in variances:

    V = s²_canary / n_canary + s²_control / n_control          (the variance of the estimated Δ)
    radius = sqrt( 2 · V · (V + τ²) / τ² · log( sqrt((V + τ²) / V) / α ) )

valid at every look simultaneously as the runs accumulate (asymptotically: the plug-in variance and the CLT), so
looking after each batch does not inflate the error. τ² sets where the boundary is tightest; it is tuned to the
variance expected after `tuned_runs` canary runs (the paper's ρ rule). Each metric gets α/2 (union bound), so the
chance that either metric's sequence ever excludes its true Δ is at most α.

Why not the betting interval the certificates use (exact for every n): the difference of two arms needs one
sequence per arm, joined by a union bound, and at a 10% canary share the canary's sequence alone is about twice as
wide as this one, which would miss −10-point regressions within 2,000 canary runs. The asymptotic sequence's error
is checked by simulation under repeated looks (tests/uplift/core/test_watch.py, `manage.py simulate_watch`).

Small samples: no decision is taken before each arm has `min_runs` runs, and a proportion's variance is taken with
one pseudo-success and one pseudo-failure added (never 0 after a streak of identical outcomes).

**Decisions** (`decide`), in order:
* roll back: for some metric the upper end of the sequence is below 0 (the canary is worse, significantly);
* promote: the policy's metric's lower end is above −margin (the certificate's non-inferiority margin), or the
  canary has reached `max_canary_runs` without a regression;
* expire: the window is over (the caller says so) with too few runs to decide;
* otherwise go on watching.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

METRICS = ("success", "score")


@dataclass(frozen=True)
class WatchPolicy:
    alpha: float = 0.05
    margin: float = 0.02  # promote once the lower end of Δ (the policy metric) is above −margin
    metric: str = "success"
    min_runs: int = 30  # per arm, before any decision
    max_canary_runs: int = 2000  # promote without a signal after this many canary runs
    tuned_runs: int = 500  # canary runs the boundary is tightest around

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be between 0 and 1")
        if not 0 <= self.margin <= 1:
            raise ValueError("the margin must be between 0 and 1")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}")
        if self.min_runs < 2 or self.max_canary_runs < self.min_runs or self.tuned_runs < 1:
            raise ValueError("min_runs ≥ 2, max_canary_runs ≥ min_runs and tuned_runs ≥ 1")

    def to_document(self) -> dict:
        return {
            "alpha": self.alpha,
            "margin": self.margin,
            "metric": self.metric,
            "min_runs": self.min_runs,
            "max_canary_runs": self.max_canary_runs,
            "tuned_runs": self.tuned_runs,
        }

    @classmethod
    def from_document(cls, document: dict) -> WatchPolicy:
        return cls(**{key: document[key] for key in cls().to_document() if key in document})


@dataclass
class ArmStats:
    """Running sums of one arm's outcomes on one metric: n, Σx, Σx²."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    def add(self, value: float) -> None:
        value = min(1.0, max(0.0, float(value)))
        self.n += 1
        self.total += value
        self.squares += value * value

    def extend(self, values: Sequence[float]) -> None:
        for value in values:
            self.add(value)

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def variance(self) -> float:
        """The plug-in variance with one pseudo-outcome at 0 and one at 1 added (> 0 for every n, → s² as n grows)."""
        n = self.n + 2
        mean = (self.total + 1) / n
        return max((self.squares + 1) / n - mean * mean, 1e-12)


@dataclass(frozen=True)
class Bound:
    metric: str
    estimate: float  # Δ = mean(canary) − mean(control)
    low: float
    high: float
    canary_mean: float
    control_mean: float
    canary_runs: int
    control_runs: int

    def to_document(self) -> dict:
        return {
            "metric": self.metric,
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "canary_mean": self.canary_mean,
            "control_mean": self.control_mean,
            "canary_runs": self.canary_runs,
            "control_runs": self.control_runs,
        }


def mixture_variance(alpha: float, expected_variance: float) -> float:
    """τ² putting the boundary's tightest point at `expected_variance` (Waudby-Smith et al.'s ρ rule:
    ρ² = (−2 log α + log(1 − 2 log α)) / t*, in the units of V)."""
    return expected_variance * (-2 * math.log(alpha) + math.log(1 - 2 * math.log(alpha)))


def radius(variance: float, alpha: float, tau2: float) -> float:
    """The normal-mixture boundary's half-width for an estimate of variance `variance` at level alpha."""
    return math.sqrt(
        2 * variance * (variance + tau2) / tau2 * math.log(math.sqrt((variance + tau2) / variance) / alpha)
    )


def bound(canary: ArmStats, control: ArmStats, *, metric: str, alpha: float, tuned_runs: int) -> Bound:
    """The confidence sequence for Δ on one metric at level alpha, after the runs counted so far."""
    if canary.n == 0 or control.n == 0:
        return Bound(metric, 0.0, -1.0, 1.0, canary.mean, control.mean, canary.n, control.n)
    variance = canary.variance / canary.n + control.variance / control.n
    expected = canary.variance / tuned_runs + control.variance / max(tuned_runs * control.n / canary.n, 1)
    r = radius(variance, alpha, mixture_variance(alpha, expected))
    estimate = canary.mean - control.mean
    return Bound(
        metric, estimate, max(-1.0, estimate - r), min(1.0, estimate + r), canary.mean, control.mean, canary.n,
        control.n,
    )  # fmt: skip


@dataclass(frozen=True)
class Decision:
    action: str  # "rollback", "promote", "expire" or "continue"
    reason: str
    bounds: tuple[Bound, ...]


def decide(stats: dict[str, tuple[ArmStats, ArmStats]], policy: WatchPolicy, *, window_over: bool = False) -> Decision:
    """What the watch does now, from each metric's (canary, control) sums."""
    alpha = policy.alpha / len(METRICS)
    bounds = tuple(
        bound(*stats[metric], metric=metric, alpha=alpha, tuned_runs=policy.tuned_runs) for metric in METRICS
    )
    canary_runs = min(b.canary_runs for b in bounds)
    control_runs = min(b.control_runs for b in bounds)
    enough = canary_runs >= policy.min_runs and control_runs >= policy.min_runs
    judged = next(b for b in bounds if b.metric == policy.metric)
    confidence = f"{1 - policy.alpha:.0%}"
    if enough:
        worse = [b for b in bounds if b.high < 0]
        if worse:
            b = worse[0]
            return Decision(
                "rollback",
                f"the canary is worse in {b.metric}: Δ {b.estimate * 100:+.1f} points, the {confidence} sequence"
                f" [{b.low * 100:+.1f}, {b.high * 100:+.1f}] lies below 0 ({b.canary_runs} canary, {b.control_runs}"
                " control runs)",
                bounds,
            )
        if judged.low > -policy.margin:
            return Decision(
                "promote",
                f"no worse than the control by more than {policy.margin * 100:g} points of {judged.metric}: the"
                f" {confidence} sequence's lower end is {judged.low * 100:+.1f} points ({judged.canary_runs} canary"
                f" runs)",
                bounds,
            )
        if canary_runs >= policy.max_canary_runs:
            return Decision(
                "promote",
                f"{canary_runs} canary runs without a regression (the limit is {policy.max_canary_runs}); Δ"
                f" {judged.estimate * 100:+.1f} points [{judged.low * 100:+.1f}, {judged.high * 100:+.1f}]",
                bounds,
            )
    if window_over:
        return Decision(
            "expire",
            f"the window ended with {canary_runs} canary and {control_runs} control runs"
            + ("" if enough else f" (a decision needs {policy.min_runs} in each arm)")
            + ": operators decide",
            bounds,
        )
    return Decision("continue", "watching", bounds)
