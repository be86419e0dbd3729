"""The watch's calibration by simulation, small (issue 27, item 5; the full size is `manage.py simulate_watch`, its
figures in docs/benchmarks.md): the certificates' 90% intervals cover the true effect and the realized live uplift
over the fixed horizon (the first 2,000 canary runs and the control runs alongside), that live uplift is not biased
by when the watch stops (the watch's own estimate at its stop is), no harmless artifact is rolled back beyond the
watch's alpha, −10-point regressions are rolled back within 2,000 canary runs, and a seed gives the same figures.

Tolerance: 120 artifacts (36 helpful, 36 neutral, 24 harmful, 24 at −10; about 7 s of CPU, each artifact's traffic
running to the horizon, about 20,000 runs hashed through the real assignment). A rate with an aim p on n artifacts is
accepted when its count of failures is at most the 99.9% upper point of Binomial(n, p): a simulation that meets its
aim fails the test for at most one seed in a thousand. At 120 artifacts that point is 23 misses (a coverage of 0.81),
so the suite cannot tell a coverage of 0.83 from 0.90: a population that could (about 400 artifacts, where a coverage
of 0.83 would still pass one seed in six) takes about 25 s, past the suite's budget of about 10 s. The suite asserts
the binomial point and, sharper at this size, that the fixed-horizon uplift has no bias over the population while the
estimate at an early stop has; the aim itself is judged at full size (docs/benchmarks.md).
"""

import math
import statistics

import numpy as np
import pytest

from uplift.core.simulation import HARMFUL, HELPFUL, NEUTRAL, REGRESSION, Settings, artifact, simulate, simulate_one
from uplift.core.simulation import _outcomes as outcomes

SETTINGS = Settings(artifacts=120, seed=1)


def binomial_upper(n: int, p: float, level: float = 0.999) -> int:
    """The smallest k with P(Binomial(n, p) ≤ k) ≥ level."""
    total = 0.0
    for k in range(n + 1):
        total += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        if total >= level:
            return k
    return n


@pytest.fixture(scope="module")
def report():
    return simulate(SETTINGS)


def test_the_population_has_every_class_in_its_proportions(report):
    counts = {kind: len(report.of(kind)) for kind in (HELPFUL, NEUTRAL, HARMFUL, REGRESSION)}
    assert counts == {HELPFUL: 36, NEUTRAL: 36, HARMFUL: 24, REGRESSION: 24}
    assert all(3 <= r.artifact.points <= 15 for r in report.of(HELPFUL))
    assert all(-15 <= r.artifact.points <= -3 for r in report.of(HARMFUL))
    assert all(r.artifact.points == -10 for r in report.of(REGRESSION))
    assert all(r.artifact.score_effect == 0 for r in report.of(NEUTRAL))
    assert all(r.artifact.score_effect < 0 for r in report.of(REGRESSION))


def test_the_agents_succeed_at_the_rates_the_artifacts_say():
    settings = Settings()
    item = artifact(settings, 0, np.random.default_rng(5))  # index 0: a helpful one
    assert item.effect > 0 and item.score_effect > 0
    rng = np.random.default_rng(6)
    n = 200_000
    arms = {}
    for name, intercept, rate in (("control", item.control_intercept, item.base),
                                  ("canary", item.canary_intercept, item.base + item.effect)):  # fmt: skip
        success, score = outcomes(np.full(n, intercept), rng.standard_normal(n), rng, settings)
        assert abs(success.mean() - rate) < 4 * math.sqrt(rate * (1 - rate) / n)
        assert np.corrcoef(success, score)[0, 1] > 0.5  # the graded score goes with success
        arms[name] = score
    shift = arms["canary"].mean() - arms["control"].mean()
    error = math.sqrt((arms["canary"].var() + arms["control"].var()) / n)
    assert abs(shift - item.score_effect) < 4 * error


def test_the_certificates_90_percent_intervals_cover_the_true_effect(report):
    for metric in ("success", "score"):
        for results in (report.results, [r for r in report.results if r.certified]):
            missed = sum(not r.covers_truth(metric) for r in results)
            assert missed <= binomial_upper(len(results), 0.10), (metric, missed, len(results))


def test_the_certificates_90_percent_intervals_cover_the_realized_live_uplift_over_the_fixed_horizon(report):
    for metric in ("success", "score"):
        for results in (report.results, [r for r in report.results if r.certified]):
            missed = sum(not r.covers_horizon(metric) for r in results)
            assert missed <= binomial_upper(len(results), 0.10), (metric, missed, len(results))


def test_the_watch_decides_on_a_prefix_of_the_fixed_horizon_traffic(report):
    horizon = SETTINGS.max_canary_runs
    for r in report.results:
        assert r.canary_runs <= horizon + SETTINGS.look_every
        # the control runs served alongside 2,000 canary runs at a 10% share: 18,000 on average, sd about 420
        assert 16_000 <= r.horizon_control_runs <= 20_000
        if r.canary_runs == horizon:  # a watch that ran to the horizon saw exactly its traffic
            assert r.horizon == pytest.approx(r.at_stop, abs=1e-12)


def test_an_early_stop_biases_the_estimate_at_the_stop_but_not_the_fixed_horizon_uplift(report):
    """Why the fixed horizon is the realized live uplift (docs/decisions.md): the watch stops when its running
    estimate is far enough from 0, so at an early promotion its estimate overstates the effect and at an early
    rollback it understates it; the mean over the first 2,000 canary runs of the same traffic has a horizon fixed
    before any outcome, so over the population its error has mean 0 (accepted within the two-sided 99.9% normal
    point, 3.29 standard errors of the mean). Given an early decision it keeps only the decided prefix's share of the
    selection (about a tenth: +0.17 points after an early promotion at full size, against +1.7 at the stop), too
    small to assert at this size, but its error is a fraction of the estimate's at the stop."""
    for metric in ("success", "score"):
        errors = [r.horizon[metric] - r.artifact.true_effect(metric) for r in report.results]
        error = statistics.stdev(errors) / math.sqrt(len(errors))
        assert abs(statistics.mean(errors)) <= 3.29 * error, (metric, statistics.mean(errors), error)
    early = [r for r in report.results if r.canary_runs < SETTINGS.max_canary_runs]
    for action, sign in (("promote", 1), ("rollback", -1)):
        decided = [r for r in early if r.action == action]
        assert len(decided) >= 20, action
        for metric in ("success", "score"):
            at_stop = [r.at_stop[metric] - r.artifact.true_effect(metric) for r in decided]
            assert sign * statistics.mean(at_stop) > 0, (action, metric)
    at_stop = statistics.mean(abs(r.at_stop["success"] - r.artifact.effect) for r in early)
    horizon = statistics.mean(abs(r.horizon["success"] - r.artifact.effect) for r in early)
    assert horizon < at_stop / 2, (horizon, at_stop)  # about 0.8 and 3.1 points at full size


def test_harmless_artifacts_are_rolled_back_at_most_at_the_watchs_alpha(report):
    figure = report.false_rollbacks()
    assert figure.total == 72
    assert figure.hits <= binomial_upper(figure.total, SETTINGS.alpha)


def test_ten_point_regressions_are_rolled_back_within_2000_canary_runs(report):
    figure = report.missed_regressions()
    assert figure.total >= 24
    assert figure.hits <= binomial_upper(figure.total, 0.05)
    # a 10-point regression at a 10% share: after 400 canary runs the standard error of Δ is about 2.4 points and the
    # sequence's half-width about three of them, so a typical one is rolled back well before (180 at full size)
    assert report.runs_to_roll_back().value <= 400


def test_harmless_artifacts_not_rolled_back_are_promoted(report):
    for r in report.of(HELPFUL) + report.of(NEUTRAL):
        assert r.action in ("promote", "rollback")
    assert all(r.action == "promote" for r in report.of(HELPFUL))


def test_the_figures_are_the_same_for_a_seed_and_a_smaller_population_is_a_prefix():
    small = Settings(artifacts=6, seed=7, max_canary_runs=200, held_out=40)
    first, again = simulate(small), simulate(small)
    assert first.results == again.results and first.lines() == again.lines()
    assert simulate(Settings(artifacts=4, seed=7, max_canary_runs=200, held_out=40)).results == first.results[:4]
    other = simulate_one(Settings(artifacts=6, seed=8, max_canary_runs=200, held_out=40), 0)
    assert other != first.results[0]


def test_settings_refuse_nonsense():
    for bad in ({"artifacts": 0}, {"canary_share": 0}, {"canary_share": 1}, {"alpha": 0}, {"seed": -1},
                {"certificate_alpha": 1}, {"max_canary_runs": 5}):  # fmt: skip
        with pytest.raises(ValueError):
            Settings(**bad)
