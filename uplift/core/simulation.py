"""The watch after activation, calibrated by simulation (issue 27, item 5; `manage.py simulate_watch`).

A population of synthetic artifacts with known true effects goes through what a real one does: a certificate from
held-out paired tasks (the real `uplift.core.certificate.certify`, judged by the default `uplift.core.policy`), then
live traffic split by the real canary assignment (`uplift.core.canary.arm_for` on random run keys) and watched by the
real sequential test (`uplift.core.watch.decide`, looked at every `look_every` canary runs) until it decides, the
traffic running on to a horizon fixed in advance on which the realized live uplift is measured. Every
artifact is activated as a canary whatever its certificate said, so the watch is measured on regressions the
certificate would have stopped too (the worst case for the watch; the certificate's pass rate per class is reported).

**The agents.** A task has a difficulty z ~ N(0, 1); a run of a task under an arm has the latent quality

    L = a_arm + spread · z + e,   e ~ N(0, 1) fresh per run

and succeeds when L > 0; its graded score is logistic((L + η) / score_scale), η ~ N(0, score_noise²), so score and
success are correlated and both metrics of the watch are exercised. The success rate of an arm is
Φ(a_arm / sqrt(1 + spread²)), so a_arm is set from the rate wanted: the true effect on success is exactly the drawn
effect; the true effect on score is computed by Gauss–Hermite quadrature (L + η is normal). A held-out task is run
under both arms with the same z (the pair shares its difficulty, so most pairs are ties, as in real certificates);
a live run is a fresh task.

**The population** (a cycle of ten, so the classes' counts are exact for multiples of ten): three helpful (+3..+15
points, whole points, uniform), three neutral (0), two harmful (−3..−15) and two at exactly −10 points (the
regression the issue's figures are about). The control's success rate is uniform on 0.5..0.9 (for a helpful
artifact on 0.5..min(0.9, 0.97 − effect), so that the candidate's rate stays below 0.97). Artifact i draws from its
own generator seeded (seed, i): a smaller population is a prefix of a larger one, and a seed gives the same figures
on every machine (the canary assignment is a hash).

**Live traffic.** Runs come in blocks: a random 64-bit run key each, its arm by `arm_for(parent, key, share)`, its
outcome by its arm. The watch's running sums are the sums of the runs served up to each look (exactly what
`ArmStats.add` would hold), and `decide` is asked after every `look_every` canary runs; at `max_canary_runs` the
window is over.

**The realized live uplift** is measured on a horizon fixed before the canary starts: the canary's observed mean
minus the control's over the first H = `max_canary_runs` canary runs and the control runs served alongside them (at
the canary share, about H · (1 − share) / share of them). It is drawn from the same agents and the same run keys
through the same assignment whether or not the watch has stopped by then: the watch decides on a prefix of that
traffic (the same prefix whatever the horizon, so its decisions do not depend on it). The certificate predicts the
artifact's effect on the population of runs; a mean over a fixed number of runs estimates that effect without
selection, whereas the watch's own estimate at its stop is selected by the stop (it stops when the running estimate
is far from 0, so an early promotion overstates the effect and an early rollback understates it). That estimate at
the stop is kept as a secondary figure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .canary import CANARY, arm_for
from .certificate import ArmOutcome, PairedTask, certify
from .policy import Policy, judge
from .watch import METRICS, ArmStats, Decision, WatchPolicy, decide

HELPFUL = "helpful"
NEUTRAL = "neutral"
HARMFUL = "harmful"
REGRESSION = "regression"  # exactly −10 points
CLASSES = (HELPFUL, NEUTRAL, HARMFUL, REGRESSION)
CYCLE = (HELPFUL, HELPFUL, HELPFUL, NEUTRAL, NEUTRAL, NEUTRAL, HARMFUL, HARMFUL, REGRESSION, REGRESSION)
CLASS_LABELS = {
    HELPFUL: "helpful (+3..+15)",
    NEUTRAL: "neutral (0)",
    HARMFUL: "harmful (−3..−15)",
    REGRESSION: "regression (−10)",
}
REGRESSION_POINTS = -10
_NORMAL = statistics.NormalDist()
_HERMITE = np.polynomial.hermite_e.hermegauss(64)  # nodes and weights for E[f(X)], X ~ N(0, 1)


@dataclass(frozen=True)
class Settings:
    artifacts: int = 2000
    seed: int = 0
    canary_share: float = 0.1
    max_canary_runs: int = 2000
    alpha: float = 0.05  # the watch's
    held_out: int = 200  # paired tasks per certificate
    certificate_alpha: float = 0.10  # 90% intervals
    look_every: int = 20  # canary runs between looks
    spread: float = 2.0  # the spread of task difficulty (shared by a pair)
    score_noise: float = 0.5
    score_scale: float = 1.5
    block: int = 4096  # live runs drawn at a time

    def __post_init__(self) -> None:
        if self.artifacts < 1 or self.held_out < 1 or self.look_every < 1 or self.block < 1:
            raise ValueError("artifacts, held_out, look_every and block must be at least 1")
        if self.seed < 0:
            raise ValueError("the seed is a non-negative integer")
        if not 0 < self.canary_share < 1:
            raise ValueError("the canary share must be between 0 and 1")
        if not 0 < self.certificate_alpha < 1:
            raise ValueError("the certificate's alpha must be between 0 and 1")
        self.watch_policy()  # its own checks

    def watch_policy(self) -> WatchPolicy:
        return WatchPolicy(alpha=self.alpha, max_canary_runs=self.max_canary_runs)


@dataclass(frozen=True)
class Artifact:
    index: int
    kind: str
    points: int  # the true effect on success, in points
    base: float  # the control's success rate
    control_intercept: float
    canary_intercept: float
    score_effect: float  # the true effect on score, on [−1, 1]

    @property
    def effect(self) -> float:
        return self.points / 100

    @property
    def parent(self) -> str:
        return f"simulated-artifact-{self.index}"

    def true_effect(self, metric: str) -> float:
        return self.effect if metric == "success" else self.score_effect


@dataclass(frozen=True)
class Result:
    artifact: Artifact
    certificate: dict[str, tuple[float, float, float]]  # metric -> (mean, low, high)
    certified: bool  # passes the default policy
    action: str
    reason: str
    canary_runs: int  # served up to the decision
    control_runs: int
    horizon: dict[str, float]  # metric -> the realized live uplift over the first max_canary_runs canary runs
    horizon_control_runs: int  # the control runs served alongside them
    at_stop: dict[str, float]  # metric -> the watch's estimate at its decision (selected by the stop)

    def covers_horizon(self, metric: str) -> bool:
        _, low, high = self.certificate[metric]
        return low <= self.horizon[metric] <= high

    def covers_at_stop(self, metric: str) -> bool:
        _, low, high = self.certificate[metric]
        return low <= self.at_stop[metric] <= high

    def covers_truth(self, metric: str) -> bool:
        _, low, high = self.certificate[metric]
        return low <= self.artifact.true_effect(metric) <= high


def _latent_sd(settings: Settings) -> float:
    return math.sqrt(1 + settings.spread**2)


def _intercept(rate: float, settings: Settings) -> float:
    return _NORMAL.inv_cdf(rate) * _latent_sd(settings)


def _mean_score(intercept: float, settings: Settings) -> float:
    nodes, weights = _HERMITE
    sd = math.sqrt(1 + settings.spread**2 + settings.score_noise**2)
    values = 1 / (1 + np.exp(-(intercept + sd * nodes) / settings.score_scale))
    return float(np.dot(weights, values) / math.sqrt(2 * math.pi))


def _rng(settings: Settings, index: int) -> np.random.Generator:
    return np.random.default_rng([settings.seed, index])


def artifact(settings: Settings, index: int, rng: np.random.Generator) -> Artifact:
    kind = CYCLE[index % len(CYCLE)]
    if kind == HELPFUL:
        points = int(rng.integers(3, 16))
    elif kind == HARMFUL:
        points = -int(rng.integers(3, 16))
    elif kind == REGRESSION:
        points = REGRESSION_POINTS
    else:
        points = 0
    top = min(0.9, 0.97 - points / 100)
    base = float(rng.uniform(0.5, top))
    control = _intercept(base, settings)
    canary = _intercept(base + points / 100, settings) if points else control
    score_effect = _mean_score(canary, settings) - _mean_score(control, settings) if points else 0.0
    return Artifact(index, kind, points, base, control, canary, score_effect)


def _outcomes(intercepts: np.ndarray, difficulty: np.ndarray, rng: np.random.Generator, settings: Settings):
    """Success (0/1) and score of runs with these intercepts on tasks of these difficulties."""
    latent = intercepts + settings.spread * difficulty + rng.standard_normal(len(intercepts))
    noisy = latent + settings.score_noise * rng.standard_normal(len(intercepts))
    return (latent > 0).astype(float), 1 / (1 + np.exp(-noisy / settings.score_scale))


def certificate_tasks(item: Artifact, rng: np.random.Generator, settings: Settings) -> list[PairedTask]:
    """The held-out tasks run under both arms, each pair on one task (one difficulty)."""
    n = settings.held_out
    difficulty = rng.standard_normal(n)
    control = _outcomes(np.full(n, item.control_intercept), difficulty, rng, settings)
    candidate = _outcomes(np.full(n, item.canary_intercept), difficulty, rng, settings)
    return [
        PairedTask(
            task_id=f"{item.parent}-task-{j}",
            control=ArmOutcome(passed=bool(control[0][j]), score=float(control[1][j])),
            candidate=ArmOutcome(passed=bool(candidate[0][j]), score=float(candidate[1][j])),
        )
        for j in range(n)
    ]


def _stats(sums: np.ndarray) -> dict[str, tuple[ArmStats, ArmStats]]:
    """The watch's running sums from [arm][n, Σ success, Σ score, Σ score²] (success is 0/1: Σ x² = Σ x)."""
    canary, control = sums
    return {
        "success": (
            ArmStats(int(canary[0]), float(canary[1]), float(canary[1])),
            ArmStats(int(control[0]), float(control[1]), float(control[1])),
        ),
        "score": (
            ArmStats(int(canary[0]), float(canary[2]), float(canary[3])),
            ArmStats(int(control[0]), float(control[2]), float(control[3])),
        ),
    }


def _uplift(sums: np.ndarray) -> dict[str, float]:
    """Each metric's canary mean minus control mean from [arm][n, Σ success, Σ score, Σ score²]."""
    return {metric: canary.mean - control.mean for metric, (canary, control) in _stats(sums).items()}


def live_traffic(item: Artifact, rng: np.random.Generator, settings: Settings) -> tuple[Decision, np.ndarray]:
    """Live runs through the canary assignment until the watch has decided and the canary has had its
    `max_canary_runs` (the fixed horizon): the decision, taken on a prefix of the runs, and the sums over the runs up
    to the one that brings the canary to the horizon ([arm][n, Σ success, Σ score, Σ score²])."""
    policy = settings.watch_policy()
    horizon = settings.max_canary_runs
    sums = np.zeros((2, 4))  # [canary, control] x [n, Σ success, Σ score, Σ score²]
    next_look = settings.look_every
    parent, share, size = item.parent, settings.canary_share, settings.block
    parents, shares = [parent] * size, [share] * size
    decision: Decision | None = None
    at_horizon: np.ndarray | None = None
    while decision is None or at_horizon is None:
        keys = [f"{key:016x}" for key in rng.integers(0, 2**63, size=size, dtype=np.int64).tolist()]
        canary = np.array(list(map(arm_for, parents, keys, shares))) == CANARY
        success, score = _outcomes(
            np.where(canary, item.canary_intercept, item.control_intercept), rng.standard_normal(size), rng, settings
        )
        columns = np.stack([np.ones(size), success, score, score * score], axis=1)
        running = np.stack(
            [np.cumsum(columns * canary[:, None], axis=0), np.cumsum(columns * ~canary[:, None], axis=0)]
        )  # [arm][run][column]
        served = int(sums[0, 0])
        reached = served + int(running[0, -1, 0])
        if decision is None:
            for target in range(next_look, reached + 1, settings.look_every):
                at = int(np.searchsorted(running[0, :, 0], target - served))  # the run that brings the canary to target
                look = decide(_stats(sums + running[:, at, :]), policy, window_over=target >= horizon)
                if look.action != "continue":
                    decision = look
                    break
                next_look = target + settings.look_every
        if at_horizon is None and reached >= horizon:
            at_horizon = sums + running[:, int(np.searchsorted(running[0, :, 0], horizon - served)), :]
        sums += running[:, -1, :]
    return decision, at_horizon


def _interval(difference) -> tuple[float, float, float]:
    return (difference.mean, difference.low, difference.high)


def simulate_one(settings: Settings, index: int) -> Result:
    rng = _rng(settings, index)
    item = artifact(settings, index, rng)
    certificate = certify(certificate_tasks(item, rng, settings), alpha=settings.certificate_alpha)
    decision, at_horizon = live_traffic(item, rng, settings)
    bounds = {b.metric: b for b in decision.bounds}
    return Result(
        artifact=item,
        certificate={metric: _interval(certificate.difference(metric)) for metric in METRICS},
        certified=judge(Policy(), certificate).passed,
        action=decision.action,
        reason=decision.reason,
        canary_runs=bounds["success"].canary_runs,
        control_runs=bounds["success"].control_runs,
        horizon=_uplift(at_horizon),
        horizon_control_runs=int(at_horizon[1, 0]),
        at_stop={metric: bounds[metric].estimate for metric in METRICS},
    )


@dataclass(frozen=True)
class Figure:
    name: str
    hits: int
    total: int
    aim: str  # "≥ 0.90", "≤ 0.05", or "" (none in the issue: reported)
    value: float | None = None  # when not hits / total (a median)

    @property
    def rate(self) -> float | None:
        if self.value is not None:
            return self.value
        return self.hits / self.total if self.total else None

    @property
    def met(self) -> bool | None:
        if not self.aim or self.rate is None:
            return None
        sign, bound = self.aim.split()
        return self.rate >= float(bound) if sign == "≥" else self.rate <= float(bound)

    def line(self) -> str:
        if self.value is not None:
            figure = f"{self.value:g} ({self.total} rolled back)"
        elif self.total:
            figure = f"{self.rate:.3f} ({self.hits} of {self.total})"
        else:
            figure = "none (0 artifacts)"
        if not self.aim:
            aim = "no aim (reported)"
        elif self.met is None:
            aim = f"aim {self.aim}: not measured"
        else:
            aim = f"aim {self.aim}: {'met' if self.met else 'NOT MET'}"
        return f"{self.name}: {figure}; {aim}"


@dataclass
class Report:
    settings: Settings
    results: list[Result] = field(default_factory=list)

    def of(self, kind: str) -> list[Result]:
        return [r for r in self.results if r.artifact.kind == kind]

    def coverage(self) -> list[Figure]:
        """The share of certificate intervals containing the realized live uplift (over the fixed horizon) and the
        true effect, per metric, for every artifact and for the certified ones; and, secondary and without an aim,
        the share containing the watch's own estimate at its stop, which the stop selects."""
        aim = f"≥ {1 - self.settings.certificate_alpha:.2f}"
        certified = [r for r in self.results if r.certified]
        horizon = self.settings.max_canary_runs
        figures = []
        for metric in METRICS:
            for who, results in (("every artifact", self.results), ("certified", certified)):
                live = sum(r.covers_horizon(metric) for r in results)
                truth = sum(r.covers_truth(metric) for r in results)
                name = f"coverage, {metric}, {who}, realized live uplift over the first {horizon} canary runs"
                figures.append(Figure(name, live, len(results), aim))
                figures.append(Figure(f"coverage, {metric}, {who}, true effect", truth, len(results), aim))
            at_stop = sum(r.covers_at_stop(metric) for r in self.results)
            name = (
                f"secondary: coverage, {metric}, every artifact, live uplift at the watch's stop (biased by optional"
                " stopping: the watch stops when its running estimate is far from 0)"
            )
            figures.append(Figure(name, at_stop, len(self.results), ""))
        return figures

    def false_rollbacks(self) -> Figure:
        harmless = [r for r in self.results if r.artifact.points >= 0]
        return Figure(
            "false rollback rate (true effect ≥ 0)",
            sum(r.action == "rollback" for r in harmless),
            len(harmless),
            f"≤ {self.settings.alpha:g}",
        )

    def regressions(self) -> list[Result]:
        return [r for r in self.results if r.artifact.points == REGRESSION_POINTS]

    def missed_regressions(self) -> Figure:
        regressions = self.regressions()
        return Figure(
            f"missed regressions of −10 points within {self.settings.max_canary_runs} canary runs",
            sum(r.action != "rollback" for r in regressions),
            len(regressions),
            "≤ 0.05",
        )

    def runs_to_roll_back(self) -> Figure:
        runs = [r.canary_runs for r in self.regressions() if r.action == "rollback"]
        return Figure(
            "median canary runs to roll back a −10-point regression",
            0,
            len(runs),
            "",
            value=float(statistics.median(runs)) if runs else None,
        )

    def figures(self) -> list[Figure]:
        return [*self.coverage(), self.false_rollbacks(), self.missed_regressions(), self.runs_to_roll_back()]

    def class_line(self, kind: str) -> str:
        results = self.of(kind)
        n = len(results)

        def share(test: Callable[[Result], bool]) -> str:
            return f"{sum(map(test, results)) / n:.3f}" if n else "-"

        runs = [r.canary_runs for r in results]
        median = f"{statistics.median(runs):g}" if runs else "-"
        return (
            f"class {CLASS_LABELS[kind]}, {n} artifacts: certificate passes {share(lambda r: r.certified)}, promoted"
            f" {share(lambda r: r.action == 'promote')}, rolled back {share(lambda r: r.action == 'rollback')},"
            f" expired {share(lambda r: r.action == 'expire')}; median canary runs to the decision {median}"
        )

    def lines(self) -> list[str]:
        s = self.settings
        counts = ", ".join(f"{len(self.of(kind))} {kind}" for kind in CLASSES)
        head = [
            f"simulate_watch: {len(self.results)} artifacts ({counts}), seed {s.seed}",
            f"certificates: {s.held_out} paired held-out tasks each, {1 - s.certificate_alpha:.0%} intervals, the"
            " default policy (non-inferiority, margin 2 points of success)",
            f"watch: canary share {s.canary_share:g}, alpha {s.alpha:g}, a look every {s.look_every} canary runs,"
            f" at most {s.max_canary_runs} canary runs",
            f"realized live uplift: the canary's mean minus the control's over the first {s.max_canary_runs} canary"
            " runs and the control runs served alongside, a horizon fixed before the canary starts (the watch decides"
            " on a prefix of the same runs)",
        ]
        figures = self.figures()
        missed = [f.name for f in figures if f.met is False]
        tail = ["all aims met" if not missed else f"aims not met: {'; '.join(missed)}"]
        return head + [f.line() for f in figures] + [self.class_line(kind) for kind in CLASSES] + tail


def simulate(settings: Settings, *, progress: Callable[[int], None] | None = None) -> Report:
    report = Report(settings)
    for index in range(settings.artifacts):
        report.results.append(simulate_one(settings, index))
        if progress is not None:
            progress(index + 1)
    return report
