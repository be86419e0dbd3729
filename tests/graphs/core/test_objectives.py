"""Objectives (spec §4): metric and objective validation, contexts, Hoeffding intervals, decision lines (§5)."""

import dataclasses
import json
import math

import pytest

from graphs.core.documents import canonical_json
from graphs.core.evaluation import Evaluation, TaskOutcome
from graphs.core.gates import ObjectiveGate, TieAcceptingGate
from graphs.core.objectives import (
    MetricSpec,
    ObjectiveContext,
    ObjectiveError,
    ObjectiveSpec,
    candidate_mean_interval,
    hoeffding_radius,
    paired_delta_interval,
    render_decision,
)

QUALITY = MetricSpec("quality", "score", "maximize", 0.0, 1.0, 0.02, 0.1, 0.1)
COST = MetricSpec("cost", "calls", "minimize", 0.0, 10.0, 0.5, 1.0, 1.0)


def metric(**changes):
    return dataclasses.replace(QUALITY, **changes)


def context(objective_digest="d" * 64, **changes):
    fields = {
        "objective_digest": objective_digest,
        "evaluation_design": "paired-rerun",
        "evaluator_version": "eval-1",
        "cohort": "october",
        "budget_profile": "standard",
        "evidence_partition": "validation",
        "expected_task_ids": ["b", "a", "c"],
        "measurement_basis": {"quality": "judge", "cost": "calls per attempt"},
    }
    return ObjectiveContext(**{**fields, **changes})


# ---------------------------------------------------------------------------------------------------------------------
# MetricSpec


def test_a_metric_has_its_width_and_normalised_numbers():
    spec = MetricSpec("cost", "calls", "minimize", 0, 10)
    assert spec.width == 10.0
    assert isinstance(spec.lower_bound, float)
    assert (spec.min_improvement, spec.equivalence_margin, spec.non_regression_margin) == (0.0, 0.0, 0.0)
    assert (spec.floor, spec.ceiling, spec.role) == (None, None, "optimize")


def test_the_oriented_difference_is_positive_when_better():
    assert QUALITY.oriented(0.8, 0.7) == pytest.approx(0.1)
    assert COST.oriented(3.5, 5.0) == pytest.approx(1.5)
    assert COST.oriented(7.0, 5.0) == pytest.approx(-2.0)


@pytest.mark.parametrize(
    "changes",
    [
        {"name": ""},
        {"unit": None},
        {"direction": "up"},
        {"role": "decide"},
        {"lower_bound": 1.0, "upper_bound": 1.0},
        {"lower_bound": 2.0},
        {"lower_bound": -math.inf},
        {"upper_bound": math.nan},
        {"upper_bound": True},
        {"min_improvement": -0.1},
        {"equivalence_margin": math.inf},
        {"non_regression_margin": math.nan},
        {"min_improvement": "0.1"},
        {"floor": -0.1},
        {"ceiling": 1.1},
        {"floor": 0.8, "ceiling": 0.2},
        {"floor": math.nan},
        {"role": "report_only", "floor": 0.5},
        {"role": "report_only", "ceiling": 0.5},
    ],
)
def test_a_metric_with_a_bad_value_is_refused(changes):
    with pytest.raises(ObjectiveError):
        metric(**changes)


def test_an_objective_error_is_a_value_error():
    assert issubclass(ObjectiveError, ValueError)


def test_floor_and_ceiling_may_sit_on_the_bounds_and_meet():
    assert metric(floor=0.0, ceiling=0.0).floor == 0.0
    assert metric(floor=1.0).floor == 1.0


def test_a_metric_round_trips_through_its_document():
    spec = metric(floor=0.3, ceiling=0.9)
    assert MetricSpec.from_document(spec.to_document()) == spec
    assert MetricSpec.from_document(
        {"name": "x", "unit": "", "direction": "maximize", "lower_bound": 0, "upper_bound": 1}
    )


def test_a_metric_document_missing_a_field_is_refused():
    document = QUALITY.to_document()
    del document["upper_bound"]
    with pytest.raises(ObjectiveError, match="upper_bound"):
        MetricSpec.from_document(document)


# ---------------------------------------------------------------------------------------------------------------------
# ObjectiveSpec


def test_an_objective_has_the_documented_defaults():
    spec = ObjectiveSpec(metrics=(QUALITY,))
    assert (spec.mode, spec.uncertainty, spec.alpha, spec.min_units, spec.schema) == (
        "lexicographic",
        "paired_hoeffding_v1",
        0.05,
        2,
        1,
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"metrics": ()},
        {"metrics": (QUALITY, dataclasses.replace(COST, name="quality"))},
        {"metrics": (dataclasses.replace(QUALITY, role="report_only"),)},
        {"mode": "weighted"},
        {"uncertainty": "bootstrap"},
        {"alpha": 0.0},
        {"alpha": 1.0},
        {"alpha": math.nan},
        {"alpha": True},
        {"min_units": 1},
        {"min_units": 2.0},
        {"min_units": True},
        {"schema": 2},
    ],
)
def test_an_objective_with_a_bad_value_is_refused(changes):
    with pytest.raises(ObjectiveError):
        ObjectiveSpec(**{"metrics": (QUALITY, COST), **changes})


def test_the_interval_count_is_the_optimized_metrics_plus_one_per_constrained_metric():
    latency = MetricSpec("latency", "s", "minimize", 0.0, 60.0, role="report_only")
    assert ObjectiveSpec(metrics=(QUALITY, COST, latency)).interval_count() == 2
    with_floor = ObjectiveSpec(metrics=(metric(floor=0.5), COST, latency))
    assert with_floor.interval_count() == 3
    both_limits = ObjectiveSpec(metrics=(metric(floor=0.5), dataclasses.replace(COST, floor=1.0, ceiling=8.0)))
    assert both_limits.interval_count() == 4
    assert both_limits.alpha_interval == pytest.approx(0.05 / 4)


def test_the_objective_digest_is_stable_and_depends_on_metric_order():
    first = ObjectiveSpec(metrics=(QUALITY, COST))
    again = ObjectiveSpec(metrics=(QUALITY, COST))
    swapped = ObjectiveSpec(metrics=(COST, QUALITY))
    assert first.digest == again.digest
    assert len(first.digest) == 64
    assert first.digest != swapped.digest
    assert first.digest != ObjectiveSpec(metrics=(QUALITY, COST), mode="pareto").digest


def test_integer_and_float_numbers_give_the_same_digest():
    as_ints = ObjectiveSpec(metrics=(MetricSpec("q", "s", "maximize", 0, 1, 0, 0, 0),))
    as_floats = ObjectiveSpec(metrics=(MetricSpec("q", "s", "maximize", 0.0, 1.0, 0.0, 0.0, 0.0),))
    assert as_ints.digest == as_floats.digest


def test_an_objective_round_trips_through_its_document():
    spec = ObjectiveSpec(metrics=(QUALITY, metric(name="q2", ceiling=0.9)), mode="pareto", alpha=0.1, min_units=5)
    document = spec.to_document()
    assert document["schema"] == 1
    assert ObjectiveSpec.from_document(document) == spec
    assert ObjectiveSpec.from_document(document).digest == spec.digest
    assert ObjectiveSpec.from_document(json.loads(canonical_json(document))) == spec  # through its stored text


def test_an_objective_accepts_metric_documents():
    spec = ObjectiveSpec(metrics=[QUALITY.to_document()])
    assert spec.metrics == (QUALITY,)


def test_the_summary_names_the_mode_every_metric_and_the_alpha_split():
    latency = MetricSpec("latency", "s", "minimize", 0.0, 60.0, role="report_only")
    lines = ObjectiveSpec(metrics=(QUALITY, dataclasses.replace(COST, ceiling=8.0), latency), mode="pareto").summary()
    assert lines.splitlines()[0].startswith("Mode: pareto")
    assert "1. quality (score, maximize, range [0, 1])" in lines
    assert "exceed 0.02" in lines
    assert "losses up to 1 tolerated" in lines
    assert "≤ 8" in lines
    assert "latency" in lines and "report only" in lines
    assert "alpha 0.05 split over 3 interval(s) (0.01667 each)" in lines


# ---------------------------------------------------------------------------------------------------------------------
# ObjectiveContext


def test_a_context_is_hashable_and_normalises_ids_and_basis():
    value = context()
    assert value.expected_task_ids == ("a", "b", "c")
    assert value.measurement_basis == (("cost", "calls per attempt"), ("quality", "judge"))
    assert value.units == 3
    assert hash(value) == hash(context(expected_task_ids=["c", "b", "a"]))
    assert value == context(measurement_basis=[("quality", "judge"), ("cost", "calls per attempt")])


@pytest.mark.parametrize(
    "changes",
    [
        {"cohort": ""},
        {"evaluator_version": None},
        {"objective_digest": 7},
        {"expected_task_ids": []},
        {"expected_task_ids": ["a", "a"]},
        {"expected_task_ids": ["a", ""]},
        {"expected_task_ids": "abc"},
        {"measurement_basis": {"quality": ""}},
        {"measurement_basis": [("quality", "judge"), ("quality", "rubric")]},
        {"measurement_basis": [("quality",)]},
    ],
)
def test_a_context_with_a_bad_value_is_refused(changes):
    with pytest.raises(ObjectiveError):
        context(**changes)


def test_mismatches_name_the_differing_fields():
    value = context()
    assert value.mismatches(context()) == []
    assert value.mismatches(context(cohort="november", evaluator_version="eval-2")) == [
        "evaluator_version",
        "cohort",
    ]
    assert value.mismatches(context(expected_task_ids=["a", "b"])) == ["expected_task_ids"]
    assert value.mismatches(None) == ["missing_context"]


def test_the_context_digest_changes_with_any_field():
    value = context()
    assert value.digest == context().digest
    assert value.digest != context(budget_profile="cheap").digest
    assert value.digest != context(measurement_basis={"quality": "rubric"}).digest


def test_a_context_round_trips_through_its_document():
    value = context()
    document = value.to_document()
    assert document["measurement_basis"] == {"cost": "calls per attempt", "quality": "judge"}
    assert document["expected_task_ids"] == ["a", "b", "c"]
    assert ObjectiveContext.from_document(document) == value
    assert Evaluation.from_document(Evaluation(ref="r", score=None, objective_context=value).to_document()) == (
        Evaluation(ref="r", score=None, objective_context=value)
    )


def test_a_context_document_missing_a_field_is_refused():
    document = context().to_document()
    del document["cohort"]
    with pytest.raises(ObjectiveError, match="cohort"):
        ObjectiveContext.from_document(document)


# ---------------------------------------------------------------------------------------------------------------------
# Hoeffding


def test_the_hoeffding_radius_follows_the_formula():
    assert hoeffding_radius(1.0, 2000, 0.025) == pytest.approx(math.sqrt(math.log(80) / 4000))
    assert hoeffding_radius(10.0, 8, 0.05) == pytest.approx(10 * math.sqrt(math.log(40) / 16))


@pytest.mark.parametrize(
    ("width", "n", "alpha"),
    [
        (1.0, 0, 0.05),
        (1.0, -3, 0.05),
        (1.0, 2.5, 0.05),
        (1.0, 10, 0.0),
        (1.0, 10, 1.0),
        (1.0, 10, math.nan),
        (0, 10, 0.05),
    ],
)
def test_the_hoeffding_radius_refuses_bad_arguments(width, n, alpha):
    with pytest.raises(ObjectiveError):
        hoeffding_radius(width, n, alpha)


def test_a_paired_delta_interval_uses_twice_the_width():
    interval = paired_delta_interval([0.1, 0.3], 1.0, 0.05)
    assert interval.mean == pytest.approx(0.2)
    assert interval.radius == pytest.approx(hoeffding_radius(2.0, 2, 0.05))
    assert (interval.lower, interval.upper) == pytest.approx((0.2 - interval.radius, 0.2 + interval.radius))


def test_a_candidate_mean_interval_uses_the_width():
    interval = candidate_mean_interval([4.0, 6.0], 10.0, 0.05)
    assert interval.mean == 5.0
    assert interval.radius == pytest.approx(hoeffding_radius(10.0, 2, 0.05))


@pytest.mark.parametrize("helper", [paired_delta_interval, candidate_mean_interval])
def test_an_interval_of_nothing_is_refused(helper):
    with pytest.raises(ObjectiveError):
        helper([], 1.0, 0.05)
    with pytest.raises(ObjectiveError):
        helper([0.5], 1.0, 1.5)


def test_an_interval_is_never_within_a_zero_margin():
    interval = paired_delta_interval([0.0] * 10, 1.0, 0.05)
    assert interval.within(0.0) is False
    assert interval.within(10.0) is True


# ---------------------------------------------------------------------------------------------------------------------
# render_decision


def decided(baseline_values, candidate_values, *metrics, n=2000, mode="lexicographic"):
    spec = ObjectiveSpec(metrics=metrics or (QUALITY, COST), mode=mode)
    bound = context(spec.digest, expected_task_ids=[f"t{i}" for i in range(n)])

    def evaluation(ref, values):
        outcomes = [TaskOutcome(task_id, 0.5, True, metrics=values) for task_id in bound.expected_task_ids]
        return Evaluation(ref=ref, score=0.5, per_task=tuple(outcomes), objective_context=bound)

    return ObjectiveGate(spec, bound).decide(
        evaluation("base-ref", baseline_values), evaluation("cand-ref", candidate_values)
    )


def test_scalar_feedback_renders_no_decision_lines():
    decision = TieAcceptingGate().decide(Evaluation(ref="a", score=0.5), Evaluation(ref="b", score=0.6))
    assert render_decision(decision.feedback) == []
    assert render_decision({}) == []


def test_decision_lines_show_the_disposition_metrics_and_refs():
    lines = render_decision(decided({"quality": 0.7, "cost": 5.0}, {"quality": 0.8, "cost": 7.0}).feedback)
    assert lines[0] == "Decision: accepted (improvement)"
    assert lines[1] == "Decisive metric: quality"
    assert lines[2] == (
        "- quality (score, maximize): baseline 0.7 → candidate 0.8; "
        "oriented interval [0.0338, 0.1662] (positive = better); verdict improved"
    )
    assert lines[3].startswith("- cost (calls, minimize): baseline 5 → candidate 7; oriented interval [-2.662, -1.338]")
    assert lines[3].endswith("not judged")
    assert lines[-1] == "Compared baseline base-ref with candidate cand-ref"


def test_an_unknown_metric_renders_as_no_claim_possible():
    lines = render_decision(decided({"quality": 0.7, "cost": 5.0}, {"quality": None, "cost": 5.0}).feedback)
    assert lines[0] == "Decision: unmeasured (metric_unmeasured)"
    assert any(line.startswith("- quality") and "unknown" in line and "no claim possible" in line for line in lines)


def test_a_report_only_metric_is_marked():
    latency = MetricSpec("latency", "s", "minimize", 0.0, 60.0, role="report_only")
    feedback = decided({"quality": 0.7, "latency": 3.0}, {"quality": 0.8, "latency": 9.0}, QUALITY, latency).feedback
    [line] = [line for line in render_decision(feedback) if line.startswith("- latency")]
    assert line.endswith("report only")


def test_constraint_statuses_are_rendered():
    cost = dataclasses.replace(COST, ceiling=6.0)
    feedback = decided({"quality": 0.7, "cost": 5.0}, {"quality": 0.8, "cost": 7.0}, QUALITY, cost).feedback
    lines = render_decision(feedback)
    assert lines[0] == "Decision: rejected (constraint_violation)"
    assert "Constraint on cost: violated (ceiling 6; candidate mean 7 in [6.654, 7.346])" in lines


def test_pairing_and_context_mismatch_are_rendered():
    feedback = {
        "disposition": "invalid",
        "reasons": ["incomplete_pairing", "context_mismatch"],
        "pairing": {"candidate": {"duplicates": [], "missing": ["t1", "t2"], "unexpected": ["x"]}},
        "context_mismatch": {"baseline": ["cohort", "evaluator_version"]},
        "invalid_values": [],
        "baseline_ref": "a",
        "candidate_ref": None,
    }
    assert render_decision(feedback) == [
        "Decision: invalid (incomplete_pairing, context_mismatch)",
        "Pairing, candidate: missing t1, t2; unexpected x",
        "Context mismatch, baseline: cohort, evaluator_version",
        "Compared baseline a with candidate ?",
    ]


def test_long_id_lists_are_shortened():
    feedback = {"disposition": "invalid", "pairing": {"baseline": {"missing": [f"t{i}" for i in range(9)]}}}
    assert render_decision(feedback)[1] == "Pairing, baseline: missing t0, t1, t2, t3, t4 and 4 more"


def test_invalid_values_are_counted_and_shown():
    feedback = {
        "disposition": "invalid",
        "reasons": ["invalid_value"],
        "invalid_values": [{"side": "candidate", "task_id": "t1", "metric": "quality", "value": "nan"}],
    }
    assert render_decision(feedback)[1] == "Invalid values (1): candidate t1 quality='nan'"


def test_a_missing_number_renders_as_a_question_mark():
    feedback = {
        "disposition": "rejected",
        "reasons": ["metric_regression"],
        "decisive_metric": "quality",
        "metrics": [
            {
                "name": "quality",
                "unit": "score",
                "direction": "maximize",
                "known": True,
                "baseline_mean": None,
                "candidate_mean": 0.5,
                "oriented_interval": [None, -0.1],
                "verdict": "regressed",
            }
        ],
        "constraints": {"quality": {"status": "violated", "floor": 0.6, "candidate_mean": None, "interval": None}},
    }
    lines = render_decision(feedback)
    assert lines[2] == (
        "- quality (score, maximize): baseline ? → candidate 0.5; oriented interval [?, -0.1] (positive = better); "
        "verdict regressed"
    )
    assert lines[3] == "Constraint on quality: violated (floor 0.6; candidate mean ? in [?, ?])"


def test_the_probe_renders_one_line():
    spec = ObjectiveSpec(metrics=(QUALITY,))
    bound = context(spec.digest)
    head = Evaluation(ref="h", score=1.0, objective_context=bound)
    assert render_decision(ObjectiveGate(spec, bound).decide(head, head).feedback) == [
        "Decision: probe",
        "Compared baseline h with candidate h",
    ]
