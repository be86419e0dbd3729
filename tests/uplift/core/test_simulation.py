"""The watch's calibration by simulation, small (issue 27, item 5; the full size is `manage.py simulate_watch`, its
figures in docs/benchmarks.md): the certificates' 90% intervals cover the true effect, no harmless artifact is rolled
back beyond the watch's alpha, −10-point regressions are rolled back within 2,000 canary runs, and a seed gives the
same figures.

Tolerance: 120 artifacts (36 helpful, 36 neutral, 24 harmful, 24 at −10; about 4 s). A rate with an aim p on n
artifacts is accepted when its count of failures is at most the 99.9% upper point of Binomial(n, p): a simulation
that meets its aim fails the test for at most one seed in a thousand. At this size the tolerance cannot tell 0.83
from 0.90, so the coverage of the realized live uplift for every artifact (0.83 at full size: not met, see
docs/benchmarks.md) is not asserted here; its cause, the bias of an early stop, is.
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


def test_watches_run_to_the_cap_see_a_live_uplift_inside_the_certificate(report):
    capped = [r for r in report.results if r.canary_runs >= SETTINGS.max_canary_runs]
    assert len(capped) >= 20
    for metric in ("success", "score"):
        missed = sum(not r.covers_live(metric) for r in capped)
        assert missed <= binomial_upper(len(capped), 0.10), (metric, missed, len(capped))


def test_an_early_stop_biases_the_realized_live_uplift_away_from_the_truth(report):
    """Why the realized live uplift is covered less than 90% (docs/benchmarks.md): the watch stops when the running
    estimate is far enough from 0, so an early promotion overstates the effect and an early rollback understates it."""
    early = [r for r in report.results if r.canary_runs < SETTINGS.max_canary_runs]
    promoted = [r.live["success"] - r.artifact.effect for r in early if r.action == "promote"]
    rolled_back = [r.live["success"] - r.artifact.effect for r in early if r.action == "rollback"]
    assert len(promoted) >= 20 and len(rolled_back) >= 20
    assert statistics.mean(promoted) > 0 > statistics.mean(rolled_back)


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
