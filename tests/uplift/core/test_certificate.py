"""The paired certificate: its arithmetic against hand-computed cases, the pairing rules, the policy's verdict and
sentence, the reuse budget that widens each new decision's interval, and a property: a candidate worse on every
task is never certified."""

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uplift.core.certificate import ArmOutcome, PairedTask, certify, paired_tasks
from uplift.core.policy import Policy, judge
from uplift.core.reuse import SplitBudget, alpha_for

P, F = ArmOutcome(passed=True), ArmOutcome(passed=False)


def pair(task_id, control, candidate, **options):
    return PairedTask(task_id=task_id, control=control, candidate=candidate, **options)


def test_repairs_breakages_and_means_by_hand():
    tasks = [
        pair("1", F, P),  # repair
        pair("2", F, P),  # repair
        pair("3", P, F, critical=True),  # critical breakage
        pair("4", P, P),
        pair("5", F, F),
        pair("6", ArmOutcome(passed=True, score=0.6), ArmOutcome(passed=True, score=0.9)),
    ]
    certificate = certify(tasks, alpha=0.05)
    assert (certificate.n, certificate.repairs, certificate.breakages) == (6, 2, 1)
    assert (certificate.both_passed, certificate.both_failed) == (2, 1)
    assert certificate.critical_breakages == ("3",)
    assert certificate.success.mean == pytest.approx((2 - 1) / 6)
    assert certificate.score.mean == pytest.approx((1 + 1 - 1 + 0 + 0 + 0.3) / 6)
    assert certificate.success.low <= certificate.success.mean <= certificate.success.high
    assert [row["outcome"] for row in certificate.task_rows()] == [
        "repair",
        "repair",
        "breakage",
        "both_passed",
        "both_failed",
        "both_passed",
    ]


def test_an_unanswered_control_is_left_out_and_an_unanswered_candidate_fails():
    missing = ArmOutcome(answered=False)
    certificate = certify([pair("1", missing, P), pair("2", P, missing), pair("3", F, P)], alpha=0.05)
    assert certificate.excluded == ("1",) and certificate.candidate_unanswered == ("2",)
    assert (certificate.n, certificate.repairs, certificate.breakages) == (2, 1, 1)
    assert certificate.score.mean == pytest.approx(0.0)


def test_pairing_two_arms_by_task_id_in_numeric_order():
    tasks = paired_tasks({"10": P, "9": F}, {"9": P, "11": P}, critical=["11"], models={"9": "claude-x"})
    assert [t.task_id for t in tasks] == ["9", "10", "11"]
    assert tasks[1].candidate.answered is False and tasks[2].control.answered is False
    assert tasks[2].critical and tasks[0].model == "claude-x"


def test_a_task_paired_twice_is_refused():
    with pytest.raises(ValueError, match="paired twice"):
        certify([pair("1", P, P), pair("1", F, F)], alpha=0.05)


def test_the_certificate_lists_the_models_it_was_measured_with():
    certificate = certify([pair("1", P, P, model="m-2"), pair("2", F, P, model="m-1"), pair("3", F, F)], alpha=0.05)
    assert certificate.models == ("m-1", "m-2")


def many(repairs, breakages, ties):
    tasks = [pair(f"r{i}", F, P) for i in range(repairs)]
    tasks += [pair(f"b{i}", P, F) for i in range(breakages)]
    tasks += [pair(f"t{i}", P, P) for i in range(ties)]
    return tasks


def test_the_policy_certifies_a_clear_improvement_and_says_so_in_a_sentence():
    certificate = certify(many(repairs=12, breakages=1, ties=80), alpha=0.05)
    verdict = judge(Policy(margin=0.02), certificate)
    assert verdict.passed and verdict.reasons == ()
    assert verdict.sentence.startswith("With 95% confidence the candidate is no worse than the version it replaces")
    assert "by more than 2 points of success rate" in verdict.sentence and "n = 93" in verdict.sentence


def test_the_policy_refuses_too_few_tasks_a_critical_breakage_and_a_bound_below_the_threshold():
    small = judge(Policy(min_n=10), certify(many(repairs=3, breakages=0, ties=2), alpha=0.05))
    assert not small.passed and any("at least 10" in reason for reason in small.reasons)
    critical = [*many(repairs=30, breakages=0, ties=60), pair("c", P, F, critical=True)]
    broken = judge(Policy(), certify(critical, alpha=0.05))
    assert not broken.passed and any("critical" in reason for reason in broken.reasons)
    even = judge(Policy(mode="superiority"), certify(many(repairs=5, breakages=5, ties=80), alpha=0.05))
    assert not even.passed and even.sentence.startswith("Not certified")


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.floats(0.001, 1)).map(lambda v: (v[0], max(0.0, v[0] - v[1]))),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from(["success", "score"]),
    st.sampled_from(["non_inferiority", "superiority"]),
    st.floats(0, 0.5),
)
def test_a_candidate_worse_on_every_task_is_never_certified(scores, metric, mode, margin):
    tasks = [
        pair(str(i), ArmOutcome(passed=before >= 0.5, score=before), ArmOutcome(passed=after >= 0.5, score=after))
        for i, (before, after) in enumerate(scores)
    ]
    verdict = judge(Policy(metric=metric, mode=mode, margin=margin, min_n=1), certify(tasks, alpha=0.05))
    assert not verdict.passed


def test_each_decision_on_a_split_spends_less_of_its_budget_and_the_budget_sums_to_alpha():
    assert alpha_for(1, 0.05) == pytest.approx(0.05 * 6 / math.pi**2)
    assert alpha_for(4, 0.05) == pytest.approx(alpha_for(1, 0.05) / 16)
    assert sum(alpha_for(k, 0.05) for k in range(1, 200_000)) == pytest.approx(0.05, rel=1e-4)


def test_the_reuse_correction_widens_the_interval_as_decisions_accumulate():
    tasks = many(repairs=15, breakages=3, ties=60)
    widths = []
    for taken in range(0, 8):
        budget = SplitBudget(alpha=0.05, max_decisions=20, decisions_taken=taken)
        certificate = certify(tasks, alpha=budget.next_alpha)
        widths.append(certificate.success.high - certificate.success.low)
    assert all(later > earlier for earlier, later in itertools.pairwise(widths))


def test_an_exhausted_split_refuses_another_decision():
    budget = SplitBudget(alpha=0.05, max_decisions=3, decisions_taken=3)
    assert budget.exhausted
    with pytest.raises(ValueError, match="fresh held-out runs"):
        _ = budget.next_alpha
    assert budget.spent == pytest.approx(sum(alpha_for(k, 0.05) for k in (1, 2, 3)))


def test_a_bad_policy_is_refused():
    for bad in ({"mode": "maybe"}, {"metric": "tokens"}, {"margin": -0.1}, {"min_n": 0}, {"alpha": 1}):
        with pytest.raises(ValueError):
            Policy(**bad)
    assert Policy.from_document(Policy(margin=0.05).to_document()) == Policy(margin=0.05)


def test_the_stored_columns_read_back_as_the_rows_and_old_row_lists_still_read():
    from uplift.core.certificate import ArmOutcome, PairedTask, certify, task_rows

    tasks = [
        PairedTask("1", ArmOutcome(passed=False, run_id=11), ArmOutcome(passed=True, run_id=12), model="m"),
        PairedTask("2", ArmOutcome(passed=True, score=0.75), ArmOutcome(passed=False, score=0.25)),
        PairedTask("3", ArmOutcome(answered=False), ArmOutcome(passed=True)),
        PairedTask("4", ArmOutcome(passed=True), ArmOutcome(answered=False)),
    ]
    certificate = certify(tasks, alpha=0.05, critical={"2"})
    rows = certificate.task_rows()
    assert task_rows(certificate.task_columns()) == rows
    assert [row["outcome"] for row in rows] == ["repair", "breakage", "excluded", "breakage"]
    assert [row["critical"] for row in rows] == [False, True, False, False]
    assert certificate.critical_breakages == ("2",)
    assert task_rows(rows) == rows and task_rows(None) == []


def test_the_intervals_read_the_pairs_in_betting_order_whatever_order_they_came_in():
    import random

    from uplift.core.certificate import ArmOutcome, PairedTask, betting_order, certify

    tasks = [PairedTask(f"t{i}", ArmOutcome(passed=i % 3 == 0), ArmOutcome(passed=i % 2 == 0)) for i in range(300)]
    shuffled = list(tasks)
    random.Random(4).shuffle(shuffled)
    assert certify(tasks, alpha=0.05).success == certify(shuffled, alpha=0.05).success
    ordered = sorted(tasks, key=lambda task: betting_order(task.task_id))
    assert ordered != tasks  # the order owes nothing to the ids' own order
