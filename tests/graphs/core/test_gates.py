"""Gates (spec §4): the scalar gates, the paired bootstrap gate and the objective gate's check order and table."""

import dataclasses
import functools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphs.core.evaluation import Decision, Evaluation, TaskOutcome
from graphs.core.gates import (
    DISPOSITIONS,
    PROBE,
    REASON_CODES,
    Gate,
    ObjectiveGate,
    PairedGate,
    StrictImprovementGate,
    TieAcceptingGate,
)
from graphs.core.objectives import MetricSpec, ObjectiveContext, ObjectiveError, ObjectiveSpec, paired_delta_interval

# ---------------------------------------------------------------------------------------------------------------------
# Builders


def scored(ref, scores, ids=None):
    """An evaluation whose mean is the mean of `scores`, one task per score."""
    ids = ids or [f"t{i}" for i in range(len(scores))]
    outcomes = [TaskOutcome(task_id, score, score >= 0.5) for task_id, score in zip(ids, scores, strict=True)]
    return Evaluation.from_outcomes(ref, outcomes)


def just_score(ref, score):
    return Evaluation(ref=ref, score=score)


QUALITY = MetricSpec("quality", "score", "maximize", 0.0, 1.0, 0.02, 0.1, 0.1)
COST = MetricSpec("cost", "calls", "minimize", 0.0, 10.0, 0.5, 1.0, 1.0)
TABLE_UNITS = 2000


def task_ids(n):
    return [f"task-{i:04d}" for i in range(n)]


def objective(*metrics, mode="lexicographic", **options):
    return ObjectiveSpec(metrics=metrics or (QUALITY, COST), mode=mode, **options)


def context_for(spec, n=TABLE_UNITS, **changes):
    fields = {
        "objective_digest": spec.digest,
        "evaluation_design": "paired-rerun",
        "evaluator_version": "eval-1",
        "cohort": "october",
        "budget_profile": "standard",
        "evidence_partition": "validation",
        "expected_task_ids": task_ids(n),
        "measurement_basis": {metric.name: "per attempt" for metric in spec.metrics},
    }
    return ObjectiveContext(**{**fields, **changes})


def measured(ref, context, rows):
    """An objective-mode evaluation; `rows` maps task id → metrics (quality doubles as the task's score)."""
    outcomes = []
    for task_id, metrics in rows.items():
        quality = metrics.get("quality")
        score = quality if isinstance(quality, float) and 0.0 <= quality <= 1.0 else 0.0
        outcomes.append(TaskOutcome(task_id, score, score >= 0.5, metrics=metrics))
    return Evaluation(ref=ref, score=None, per_task=tuple(outcomes), objective_context=context)


def uniform(ref, context, **metrics):
    """Every expected unit gets exactly the same metric values."""
    return measured(ref, context, {task_id: dict(metrics) for task_id in context.expected_task_ids})


def gate_and_context(*metrics, mode="lexicographic", n=TABLE_UNITS, **options):
    spec = objective(*metrics, mode=mode, **options)
    context = context_for(spec, n=n)
    return ObjectiveGate(spec, context), context


# ---------------------------------------------------------------------------------------------------------------------
# Protocol


def test_every_gate_satisfies_the_gate_protocol():
    gate, _ = gate_and_context()
    for candidate in (TieAcceptingGate(), StrictImprovementGate(), PairedGate(), gate):
        assert isinstance(candidate, Gate)


# ---------------------------------------------------------------------------------------------------------------------
# TieAcceptingGate


def test_a_tie_is_accepted_by_the_default_gate():
    decision = TieAcceptingGate().decide(just_score("a", 0.75), just_score("b", 0.75))
    assert decision.accepted is True
    assert decision.stop is False


def test_the_default_gate_rejects_a_lower_score_and_accepts_a_higher_one():
    gate = TieAcceptingGate()
    assert gate.decide(just_score("a", 0.75), just_score("b", 0.74)).accepted is False
    assert gate.decide(just_score("a", 0.75), just_score("b", 0.76)).accepted is True


def test_the_default_gate_feedback_holds_both_scores_rounded_to_four_decimals():
    decision = TieAcceptingGate().decide(just_score("a", 0.123456), just_score("b", 0.654321))
    assert decision.feedback == {"best_score": 0.1235, "candidate_score": 0.6543, "accepted": True}


def test_the_default_gate_without_perfect_never_stops():
    gate = TieAcceptingGate()
    assert gate.decide(just_score("a", 0.9), just_score("b", 1.0)).stop is False
    perfect = just_score("a", 1.0)
    assert gate.decide(perfect, perfect).stop is False


def test_the_default_gate_with_perfect_stops_once_the_new_best_reaches_it():
    gate = TieAcceptingGate(perfect=0.9)
    assert gate.decide(just_score("a", 0.5), just_score("b", 0.95)).stop is True
    assert gate.decide(just_score("a", 0.5), just_score("b", 0.85)).stop is False
    assert gate.decide(just_score("a", 0.5), just_score("b", 0.4)).stop is False


@pytest.mark.parametrize("gate", [TieAcceptingGate(perfect=1.0), StrictImprovementGate()], ids=repr)
def test_the_probe_of_a_scalar_gate_never_accepts_and_stops_from_the_score(gate):
    perfect, imperfect = just_score("a", 1.0), just_score("b", 0.6)
    assert gate.decide(perfect, perfect) == Decision(
        accepted=False, feedback={"best_score": 1.0, "candidate_score": 1.0, "accepted": False}, stop=True
    )
    assert gate.decide(imperfect, imperfect).accepted is False
    assert gate.decide(imperfect, imperfect).stop is False


@pytest.mark.parametrize("gate", [TieAcceptingGate(), StrictImprovementGate()], ids=repr)
@pytest.mark.parametrize(("best", "candidate"), [(None, 0.5), (0.5, None), (None, None)])
def test_a_scalar_gate_refuses_a_missing_score(gate, best, candidate):
    with pytest.raises(ValueError, match="both scores"):
        gate.decide(just_score("a", best), just_score("b", candidate))


@pytest.mark.parametrize("perfect", [-0.1, 1.5, math.nan, True, "1"])
def test_a_scalar_gate_refuses_a_perfect_score_outside_zero_to_one(perfect):
    with pytest.raises(ValueError, match="perfect"):
        TieAcceptingGate(perfect=perfect)


# ---------------------------------------------------------------------------------------------------------------------
# StrictImprovementGate


def test_a_tie_is_rejected_by_the_strict_gate():
    assert StrictImprovementGate().decide(just_score("a", 0.75), just_score("b", 0.75)).accepted is False


def test_a_strictly_higher_score_is_accepted_by_the_strict_gate():
    decision = StrictImprovementGate().decide(just_score("a", 0.75), just_score("b", 0.76))
    assert decision.accepted is True
    assert decision.feedback == {"best_score": 0.75, "candidate_score": 0.76, "accepted": True}


def test_the_strict_gate_needs_more_than_the_minimum_delta():
    gate = StrictImprovementGate(minimum_delta=0.05)
    assert gate.decide(just_score("a", 0.5), just_score("b", 0.55)).accepted is False
    assert gate.decide(just_score("a", 0.5), just_score("b", 0.56)).accepted is True


def test_the_strict_gate_stops_by_default_when_the_new_best_is_perfect():
    assert StrictImprovementGate().decide(just_score("a", 0.5), just_score("b", 1.0)).stop is True


@pytest.mark.parametrize("delta", [-0.01, math.inf, math.nan, False])
def test_the_strict_gate_refuses_a_bad_minimum_delta(delta):
    with pytest.raises(ValueError, match="minimum_delta"):
        StrictImprovementGate(minimum_delta=delta)


# ---------------------------------------------------------------------------------------------------------------------
# PairedGate


def test_the_paired_gate_needs_per_task_outcomes_on_both_sides():
    with_tasks = scored("a", [0.5] * 25)
    with pytest.raises(ValueError, match="per_task"):
        PairedGate().decide(with_tasks, just_score("b", 0.5))
    with pytest.raises(ValueError, match="per_task"):
        PairedGate().decide(just_score("a", 0.5), with_tasks)


@pytest.mark.parametrize("probability", [0.49, 1.01, math.nan, True])
def test_the_paired_gate_refuses_a_win_probability_outside_half_to_one(probability):
    with pytest.raises(ValueError, match="min_win_probability"):
        PairedGate(min_win_probability=probability)


@pytest.mark.parametrize("probability", [0.5, 1.0])
def test_the_paired_gate_accepts_the_ends_of_the_win_probability_range(probability):
    assert PairedGate(min_win_probability=probability).min_win_probability == probability


@pytest.mark.parametrize("option", [{"min_tasks": 0}, {"resamples": 0}, {"min_tasks": 2.5}, {"seed": "x"}])
def test_the_paired_gate_refuses_bad_counts(option):
    with pytest.raises(ValueError):
        PairedGate(**option)


def test_too_few_shared_tasks_are_insufficient_paired_tasks():
    best = scored("a", [0.5] * 25)
    candidate = scored("b", [0.9] * 25, ids=[f"t{i}" for i in range(6, 31)])  # 19 ids shared
    decision = PairedGate().decide(best, candidate)
    assert decision.accepted is False
    assert decision.feedback["reason"] == "insufficient_paired_tasks"
    assert decision.feedback["paired_tasks"] == 19


def test_twenty_five_identical_tasks_win_with_probability_one_and_are_accepted():
    decision = PairedGate().decide(scored("a", [0.6] * 25), scored("b", [0.6] * 25))
    assert decision.accepted is True
    assert decision.feedback["win_probability"] == 1.0
    assert decision.feedback["mean_delta"] == 0.0
    assert decision.feedback["delta_95_ci"] == [0.0, 0.0]


def test_the_paired_gate_feedback_has_the_documented_keys():
    decision = PairedGate().decide(scored("a", [0.5] * 30), scored("b", [0.7] * 30))
    assert set(decision.feedback) == {
        "paired_tasks",
        "mean_delta",
        "delta_95_ci",
        "win_probability",
        "min_win_probability",
        "best_score",
        "candidate_score",
    }
    assert decision.feedback["paired_tasks"] == 30
    assert decision.feedback["mean_delta"] == 0.2


def test_the_paired_gate_rejects_a_clear_regression():
    decision = PairedGate().decide(scored("a", [0.8] * 30), scored("b", [0.3] * 30))
    assert decision.accepted is False
    assert decision.feedback["win_probability"] == 0.0


def noisy_pair(seed_text="x"):
    """Deltas of mixed sign with a small positive mean, so the win probability is neither 0 nor 1."""
    base = [0.5] * 30
    cand = [0.5 + (0.3 if i % 2 else -0.28) for i in range(30)]
    return scored("base-" + seed_text, base), scored("cand-" + seed_text, cand)


def test_the_paired_gate_is_deterministic_for_the_same_seed_and_refs():
    best, candidate = noisy_pair()
    first = PairedGate().decide(best, candidate)
    second = PairedGate().decide(best, candidate)
    assert first == second
    assert 0.0 < first.feedback["win_probability"] < 1.0


def test_the_paired_gate_draws_differently_for_another_seed_or_other_refs():
    best, candidate = noisy_pair()
    by_seed = {PairedGate(seed=seed).decide(best, candidate).feedback["win_probability"] for seed in range(5)}
    by_refs = {PairedGate().decide(*noisy_pair(text)).feedback["win_probability"] for text in "vwxyz"}
    assert len(by_seed) > 1
    assert len(by_refs) > 1


def test_the_paired_gate_needs_the_win_probability_as_well_as_a_non_negative_mean():
    best, candidate = noisy_pair()
    lenient = PairedGate(min_win_probability=0.5).decide(best, candidate)
    strict = PairedGate(min_win_probability=1.0).decide(best, candidate)
    assert lenient.accepted is True
    assert strict.accepted is False


def test_the_paired_gate_pairs_only_the_shared_task_ids():
    best = scored("a", [0.5] * 25 + [0.0] * 5, ids=[f"t{i}" for i in range(30)])
    candidate = scored("b", [0.5] * 25 + [1.0] * 5, ids=[f"t{i}" for i in range(25)] + [f"x{i}" for i in range(5)])
    decision = PairedGate().decide(best, candidate)
    assert decision.feedback["paired_tasks"] == 25
    assert decision.feedback["mean_delta"] == 0.0


def test_the_paired_gate_probe_stops_from_the_score():
    perfect, imperfect = scored("a", [1.0] * 25), scored("b", [0.5] * 25)
    assert PairedGate().decide(perfect, perfect) == Decision(
        accepted=False, feedback={"best_score": 1.0, "candidate_score": 1.0}, stop=True
    )
    assert PairedGate().decide(imperfect, imperfect).stop is False
    assert PairedGate(perfect=None).decide(perfect, perfect).stop is False


def test_the_paired_gate_stops_when_an_accepted_candidate_is_perfect():
    assert PairedGate().decide(scored("a", [0.5] * 25), scored("b", [1.0] * 25)).stop is True


# ---------------------------------------------------------------------------------------------------------------------
# ObjectiveGate: construction, probe, feedback


def test_an_objective_gate_refuses_a_context_bound_to_another_objective():
    spec = objective()
    other = objective(QUALITY)
    with pytest.raises(ObjectiveError, match="objective_digest"):
        ObjectiveGate(spec, context_for(other, n=3))


def test_an_objective_gate_exposes_its_objective_and_context():
    gate, context = gate_and_context(n=3)
    assert gate.context is context
    assert gate.objective.digest == context.objective_digest


def test_the_objective_probe_answers_probe_and_never_stops_even_at_perfect_quality():
    gate, context = gate_and_context(n=10)
    perfect = uniform("head", context, quality=1.0, cost=0.0)
    decision = gate.decide(perfect, perfect)
    assert decision.accepted is False
    assert decision.stop is False
    assert decision.disposition == PROBE


def test_the_dispositions_are_the_six_of_the_spec():
    assert DISPOSITIONS == ("accepted", "rejected", "equivalent", "unresolved", "unmeasured", "invalid")


FEEDBACK_KEYS = {
    "schema",
    "disposition",
    "reasons",
    "objective_digest",
    "context_digest",
    "mode",
    "baseline_ref",
    "candidate_ref",
    "coverage",
    "uncertainty",
    "metrics",
    "unknown_metrics",
    "decisive_metric",
    "constraints",
}


def test_objective_feedback_carries_every_documented_key():
    gate, context = gate_and_context(n=50)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.9, cost=5.0))
    feedback = decision.feedback
    assert set(feedback) == FEEDBACK_KEYS
    assert feedback["schema"] == 1
    assert feedback["objective_digest"] == gate.objective.digest
    assert feedback["context_digest"] == context.digest
    assert (feedback["baseline_ref"], feedback["candidate_ref"]) == ("b", "c")
    assert feedback["coverage"] == {"expected": 50, "baseline": 50, "candidate": 50}
    assert feedback["uncertainty"] == {
        "method": "paired_hoeffding_v1",
        "alpha": 0.05,
        "intervals": 2,
        "alpha_interval": 0.025,
        "units": 50,
        "min_units": 2,
    }
    assert all(reason in REASON_CODES for reason in feedback["reasons"])


def test_the_metric_report_holds_means_the_raw_delta_and_the_oriented_interval():
    gate, context = gate_and_context()
    feedback = gate.decide(
        uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.8, cost=3.5)
    ).feedback
    quality, cost = feedback["metrics"]
    radius = 2 * 1.0 * math.sqrt(math.log(2 / 0.025) / (2 * TABLE_UNITS))
    assert quality["name"] == "quality"
    assert quality["known"] is True
    assert quality["informational"] is False
    assert quality["thresholds"] == {
        "min_improvement": 0.02,
        "equivalence_margin": 0.1,
        "non_regression_margin": 0.1,
        "floor": None,
        "ceiling": None,
    }
    assert (quality["baseline_mean"], quality["candidate_mean"]) == (0.7, 0.8)
    assert quality["mean_delta"] == pytest.approx(0.1)
    assert quality["oriented_interval"] == pytest.approx([0.1 - radius, 0.1 + radius], abs=1e-6)
    assert cost["mean_delta"] == pytest.approx(-1.5)  # original units: cand − base
    assert cost["oriented_interval"] == pytest.approx([1.5 - 10 * radius, 1.5 + 10 * radius], abs=1e-6)


def test_the_objective_gate_never_stops():
    gate, context = gate_and_context()
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=1.0, cost=0))
    assert decision.accepted is True
    assert decision.stop is False


# ---------------------------------------------------------------------------------------------------------------------
# ObjectiveGate: the decision table of spec §4

BASELINE = {"quality": 0.7, "cost": 5.0}
TABLE = [
    ("better quality, fewer calls", {"quality": 0.8, "cost": 3.5}, ("accepted", []), ("accepted", [])),
    ("same quality, fewer calls", {"quality": 0.7, "cost": 3.5}, ("accepted", []), ("accepted", [])),
    ("better quality, same calls", {"quality": 0.8, "cost": 5.0}, ("accepted", []), ("accepted", [])),
    ("better quality, more calls", {"quality": 0.8, "cost": 7.0}, ("accepted", []), ("rejected", ["trade_off"])),
    (
        "much worse quality, fewer calls",
        {"quality": 0.4, "cost": 3.5},
        ("rejected", ["metric_regression"]),
        ("rejected", ["trade_off"]),
    ),
    ("everything the same", {"quality": 0.7, "cost": 5.0}, ("equivalent", []), ("equivalent", [])),
    (
        "same quality, more calls",
        {"quality": 0.7, "cost": 7.0},
        ("rejected", ["metric_regression"]),
        ("rejected", ["metric_regression"]),
    ),
]


DEFAULT_REASONS = {"accepted": ["improvement"], "equivalent": ["all_metrics_equivalent"]}


@functools.cache
def table_setup(mode):
    """The table's gate, baseline and context for one mode (built once: 2000 units)."""
    spec = objective(QUALITY, COST, mode=mode)
    context = context_for(spec)
    return ObjectiveGate(spec, context), uniform("baseline", context, **BASELINE), context


@pytest.fixture(params=["lexicographic", "pareto"])
def table_gate(request):
    return request.param, *table_setup(request.param)


@pytest.mark.parametrize(("label", "candidate", "lexicographic", "pareto"), TABLE, ids=[row[0] for row in TABLE])
def test_the_decision_table_of_the_spec(table_gate, label, candidate, lexicographic, pareto):
    mode, gate, baseline, context = table_gate
    disposition, reasons = lexicographic if mode == "lexicographic" else pareto
    decision = gate.decide(baseline, uniform("candidate", context, **candidate))
    assert decision.disposition == disposition
    assert decision.accepted is (disposition == "accepted")
    assert decision.feedback["reasons"] == (reasons or DEFAULT_REASONS[disposition])


def test_lexicographic_acceptance_on_quality_leaves_cost_visible_but_unjudged():
    gate, baseline, context = table_setup("lexicographic")
    feedback = gate.decide(baseline, uniform("c", context, quality=0.8, cost=7.0)).feedback
    quality, cost = feedback["metrics"]
    assert feedback["decisive_metric"] == "quality"
    assert (quality["reached"], quality["verdict"]) == (True, "improved")
    assert (cost["reached"], cost["verdict"]) == (False, None)
    assert cost["candidate_mean"] == 7.0


def test_lexicographic_passes_an_equivalent_metric_to_the_next_one():
    gate, baseline, context = table_setup("lexicographic")
    feedback = gate.decide(baseline, uniform("c", context, quality=0.7, cost=3.5)).feedback
    assert [m["verdict"] for m in feedback["metrics"]] == ["equivalent", "improved"]
    assert feedback["decisive_metric"] == "cost"


def test_everything_the_same_retains_the_incumbent_unlike_the_paper_tie_rule(table_gate):
    _, gate, baseline, context = table_gate
    decision = gate.decide(baseline, uniform("c", context, **BASELINE))
    assert decision.accepted is False
    assert decision.feedback["reasons"] == ["all_metrics_equivalent"]
    assert decision.feedback["decisive_metric"] is None


def test_pareto_verdicts_name_held_and_tolerated_losses():
    gate, baseline, context = table_setup("pareto")
    feedback = gate.decide(baseline, uniform("c", context, quality=0.8, cost=5.0)).feedback
    assert [m["verdict"] for m in feedback["metrics"]] == ["improved", "tolerated_loss"]
    feedback = gate.decide(baseline, uniform("c", context, quality=0.8, cost=4.0)).feedback
    assert [m["verdict"] for m in feedback["metrics"]] == ["improved", "held"]


def test_a_pareto_trade_off_names_the_first_regressed_metric():
    gate, baseline, context = table_setup("pareto")
    feedback = gate.decide(baseline, uniform("c", context, quality=0.8, cost=7.0)).feedback
    assert feedback["decisive_metric"] == "cost"
    assert [m["verdict"] for m in feedback["metrics"]] == ["improved", "regressed"]


def test_pareto_rejects_an_improvement_whose_other_metric_is_not_protected():
    gate, context = gate_and_context(mode="pareto", n=2000)
    baseline = uniform("b", context, quality=0.7, cost=5.0)
    decision = gate.decide(baseline, uniform("c", context, quality=0.9, cost=5.8))
    # cost's interval is too wide to be protected (L < −r) yet not a regression (U ≥ −r)
    assert [m["verdict"] for m in decision.feedback["metrics"]] == ["improved", "unresolved"]
    assert decision.disposition == "unresolved"
    assert decision.feedback["reasons"] == ["interval_too_wide"]


def test_an_improvement_exactly_at_the_minimum_is_not_an_improvement():
    n, alpha_interval = 2000, 0.05
    lower = paired_delta_interval([0.7 - 0.5] * n, 1.0, alpha_interval).lower
    exact = dataclasses.replace(QUALITY, min_improvement=lower, equivalence_margin=0.0)
    gate, context = gate_and_context(exact, n=n)
    assert gate.objective.alpha_interval == alpha_interval
    decision = gate.decide(uniform("b", context, quality=0.5), uniform("c", context, quality=0.7))
    assert decision.disposition == "unresolved"
    assert decision.feedback["metrics"][0]["verdict"] == "unresolved"


# ---------------------------------------------------------------------------------------------------------------------
# ObjectiveGate: what can never promote


def test_a_missing_context_is_invalid():
    gate, context = gate_and_context(n=10)
    baseline = uniform("b", context, quality=0.7, cost=5.0)
    candidate = dataclasses.replace(uniform("c", context, quality=0.9, cost=1.0), objective_context=None)
    decision = gate.decide(baseline, candidate)
    assert decision.disposition == "invalid"
    assert decision.feedback["reasons"] == ["missing_context"]
    assert decision.feedback["context_mismatch"] == {"candidate": ["missing_context"]}
    assert decision.accepted is False


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("objective_digest", "0" * 64),
        ("cohort", "november"),
        ("evaluator_version", "eval-2"),
        ("evaluation_design", "single-run"),
        ("budget_profile", "cheap"),
        ("evidence_partition", "training"),
        ("measurement_basis", {"quality": "per attempt", "cost": "per task"}),
        ("expected_task_ids", task_ids(11)[1:]),
    ],
)
def test_a_changed_context_field_is_invalid_and_named(field, value):
    gate, context = gate_and_context(n=10)
    changed = dataclasses.replace(context, **{field: value})
    baseline = uniform("b", context, quality=0.7, cost=5.0)
    candidate = dataclasses.replace(uniform("c", context, quality=0.9, cost=1.0), objective_context=changed)
    decision = gate.decide(baseline, candidate)
    assert decision.disposition == "invalid"
    assert decision.feedback["reasons"] == ["context_mismatch"]
    assert decision.feedback["context_mismatch"] == {"candidate": [field]}


def test_a_context_document_equal_to_the_gate_context_is_accepted_as_that_context():
    gate, context = gate_and_context(n=10)
    baseline = uniform("b", context, quality=0.7, cost=5.0)
    candidate = dataclasses.replace(
        uniform("c", context, quality=0.7, cost=5.0), objective_context=context.to_document()
    )
    assert gate.decide(baseline, candidate).disposition != "invalid"


def test_a_deferred_empty_evaluation_is_unmeasured():
    gate, context = gate_and_context(n=10)
    baseline = uniform("b", context, quality=0.7, cost=5.0)
    deferred = Evaluation(ref="c", score=None, objective_context=context)
    decision = gate.decide(baseline, deferred)
    assert decision.disposition == "unmeasured"
    assert decision.feedback["reasons"] == ["deferred_evaluation"]
    assert gate.decide(deferred, baseline).disposition == "unmeasured"


def test_the_context_is_checked_before_the_deferred_evaluation():
    gate, context = gate_and_context(n=10)
    deferred = Evaluation(ref="c", score=None)
    assert gate.decide(uniform("b", context, quality=0.7, cost=5.0), deferred).feedback["reasons"] == [
        "missing_context"
    ]


def test_duplicated_task_ids_are_invalid():
    gate, context = gate_and_context(n=10)
    baseline = uniform("b", context, quality=0.7, cost=5.0)
    good = uniform("c", context, quality=0.9, cost=1.0)
    candidate = dataclasses.replace(good, per_task=(*good.per_task, good.per_task[0]))
    decision = gate.decide(baseline, candidate)
    assert decision.disposition == "invalid"
    assert decision.feedback["reasons"] == ["duplicate_task_ids"]
    assert decision.feedback["pairing"] == {"candidate": {"duplicates": ["task-0000"], "missing": [], "unexpected": []}}


def test_a_missing_task_is_incomplete_pairing():
    gate, context = gate_and_context(n=10)
    good = uniform("b", context, quality=0.7, cost=5.0)
    baseline = dataclasses.replace(good, per_task=good.per_task[1:])
    decision = gate.decide(baseline, uniform("c", context, quality=0.9, cost=1.0))
    assert decision.disposition == "invalid"
    assert decision.feedback["reasons"] == ["incomplete_pairing"]
    assert decision.feedback["pairing"]["baseline"]["missing"] == ["task-0000"]
    assert decision.feedback["coverage"] == {"expected": 10, "baseline": 9, "candidate": 10}


def test_an_extra_task_is_incomplete_pairing():
    gate, context = gate_and_context(n=10)
    good = uniform("c", context, quality=0.9, cost=1.0)
    extra = TaskOutcome("stranger", 0.9, True, metrics={"quality": 0.9, "cost": 1.0})
    decision = gate.decide(
        uniform("b", context, quality=0.7, cost=5.0), dataclasses.replace(good, per_task=(*good.per_task, extra))
    )
    assert decision.disposition == "invalid"
    assert decision.feedback["reasons"] == ["incomplete_pairing"]
    assert decision.feedback["pairing"]["candidate"]["unexpected"] == ["stranger"]


@pytest.mark.parametrize(
    ("value", "reported"),
    [
        (True, True),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (1.5, 1.5),
        (-0.01, -0.01),
        ("0.9", "0.9"),
        ([0.9], "[0.9]"),
    ],
    ids=["bool", "nan", "inf", "-inf", "above", "below", "string", "list"],
)
def test_an_invalid_value_is_invalid_and_never_clipped(value, reported):
    gate, context = gate_and_context(n=10)
    rows = {task_id: {"quality": 0.9, "cost": 1.0} for task_id in context.expected_task_ids}
    rows["task-0003"] = {"quality": value, "cost": 1.0}
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), measured("c", context, rows))
    assert decision.disposition == "invalid"
    assert decision.feedback["reasons"] == ["invalid_value"]
    assert decision.feedback["invalid_values"] == [
        {"side": "candidate", "task_id": "task-0003", "metric": "quality", "value": reported}
    ]
    assert decision.feedback["metrics"] == []


def test_a_value_on_the_bound_is_valid():
    gate, context = gate_and_context(n=10)
    decision = gate.decide(uniform("b", context, quality=0.0, cost=10.0), uniform("c", context, quality=1.0, cost=0))
    assert decision.disposition != "invalid"


def test_fewer_units_than_min_units_is_unresolved():
    gate, context = gate_and_context(n=4, min_units=5)
    decision = gate.decide(uniform("b", context, quality=0.0, cost=10.0), uniform("c", context, quality=1.0, cost=0))
    assert decision.disposition == "unresolved"
    assert decision.feedback["reasons"] == ["insufficient_units"]


def test_equal_observations_on_a_small_sample_are_unresolved_not_equivalent():
    for mode in ("lexicographic", "pareto"):
        gate, context = gate_and_context(mode=mode, n=30)
        decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.7, cost=5))
        assert decision.disposition == "unresolved"
        assert decision.feedback["reasons"] == ["interval_too_wide"]
        assert decision.feedback["decisive_metric"] == "quality"


@pytest.mark.parametrize("mode", ["lexicographic", "pareto"])
def test_with_a_zero_equivalence_margin_identical_results_are_never_equivalent(mode):
    exact = dataclasses.replace(QUALITY, equivalence_margin=0.0)
    gate, context = gate_and_context(exact, mode=mode, n=2000)
    decision = gate.decide(uniform("b", context, quality=0.7), uniform("c", context, quality=0.7))
    assert decision.disposition == "unresolved"


def test_an_unknown_metric_reached_in_lexicographic_order_is_unmeasured():
    gate, context = gate_and_context(n=2000)
    candidate = uniform("c", context, quality=None, cost=1.0)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), candidate)
    assert decision.disposition == "unmeasured"
    assert decision.feedback["reasons"] == ["metric_unmeasured"]
    assert decision.feedback["unknown_metrics"] == ["quality"]
    assert decision.feedback["metrics"][0]["known"] is False
    assert "baseline_mean" not in decision.feedback["metrics"][0]


def test_a_single_null_makes_the_metric_unknown():
    gate, context = gate_and_context(n=2000)
    rows = {task_id: {"quality": 0.9, "cost": 5.0} for task_id in context.expected_task_ids}
    rows["task-0007"] = {"quality": None, "cost": 5.0}
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), measured("c", context, rows))
    assert decision.disposition == "unmeasured"


def test_an_absent_metric_counts_as_unknown():
    gate, context = gate_and_context(n=2000)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, cost=5.0))
    assert decision.feedback["unknown_metrics"] == ["quality"]
    assert decision.disposition == "unmeasured"


def test_an_unknown_metric_after_the_decisive_one_does_not_block_lexicographic_acceptance():
    gate, context = gate_and_context(n=2000)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.8, cost=None))
    assert decision.disposition == "accepted"
    assert decision.feedback["unknown_metrics"] == ["cost"]


def test_any_unknown_optimized_metric_leaves_pareto_unmeasured():
    gate, context = gate_and_context(mode="pareto", n=2000)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.8, cost=None))
    assert decision.disposition == "unmeasured"
    assert decision.feedback["reasons"] == ["metric_unmeasured"]
    assert decision.feedback["decisive_metric"] == "cost"


# ---------------------------------------------------------------------------------------------------------------------
# ObjectiveGate: floors, ceilings, report-only metrics


def constrained_gate(n=2000, **limits):
    cost = dataclasses.replace(COST, **limits)
    return gate_and_context(QUALITY, cost, n=n)


def test_a_ceiling_clearly_exceeded_is_a_constraint_violation():
    gate, context = constrained_gate(ceiling=6.0)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.9, cost=7.0))
    assert decision.disposition == "rejected"
    assert decision.feedback["reasons"] == ["constraint_violation"]
    assert decision.feedback["decisive_metric"] == "cost"
    assert decision.feedback["constraints"]["cost"]["status"] == "violated"


def test_a_ceiling_inside_the_candidate_interval_is_unresolved():
    gate, context = constrained_gate(ceiling=6.0)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.9, cost=5.9))
    assert decision.disposition == "unresolved"
    assert decision.feedback["reasons"] == ["constraint_unresolved"]


def test_a_ceiling_clearly_met_lets_the_mode_rule_decide():
    gate, context = constrained_gate(ceiling=6.0)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.9, cost=4.0))
    assert decision.disposition == "accepted"
    status = decision.feedback["constraints"]["cost"]
    assert status["status"] == "satisfied"
    assert status["candidate_mean"] == 4.0
    assert status["interval"][1] < 6.0


def test_a_floor_clearly_missed_is_a_violation_and_a_close_one_unresolved():
    gate, context = constrained_gate(floor=3.0)
    baseline = uniform("b", context, quality=0.7, cost=5.0)
    assert gate.decide(baseline, uniform("c", context, quality=0.9, cost=2.0)).feedback["reasons"] == [
        "constraint_violation"
    ]
    assert gate.decide(baseline, uniform("c", context, quality=0.9, cost=3.1)).feedback["reasons"] == [
        "constraint_unresolved"
    ]
    assert gate.decide(baseline, uniform("c", context, quality=0.9, cost=4.0)).disposition == "accepted"


def test_a_constrained_metric_with_unknown_data_is_constraint_unmeasured():
    gate, context = constrained_gate(ceiling=6.0)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=0.9, cost=None))
    assert decision.disposition == "unmeasured"
    assert decision.feedback["reasons"] == ["constraint_unmeasured"]
    assert decision.feedback["constraints"] == {"cost": {"status": "unmeasured"}}


def test_a_violation_wins_over_an_unmeasured_constraint():
    quality = dataclasses.replace(QUALITY, floor=0.5)
    cost = dataclasses.replace(COST, ceiling=6.0)
    gate, context = gate_and_context(quality, cost, n=2000)
    decision = gate.decide(uniform("b", context, quality=0.7, cost=5.0), uniform("c", context, quality=None, cost=8.0))
    assert decision.feedback["reasons"] == ["constraint_violation"]
    assert decision.feedback["constraints"]["quality"] == {"status": "unmeasured"}


def test_the_alpha_is_split_over_optimized_metrics_and_constrained_ones():
    gate, _ = constrained_gate(ceiling=6.0, n=10)
    assert gate.objective.interval_count() == 3
    assert gate.objective.alpha_interval == pytest.approx(0.05 / 3)


def test_a_report_only_metric_never_decides_and_its_unknowns_do_not_block():
    latency = MetricSpec("latency", "s", "minimize", 0.0, 60.0, role="report_only")
    gate, context = gate_and_context(QUALITY, latency, mode="pareto", n=2000)
    decision = gate.decide(
        uniform("b", context, quality=0.7, latency=1.0), uniform("c", context, quality=0.8, latency=50.0)
    )
    assert decision.disposition == "accepted"
    report = decision.feedback["metrics"][1]
    assert (report["informational"], report["verdict"], report["reached"]) == (True, None, False)
    assert report["oriented_interval"][1] < 0
    assert gate.objective.interval_count() == 1
    missing = gate.decide(uniform("b", context, quality=0.7, latency=1.0), uniform("c", context, quality=0.8))
    assert missing.disposition == "accepted"
    assert missing.feedback["unknown_metrics"] == ["latency"]


def test_a_report_only_value_out_of_bounds_is_still_invalid():
    latency = MetricSpec("latency", "s", "minimize", 0.0, 60.0, role="report_only")
    gate, context = gate_and_context(QUALITY, latency, n=10)
    decision = gate.decide(
        uniform("b", context, quality=0.7, latency=1.0), uniform("c", context, quality=0.8, latency=61.0)
    )
    assert decision.disposition == "invalid"


# ---------------------------------------------------------------------------------------------------------------------
# Properties

SCORE_STEPS = st.integers(min_value=1, max_value=100)


@st.composite
def strictly_worse(draw):
    """Baseline per-task scores and a candidate whose every task is strictly lower (in hundredths)."""
    n = draw(st.integers(min_value=2, max_value=30))
    base = draw(st.lists(SCORE_STEPS, min_size=n, max_size=n))
    drops = [draw(st.integers(min_value=1, max_value=b)) for b in base]
    return [b / 100 for b in base], [(b - d) / 100 for b, d in zip(base, drops, strict=True)]


@settings(max_examples=60, deadline=None)
@given(strictly_worse())
def test_no_scalar_or_paired_gate_accepts_a_candidate_worse_on_every_task(pair):
    base, cand = pair
    best, candidate = scored("base", base), scored("cand", cand)
    gates = [TieAcceptingGate(), StrictImprovementGate(), PairedGate(min_tasks=1, resamples=200)]
    for gate in gates:
        assert gate.decide(best, candidate).accepted is False


@settings(max_examples=60, deadline=None)
@given(strictly_worse(), st.sampled_from(["lexicographic", "pareto"]))
def test_the_objective_gate_never_accepts_a_candidate_worse_on_every_task(pair, mode):
    base, cand = pair
    gate, context = gate_and_context(QUALITY, mode=mode, n=len(base))
    ids = context.expected_task_ids
    best = measured("base", context, {task_id: {"quality": q} for task_id, q in zip(ids, base, strict=True)})
    candidate = measured("cand", context, {task_id: {"quality": q} for task_id, q in zip(ids, cand, strict=True)})
    assert gate.decide(best, candidate).accepted is False


scores = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(scores, scores)
def test_the_tie_accepting_gate_agrees_with_greater_or_equal(best, candidate):
    decision = TieAcceptingGate().decide(just_score("a", best), just_score("b", candidate))
    assert decision.accepted is (candidate >= best)
    assert decision.feedback["accepted"] is decision.accepted


@given(scores, scores, st.floats(min_value=0.0, max_value=0.5, allow_nan=False))
def test_the_strict_gate_agrees_with_greater_than_best_plus_delta(best, candidate, delta):
    decision = StrictImprovementGate(minimum_delta=delta).decide(just_score("a", best), just_score("b", candidate))
    assert decision.accepted is (candidate > best + delta)
