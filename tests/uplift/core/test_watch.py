"""The watch's sequential test: its type-I error under repeated looks stays at its nominal level (simulated, small),
a 10-point regression is rolled back, and decisions wait for enough runs."""

import random

import pytest

from uplift.core.watch import ArmStats, WatchPolicy, bound, decide, radius

LOOK = 200  # runs between looks (20 canary runs at a 10% share)


POLICY = WatchPolicy()


def simulate(delta: float, *, seed: int, base: float = 0.7, share: float = 0.1, policy=POLICY):
    rng = random.Random(seed)
    stats = {metric: (ArmStats(), ArmStats()) for metric in ("success", "score")}
    while True:
        for _ in range(LOOK):
            canary = rng.random() < share
            outcome = 1.0 if rng.random() < base + (delta if canary else 0) else 0.0
            for arms in stats.values():
                arms[0 if canary else 1].add(outcome)
        decision = decide(stats, policy)
        if decision.action != "continue":
            return decision.action, stats["success"][0].n


def test_no_regression_is_rolled_back_at_most_at_the_nominal_rate_however_often_it_is_looked_at():
    runs = 150
    rollbacks = sum(simulate(0.0, seed=seed)[0] == "rollback" for seed in range(runs))
    # nominal alpha 0.05; the binomial's 99.9% upper point for 150 draws at 0.05 is 16
    assert rollbacks <= 16


def test_a_ten_point_regression_is_rolled_back_well_within_2000_canary_runs():
    results = [simulate(-0.10, seed=seed) for seed in range(60)]
    assert all(action == "rollback" for action, _ in results)
    assert max(runs for _, runs in results) <= 2000


def test_an_improvement_is_promoted():
    assert all(simulate(0.05, seed=seed)[0] == "promote" for seed in range(20))


def test_no_decision_before_each_arm_has_its_minimum():
    stats = {m: (ArmStats(), ArmStats()) for m in ("success", "score")}
    for arms in stats.values():
        arms[0].extend([0.0] * 10)  # a canary failing everything, but only ten runs
        arms[1].extend([1.0] * 500)
    assert decide(stats, WatchPolicy()).action == "continue"
    assert decide(stats, WatchPolicy(), window_over=True).action == "expire"
    for arms in stats.values():
        arms[0].extend([0.0] * 30)
    decision = decide(stats, WatchPolicy())
    assert decision.action == "rollback" and "worse in success" in decision.reason


def test_the_radius_shrinks_as_runs_accumulate_and_grows_with_confidence():
    assert radius(1e-3, 0.05, 1e-3) > radius(1e-4, 0.05, 1e-3)
    assert radius(1e-3, 0.01, 1e-3) > radius(1e-3, 0.05, 1e-3)
    empty = bound(ArmStats(), ArmStats(), metric="success", alpha=0.05, tuned_runs=500)
    assert (empty.low, empty.high) == (-1.0, 1.0)


def test_a_policy_refuses_nonsense():
    for bad in ({"alpha": 0}, {"margin": 2}, {"metric": "speed"}, {"min_runs": 1}, {"max_canary_runs": 5}):
        with pytest.raises(ValueError):
            WatchPolicy(**bad)
