"""Confidence bounds for the mean of bounded observations by betting (Waudby-Smith & Ramdas, "Estimating means of
bounded random variables by betting", JRSS-B 2024, the hedged capital process with the predictable plug-in bets).

For observations x_1..x_n in [0, 1] and a candidate mean m, two gamblers bet against "the mean is m": one that it is
higher, growing K+_t(m) = prod_i (1 + l_i (x_i - m)), one that it is lower, K-_t(m) = prod_i (1 - l_i (x_i - m)),
with bets l_i chosen from x_1..x_{i-1} only (predictable) and capped so no factor reaches zero. Under the true mean
both are nonnegative martingales starting at 1, so by Ville's inequality the chance that max(K+/2, K-/2) ever reaches
1/alpha is at most alpha: the set of m where it does not is a (1 - alpha) confidence interval, valid for every n
with no assumption but the bounds. Unlike Hoeffding's or the empirical Bernstein bound it adapts to the variance, so
paired differences that are mostly ties (the usual certificate) get a narrow interval.

Both capitals are monotone in m (each factor is: see `_log_capital`), so each end of the interval is one root
find on a bracket (`_crossing`).
`interval` is the fixed-n version (bets tuned to the known n); `sequence_interval` is the anytime-valid version (a
confidence sequence: bets tuned to the running time, valid at every t at once, for monitoring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CAP = 0.5  # the largest fraction of the distance to the edge a bet may stake (the paper's c = 1/2)
BISECTIONS = 48  # the ends to within 2**-48 of the [0, 1] scale (a bisection would take 48 steps)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    mean: float
    n: int
    alpha: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def _running_variance(x: np.ndarray) -> np.ndarray:
    """sigma2_{i-1} for i = 1..n: the plug-in variance before observation i (prior 1/4 at the start, as the paper)."""
    n = len(x)
    count = np.arange(1, n + 1, dtype=float)
    mean = (0.5 + np.cumsum(x)) / (count + 1)
    var = (0.25 + np.cumsum((x - mean) ** 2)) / (count + 1)
    return np.concatenate(([0.25], var[:-1]))


def _bets(x: np.ndarray, alpha: float, *, sequential: bool) -> np.ndarray:
    """The predictable plug-in bets l_i (before the cap): the fixed-n tuning, or the confidence sequence's."""
    var = _running_variance(x)
    n = len(x)
    if sequential:
        t = np.arange(1, n + 1, dtype=float)
        return np.sqrt(2 * math.log(2 / alpha) / (var * t * np.log1p(t)))
    return np.sqrt(2 * math.log(2 / alpha) / (n * var))


def _log_capital(x: np.ndarray, bets: np.ndarray, m: float, *, upward: bool) -> float:
    """log max_t K_t(m) of the gambler betting that the mean is above m (upward) or below it.

    Upward factors 1 + min(l, c/m)(x - m) fall as m grows (with the cap they are 1 + c x / m - c), downward factors
    1 + min(l, c/(1-m))(m - x) rise with m; all stay above 1 - c > 0. So the upward capital is decreasing in m and
    the downward one increasing: each end of the interval is where one of them crosses the threshold."""
    if upward:
        stake = np.minimum(bets, CAP / m) if m > 0 else bets
        factors = 1 + stake * (x - m)
    else:
        stake = np.minimum(bets, CAP / (1 - m)) if m < 1 else bets
        factors = 1 + stake * (m - x)
    return float(np.max(np.cumsum(np.log(factors)), initial=0.0))


def _interval(values, alpha: float, *, sequential: bool) -> Interval:
    x = np.asarray(values, dtype=float)
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    if x.ndim != 1:
        raise ValueError("the observations are one sequence")
    if len(x) == 0:
        return Interval(0.0, 1.0, float("nan"), 0, alpha)
    if np.any((x < 0) | (x > 1)) or not np.all(np.isfinite(x)):
        raise ValueError("observations must lie in [0, 1]")
    bets = _bets(x, alpha, sequential=sequential)
    threshold = math.log(2 / alpha)  # max(K+/2, K-/2) >= 1/alpha  <=>  one of K+ or K- >= 2/alpha
    mean = float(x.mean())

    # The upward capital falls as m grows and the downward one rises: each end is where one crosses the threshold.
    def upward(m: float) -> float:  # >= 0: the upward gambler has won, the mean is above m
        return _log_capital(x, bets, m, upward=True) - threshold

    def downward(m: float) -> float:  # >= 0: the downward gambler has won, the mean is below m
        return _log_capital(x, bets, m, upward=False) - threshold

    # Each end's bracket starts near the mean (a few of its standard errors out), widened to the scale's edge only
    # when that is not yet a rejected point: the root find then starts close to the answer (about 6 capital
    # evaluations an end instead of 20) and the ends are the same, since each bracket still holds its one crossing.
    reach = 4 * math.sqrt(max(float(x.var()), 1e-4) * 2 * threshold / len(x)) + 1 / len(x)
    low, high = 0.0, 1.0
    # Each value found on the way is handed to the root find, which would otherwise compute it again.
    near = max(0.0, mean - reach)
    if (at_near := upward(near)) >= 0:
        at_mean = upward(mean)
        inner, at_inner = (mean, at_mean) if at_mean < 0 else (1.0, None)
        low = _crossing(upward, near, inner, at_near, at_inner)
    elif near > 0 and (at_edge := upward(0.0)) >= 0:
        low = _crossing(upward, 0.0, near, at_edge, at_near)
    near = min(1.0, mean + reach)
    if (at_near := downward(near)) >= 0:
        at_mean = downward(mean)
        inner, at_inner = (mean, at_mean) if at_mean < 0 else (0.0, None)
        high = _crossing(downward, near, inner, at_near, at_inner)
    elif near < 1 and (at_edge := downward(1.0)) >= 0:
        high = _crossing(downward, 1.0, near, at_edge, at_near)
    if low > high:  # both gamblers won (a chance of at most alpha): the interval collapses where they met
        low = high = (low + high) / 2
    return Interval(low=low, high=high, mean=mean, n=len(x), alpha=alpha)


def _crossing(
    excess, rejected: float, accepted: float, f_rejected: float | None = None, f_accepted: float | None = None
) -> float:
    """The last point on the way from `rejected` (excess >= 0 there) to `accepted` (excess < 0 there) where the
    excess is still >= 0, to within 2**-BISECTIONS of the [0, 1] scale, rounded outwards: the interval may take in a
    sliver of the rejected set, never lose a sliver of the accepted one.

    Regula falsi with the Illinois correction (the value at an end kept twice running is halved): it keeps the
    bracket [rejected, accepted] as a bisection does, each evaluation deciding which end moves, but on a capital,
    smooth between a few kinks, it needs some 15-30 evaluations where a bisection needs 48. A bisection step is taken
    whenever 4 steps in a row failed to halve the bracket, so it always ends."""
    f_rejected = excess(rejected) if f_rejected is None else f_rejected  # the values when the caller has them
    f_accepted = excess(accepted) if f_accepted is None else f_accepted
    kept = 0  # +1: the rejected end moved last, -1: the accepted one
    halving_at, steps_since = abs(accepted - rejected) / 2, 0
    while abs(accepted - rejected) > 2.0**-BISECTIONS:
        middle = (rejected * f_accepted - accepted * f_rejected) / (f_accepted - f_rejected)
        if steps_since >= 4 or not min(rejected, accepted) < middle < max(rejected, accepted):
            middle = (rejected + accepted) / 2
        value = excess(middle)
        if value >= 0:
            rejected, f_rejected = middle, value
            if kept == 1:
                f_accepted /= 2
            kept = 1
        else:
            accepted, f_accepted = middle, value
            if kept == -1:
                f_rejected /= 2
            kept = -1
        steps_since += 1
        if abs(accepted - rejected) <= halving_at:
            halving_at, steps_since = abs(accepted - rejected) / 2, 0
    return rejected


def interval(values, alpha: float) -> Interval:
    """The (1 - alpha) betting confidence interval for the mean of `values` in [0, 1], for a fixed n."""
    return _interval(values, alpha, sequential=False)


def sequence_interval(values, alpha: float) -> Interval:
    """The (1 - alpha) confidence sequence's interval after all of `values`: valid simultaneously at every time,
    so it may be looked at after each new value (continuous monitoring)."""
    return _interval(values, alpha, sequential=True)


def difference_interval(differences, alpha: float, *, sequential: bool = False) -> Interval:
    """The interval for the mean of differences in [-1, 1] (paired differences of scores or of successes), on the
    [-1, 1] scale: the betting interval of (d + 1) / 2, mapped back."""
    d = np.asarray(differences, dtype=float)
    if d.size and (np.any((d < -1) | (d > 1)) or not np.all(np.isfinite(d))):
        raise ValueError("differences must lie in [-1, 1]")
    unit = _interval((d + 1) / 2, alpha, sequential=sequential)
    mean = float(d.mean()) if d.size else float("nan")
    return Interval(low=2 * unit.low - 1, high=2 * unit.high - 1, mean=mean, n=unit.n, alpha=alpha)
