"""regression_gate: every mode and direction, missing values, no active version, all-must-pass."""

import math

import pytest

from procedures.core import DEFAULT_PROCEDURE_CHECKS, HIGHER_IS_BETTER, MetricCheck, regression_gate


def no_regression(metric, tolerance=0.0, higher_is_better=True):
    return MetricCheck(metric=metric, mode="no_regression", tolerance=tolerance, higher_is_better=higher_is_better)


def only_check(metrics, baseline, check):
    report = regression_gate(metrics, baseline, [check])
    assert report.passed is report.checks[0].passed
    return report.checks[0]


@pytest.mark.parametrize(
    ("value", "passed"),
    [(0.8, True), (0.75, True), (0.7, True), (0.69, False), (0.9, True)],
)
def test_no_regression_allows_the_tolerance_below_a_higher_is_better_baseline(value, passed):
    check = only_check({"task_success": value}, {"task_success": 0.8}, no_regression("task_success", 0.1))
    assert check.passed is passed
    assert check.baseline == 0.8
    assert check.value == value
    assert check.threshold == pytest.approx(0.7)
    assert "active 0.8" in check.reason


@pytest.mark.parametrize(("value", "passed"), [(10.0, True), (12.0, True), (12.5, False), (3.0, True)])
def test_no_regression_allows_the_tolerance_above_a_lower_is_better_baseline(value, passed):
    check = only_check({"mean_steps": value}, {"mean_steps": 10.0}, no_regression("mean_steps", 2.0, False))
    assert check.passed is passed
    assert check.threshold == 12.0


def test_no_regression_with_zero_tolerance_rejects_any_drop():
    assert not only_check({"task_success": 0.79}, {"task_success": 0.8}, no_regression("task_success")).passed
    assert only_check({"task_success": 0.8}, {"task_success": 0.8}, no_regression("task_success")).passed


def test_no_regression_passes_without_an_active_version():
    check = only_check({"task_success": 0.1}, None, no_regression("task_success"))
    assert check.passed
    assert check.reason == "no active version"
    assert check.baseline is None


def test_no_regression_passes_when_the_active_version_lacks_the_metric():
    check = only_check({"grounding": 0.5}, {"grounding": None}, no_regression("grounding"))
    assert check.passed
    assert check.reason == "active version has no value"


@pytest.mark.parametrize("metrics", [{}, {"task_success": None}, {"task_success": math.nan}, {"task_success": "1"}])
@pytest.mark.parametrize(
    "check",
    [
        MetricCheck(metric="task_success", mode="no_regression"),
        MetricCheck(metric="task_success", mode="at_least", threshold=0.0),
        MetricCheck(metric="task_success", mode="at_most", threshold=1.0),
    ],
)
def test_a_missing_value_fails_its_check_with_a_reason(metrics, check):
    result = only_check(metrics, None, check)
    assert not result.passed
    assert result.reason == "task_success has no value"


@pytest.mark.parametrize(("value", "passed"), [(0.5, True), (0.6, True), (0.49, False)])
def test_at_least_is_an_inclusive_floor(value, passed):
    check = only_check(
        {"tool_correctness": value},
        {"tool_correctness": 1.0},
        MetricCheck(metric="tool_correctness", mode="at_least", threshold=0.5),
    )
    assert check.passed is passed
    assert check.threshold == 0.5
    assert check.baseline == 1.0


@pytest.mark.parametrize(("value", "passed"), [(0, True), (1, False)])
def test_at_most_is_an_inclusive_cap(value, passed):
    check = only_check({"regressions": value}, None, MetricCheck(metric="regressions", mode="at_most", threshold=0))
    assert check.passed is passed


def test_float_noise_does_not_fail_a_boundary_value():
    check = only_check({"task_success": 0.7}, {"task_success": 0.8}, no_regression("task_success", 0.1))
    assert check.passed


def test_the_gate_passes_only_when_every_check_passes():
    checks = [no_regression("task_success"), MetricCheck(metric="regressions", mode="at_most", threshold=0)]
    passing = regression_gate({"task_success": 0.9, "regressions": 0}, {"task_success": 0.8}, checks)
    failing = regression_gate({"task_success": 0.9, "regressions": 2}, {"task_success": 0.8}, checks)
    assert passing.passed and not passing.failures
    assert not failing.passed
    assert [check.metric for check in failing.failures] == ["regressions"]
    assert failing.to_dict() == {
        "passed": False,
        "checks": [
            {
                "metric": "task_success",
                "mode": "no_regression",
                "threshold": 0.8,
                "value": 0.9,
                "baseline": 0.8,
                "passed": True,
                "reason": "0.9 >= 0.8 (active 0.8)",
            },
            {
                "metric": "regressions",
                "mode": "at_most",
                "threshold": 0,
                "value": 2.0,
                "baseline": None,
                "passed": False,
                "reason": "2 > 0",
            },
        ],
    }


def test_a_gate_without_checks_is_refused():
    with pytest.raises(ValueError, match="at least one check"):
        regression_gate({"task_success": 1.0}, None, [])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"metric": " ", "mode": "at_least", "threshold": 1}, "gate metric is required"),
        ({"metric": "m", "mode": "above"}, "gate mode must be one of no_regression, at_least, at_most"),
        ({"metric": "m", "mode": "at_least"}, "an at_least check needs a finite threshold"),
        ({"metric": "m", "mode": "at_most", "threshold": math.inf}, "an at_most check needs a finite threshold"),
        ({"metric": "m", "mode": "no_regression", "tolerance": -0.1}, "gate tolerance must be a finite number >= 0"),
        ({"metric": "m", "mode": "no_regression", "threshold": 1}, "a no_regression check takes a tolerance"),
    ],
)
def test_a_malformed_check_is_rejected(arguments, message):
    with pytest.raises(ValueError, match=message):
        MetricCheck(**arguments)


def test_the_default_checks_follow_each_metrics_direction():
    for check in DEFAULT_PROCEDURE_CHECKS:
        assert check.higher_is_better is HIGHER_IS_BETTER[check.metric]
    metrics = {"task_success": 1.0, "tool_correctness": 1.0, "answered_rate": 1.0, "regressions": 0, "mean_steps": 3}
    assert regression_gate(metrics, None, DEFAULT_PROCEDURE_CHECKS).passed
    assert not regression_gate({**metrics, "mean_steps": 5}, {"mean_steps": 3}, DEFAULT_PROCEDURE_CHECKS).passed
