"""The betting confidence bounds: equal to a brute-force reading of the same capital processes, narrow when the
data are mostly ties, and at their nominal error (fixed n, and under repeated looks for the sequence)."""

import math

import numpy as np
import pytest

from uplift.core.betting import CAP, difference_interval, interval, sequence_interval


def brute_force(x, alpha, grid=4001, sequential=False):
    """The same hedged capital, read on a grid in plain Python: the set of m the gamblers have not won on."""
    n = len(x)
    mean = sum(x) / n
    kept = []
    for step in range(grid):
        m = step / (grid - 1)
        up = down = 0.0
        best_up = best_down = 0.0
        total, squares = 0.0, 0.0
        for i, value in enumerate(x):
            variance = 0.25 if i == 0 else (0.25 + squares) / (i + 1)
            t = i + 1
            if sequential:
                bet = math.sqrt(2 * math.log(2 / alpha) / (variance * t * math.log1p(t)))
            else:
                bet = math.sqrt(2 * math.log(2 / alpha) / (n * variance))
            up_stake = min(bet, CAP / m) if m > 0 else bet
            down_stake = min(bet, CAP / (1 - m)) if m < 1 else bet
            up += math.log(1 + up_stake * (value - m))
            down += math.log(1 + down_stake * (m - value))
            best_up, best_down = max(best_up, up), max(best_down, down)
            total += value
            running_mean = (0.5 + total) / (t + 1)
            squares += (value - running_mean) ** 2
        if max(best_up, best_down) < math.log(2 / alpha):
            kept.append(m)
    return min(kept), max(kept), mean


@pytest.mark.parametrize(
    "x",
    [
        [1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1],
        [0.5] * 20 + [1.0] * 5,
        [0.2, 0.4, 0.35, 0.9, 0.1, 0.3, 0.3, 0.5],
        [0.0] * 30,
    ],
)
def test_the_interval_is_the_set_of_means_the_gamblers_have_not_beaten(x):
    result = interval(x, 0.05)
    low, high, mean = brute_force(x, 0.05)
    step = 1 / 4000
    assert result.mean == pytest.approx(mean)
    assert result.low <= low and low - result.low < step  # the grid's first kept point; ours is just below it
    assert result.high >= high and result.high - high < step


def test_the_sequence_is_the_brute_force_one_too():
    x = [1, 1, 0, 1, 0.5, 0.5, 1, 0, 1, 1]
    result = sequence_interval(x, 0.1)
    low, high, _ = brute_force(x, 0.1, sequential=True)
    assert result.low <= low < result.low + 1 / 4000 and result.high - 1 / 4000 < high <= result.high


def test_mostly_tied_pairs_give_a_narrow_interval_and_hoeffding_a_wide_one():
    differences = np.random.default_rng(3).permutation([0] * 180 + [1] * 15 + [-1] * 5)
    result = difference_interval(differences, 0.05)
    hoeffding_width = 2 * 2 * math.sqrt(math.log(2 / 0.05) / (2 * len(differences)))  # two half-widths on [-1, 1]
    assert result.low <= 0.05 <= result.high
    assert result.high - result.low < hoeffding_width / 2  # Hoeffding's is 0.38 wide whatever the ties


def test_the_order_of_the_observations_matters_so_certificates_fix_one_independent_of_the_outcomes():
    """Sorted by value the gamblers see all the ties first: the interval then misses the mean. (certify orders its
    pairs by a hash of the task id, never by outcome.)"""
    sorted_ = [0] * 180 + [1] * 15 + [-1] * 5
    assert not difference_interval(sorted_, 0.05).contains(0.05)


def test_the_interval_narrows_as_n_grows_and_widens_as_alpha_shrinks():
    rng = np.random.default_rng(7)
    x = rng.binomial(1, 0.7, 2000).astype(float)
    widths = [interval(x[:n], 0.05).high - interval(x[:n], 0.05).low for n in (50, 200, 2000)]
    assert widths[0] > widths[1] > widths[2]
    assert interval(x[:200], 0.001).low < interval(x[:200], 0.05).low


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        interval([0.5, 1.5], 0.05)
    with pytest.raises(ValueError):
        interval([0.5, float("nan")], 0.05)
    with pytest.raises(ValueError):
        interval([0.5], 0)
    with pytest.raises(ValueError):
        difference_interval([2.0], 0.05)
    empty = interval([], 0.05)
    assert (empty.low, empty.high, empty.n) == (0.0, 1.0, 0)


def miss_rate_bound(alpha: float, trials: int) -> float:
    """The nominal error plus three binomial standard errors: a correct method stays below it but once in ~700."""
    return alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)


@pytest.mark.parametrize(
    "values, probabilities",
    [
        ([0.0, 1.0], [0.7, 0.3]),  # success rates
        ([0.0, 0.5, 1.0], [0.1, 0.75, 0.15]),  # paired success differences on the unit scale, mostly ties
        ([0.0, 0.25, 0.5, 1.0], [0.25, 0.25, 0.25, 0.25]),
    ],
)
@pytest.mark.parametrize("n", [20, 150])
def test_the_fixed_n_interval_misses_the_true_mean_at_most_at_its_nominal_rate(values, probabilities, n):
    rng = np.random.default_rng(11 + n)
    truth = float(np.dot(values, probabilities))
    trials, alpha = 400, 0.1
    misses = sum(
        not interval(rng.choice(values, size=n, p=probabilities), alpha).contains(truth) for _ in range(trials)
    )
    assert misses / trials <= miss_rate_bound(alpha, trials)


def test_the_sequence_under_repeated_looks_misses_at_most_at_its_nominal_rate():
    """Looked at after every one of 200 observations, the sequence excludes the truth at some look in at most
    about alpha of the runs (the fixed-n interval looked at that often would not hold)."""
    rng = np.random.default_rng(5)
    values, probabilities = [0.0, 0.5, 1.0], [0.15, 0.6, 0.25]
    truth = float(np.dot(values, probabilities))
    trials, alpha, looks = 150, 0.1, range(10, 201, 10)
    ever_missed = 0
    for _ in range(trials):
        x = rng.choice(values, size=200, p=probabilities)
        ever_missed += any(not sequence_interval(x[:t], alpha).contains(truth) for t in looks)
    assert ever_missed / trials <= miss_rate_bound(alpha, trials)
