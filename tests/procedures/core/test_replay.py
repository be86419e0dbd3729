"""replay_procedure: every report dimension, regressions, counterexamples, unanswered cases, both modes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procedures.core import (
    DEFAULT_PROCEDURE_CHECKS,
    CaseRun,
    ProcedureStep,
    ReplayCase,
    learn_procedure,
    regression_gate,
    replay_procedure,
)
from trajectories.core import TrajectoryStep

CANDIDATE = (
    ProcedureStep(tool="lookup_policy", arguments={"tier": "enterprise"}),
    ProcedureStep(tool="issue_refund", arguments={"currency": "USD", "notify": True}),
)
ACTIVE = (ProcedureStep(tool="lookup_policy"), ProcedureStep(tool="notify"))


def step(ordinal, tool, arguments=None, *, tokens=0, cost=0.0):
    return TrajectoryStep(ordinal, tool, "execute", arguments or {}, ok=True, input_tokens=tokens, cost=cost)


def recorded(outcome, *tools, arguments=None, **totals):
    arguments = arguments or {}
    return CaseRun(outcome=outcome, steps=[step(i, tool, arguments.get(i)) for i, tool in enumerate(tools)], **totals)


def test_it_reports_task_success_and_tool_correctness_over_answered_cases():
    cases = [
        ReplayCase(case_id="follows-ok", run=recorded("success", "lookup_policy", "check", "issue_refund")),
        ReplayCase(case_id="skips-ok", run=recorded("success", "issue_refund")),
        ReplayCase(case_id="follows-failed", run=recorded("failure", "lookup_policy", "issue_refund", "error")),
        ReplayCase(case_id="unknown", run=recorded("unknown", "lookup_policy", "issue_refund")),
    ]
    report = replay_procedure(CANDIDATE, cases)
    assert report.mode == "offline"
    assert report.metrics["cases"] == 4
    assert report.metrics["answered"] == 4
    assert report.metrics["task_success"] == 0.25  # succeeded AND follows: only "follows-ok"
    assert report.metrics["outcome_success"] == 0.5
    assert report.metrics["tool_correctness"] == 0.75
    assert [case.candidate.passed for case in report.cases] == [True, False, False, False]
    assert report.active_metrics is None
    assert report.metrics["regressions"] == 0


def test_failed_runs_that_follow_the_procedure_are_counterexamples():
    cases = [
        ReplayCase(case_id="c1", run=recorded("failure", "lookup_policy", "issue_refund")),
        ReplayCase(case_id="c2", run=recorded("failure", "issue_refund")),
        ReplayCase(case_id="c3", run=recorded("unknown", "lookup_policy", "issue_refund")),
        ReplayCase(case_id="c4", run=recorded("success", "lookup_policy", "issue_refund")),
    ]
    report = replay_procedure(CANDIDATE, cases)
    assert report.counterexamples == ("c1",)
    assert report.metrics["counterexamples"] == 1


def test_grounding_counts_retained_arguments_seen_with_equal_values_at_the_leftmost_step():
    cases = [
        # Leftmost lookup_policy has tier=basic, the later one enterprise: alignment is leftmost, so not observed.
        ReplayCase(
            case_id="a",
            run=recorded(
                "success",
                "lookup_policy",
                "lookup_policy",
                "issue_refund",
                arguments={0: {"tier": "basic"}, 1: {"tier": "enterprise"}, 2: {"currency": "USD", "notify": 1}},
            ),
        ),
        # issue_refund missing entirely: its two retained arguments count as not observed.
        ReplayCase(case_id="b", run=recorded("success", "lookup_policy", arguments={0: {"tier": "enterprise"}})),
    ]
    report = replay_procedure(CANDIDATE, cases)
    assert [(c.candidate.observed_arguments, c.candidate.retained_arguments) for c in report.cases] == [(2, 3), (1, 3)]
    assert report.metrics["grounding"] == 0.5


def test_grounding_has_no_value_when_the_procedure_retains_no_argument():
    report = replay_procedure(ACTIVE, [ReplayCase(case_id="a", run=recorded("success", "lookup_policy", "notify"))])
    assert report.metrics["grounding"] is None


def test_cost_is_the_mean_of_steps_tokens_and_money_over_answered_cases():
    with_totals = recorded("success", "lookup_policy", "issue_refund", tokens=300, cost=0.5)
    from_steps = CaseRun(
        outcome="success",
        steps=[step(0, "lookup_policy", tokens=40, cost=0.25), step(1, "x", tokens=60), step(2, "issue_refund")],
    )
    assert from_steps.tokens == 100 and from_steps.cost == 0.25
    report = replay_procedure(
        CANDIDATE,
        [ReplayCase(case_id="a", run=with_totals), ReplayCase(case_id="b", run=from_steps)],
    )
    assert report.metrics["mean_steps"] == 2.5
    assert report.metrics["mean_tokens"] == 200
    assert report.metrics["mean_cost"] == 0.375


def test_regressions_are_cases_the_active_version_passes_and_the_candidate_fails():
    cases = [
        # Follows the active version (lookup_policy, notify) but not the candidate: a regression.
        ReplayCase(case_id="regressed", run=recorded("success", "lookup_policy", "notify")),
        # Follows both: both pass.
        ReplayCase(case_id="both", run=recorded("success", "lookup_policy", "issue_refund", "notify")),
        # Follows only the candidate: an improvement.
        ReplayCase(case_id="improved", run=recorded("success", "lookup_policy", "issue_refund")),
        # Failed: nobody passes, not a regression.
        ReplayCase(case_id="failed", run=recorded("failure", "lookup_policy", "notify")),
    ]
    report = replay_procedure(CANDIDATE, cases, active=ACTIVE)
    assert report.regressions == ("regressed",)
    assert report.improvements == ("improved",)
    assert report.metrics["regressions"] == 1
    assert report.metrics["improvements"] == 1
    assert report.metrics["task_success"] == 0.5
    assert report.active_metrics["task_success"] == 0.5
    assert report.active_metrics["counterexamples"] == 1
    assert "regressions" not in report.active_metrics
    gate = regression_gate(report.metrics, report.active_metrics, DEFAULT_PROCEDURE_CHECKS)
    assert not gate.passed
    assert [check.metric for check in gate.failures] == ["regressions"]


def test_a_candidate_that_loses_passes_fails_the_default_gate():
    cases = [ReplayCase(case_id=str(i), run=recorded("success", "lookup_policy", "notify")) for i in range(3)]
    report = replay_procedure(CANDIDATE, cases, active=ACTIVE)
    gate = regression_gate(report.metrics, report.active_metrics, DEFAULT_PROCEDURE_CHECKS)
    assert {check.metric for check in gate.failures} == {"task_success", "tool_correctness", "regressions"}


def test_live_replay_judges_each_arm_on_its_own_run_and_passes_on_success():
    cases = [
        ReplayCase(
            case_id="a",
            run=recorded("success", "issue_refund"),
            active_run=recorded("failure", "lookup_policy", "notify"),
        ),
        ReplayCase(
            case_id="b",
            run=recorded("failure", "lookup_policy", "issue_refund"),
            active_run=recorded("success", "lookup_policy", "notify"),
        ),
    ]
    report = replay_procedure(CANDIDATE, cases, active=ACTIVE, mode="live")
    assert [case.candidate.passed for case in report.cases] == [True, False]
    assert report.metrics["tool_correctness"] == 0.5
    assert report.regressions == ("b",)
    assert report.improvements == ("a",)
    assert report.counterexamples == ("b",)


def test_unanswered_cases_are_reported_and_never_count_as_passes():
    cases = [
        ReplayCase(case_id="answered", run=recorded("success", "lookup_policy", "issue_refund"), active_run=None),
        ReplayCase(case_id="silent", run=None, active_run=recorded("success", "lookup_policy", "notify")),
        ReplayCase(case_id="both-silent", run=None, active_run=None),
    ]
    report = replay_procedure(CANDIDATE, cases, active=ACTIVE, mode="live")
    assert report.unanswered == ("silent", "both-silent")
    assert report.active_unanswered == ("answered", "both-silent")
    assert report.metrics["answered"] == 1
    assert report.metrics["answered_rate"] == pytest.approx(1 / 3)
    assert report.metrics["task_success"] == 1.0
    assert report.regressions == ()
    silent = report.cases[1].candidate
    assert silent.answered is False and silent.passed is False and silent.outcome is None
    gate = regression_gate(report.metrics, report.active_metrics, DEFAULT_PROCEDURE_CHECKS)
    assert [check.metric for check in gate.failures] == ["answered_rate"]


def test_with_no_answered_case_every_rate_has_no_value_and_the_gate_fails():
    report = replay_procedure(CANDIDATE, [ReplayCase(case_id="x", run=None)], mode="live")
    assert report.metrics["task_success"] is None
    assert report.metrics["mean_cost"] is None
    assert not regression_gate(report.metrics, None, DEFAULT_PROCEDURE_CHECKS).passed
    empty = replay_procedure(CANDIDATE, [])
    assert empty.metrics["answered_rate"] is None


def test_the_report_serializes_for_storage():
    candidate = learn_procedure(
        {"r1": [step(0, "lookup_policy"), step(1, "issue_refund")]},
        intent="refund",
    )
    report = replay_procedure(
        candidate, [ReplayCase(case_id="a", run=recorded("failure", "lookup_policy", "issue_refund"))], active=ACTIVE
    )
    data = report.to_dict()
    assert data["mode"] == "offline"
    assert data["counterexamples"] == ["a"]
    assert data["cases"][0]["candidate"]["counterexample"] is True
    assert data["cases"][0]["active"]["follows"] is False
    assert data["cases"][0]["regression"] is False
    assert data["active_metrics"]["task_success"] == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: replay_procedure([], []), "the candidate procedure must be a non-empty sequence of procedure steps"),
        (lambda: replay_procedure(["search"], []), "the candidate procedure must be a non-empty"),
        (lambda: replay_procedure(CANDIDATE, [], active=[]), "the active procedure must be a non-empty"),
        (lambda: replay_procedure(CANDIDATE, [], mode="dry"), "replay mode must be one of offline, live"),
        (lambda: replay_procedure(CANDIDATE, [ReplayCase(case_id=" ", run=None)]), "replay case id is required"),
        (
            lambda: replay_procedure(CANDIDATE, [ReplayCase(case_id="a", run=None), ReplayCase(case_id="a", run=None)]),
            "replay case 'a' is repeated",
        ),
        (
            lambda: replay_procedure(
                CANDIDATE, [ReplayCase(case_id="a", run=None, active_run=recorded("success", "x"))]
            ),
            "offline replay judges both versions on the recorded run",
        ),
        (lambda: CaseRun(outcome="done", steps=[]), "run outcome must be one of success, failure, unknown"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- the regex-based judge against a plain walk over the steps -----------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "]"])
VALUES = st.sampled_from([1, 1.0, True, 2, "1"])


def plain_judgement(procedure, run):
    """follows and observed arguments by walking the steps: leftmost match after the previous match."""
    position, observed, matched = 0, 0, 0
    for wanted in procedure:
        while position < len(run.steps) and run.steps[position].tool != wanted.tool:
            position += 1
        if position == len(run.steps):
            break
        present = run.steps[position].arguments
        observed += sum(1 for key, value in wanted.arguments.items() if key in present and present[key] == value)
        matched += 1
        position += 1
    return matched == len(procedure), observed


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(NAMES, st.dictionaries(st.sampled_from("kj"), VALUES, max_size=2)), min_size=1, max_size=5),
    st.lists(st.tuples(NAMES, st.dictionaries(st.sampled_from("kj"), VALUES, max_size=2)), max_size=10),
    st.sampled_from(["success", "failure", "unknown"]),
)
def test_follows_and_grounding_match_a_plain_walk_over_the_steps(procedure_rows, run_rows, outcome):
    procedure = [ProcedureStep(tool=tool, arguments=arguments) for tool, arguments in procedure_rows]
    run = CaseRun(outcome=outcome, steps=[step(i, tool, arguments) for i, (tool, arguments) in enumerate(run_rows)])
    arm = replay_procedure(procedure, [ReplayCase(case_id="x", run=run)]).cases[0].candidate
    follows, observed = plain_judgement(procedure, run)
    assert arm.follows is follows
    assert arm.observed_arguments == observed
    assert arm.retained_arguments == sum(len(arguments) for _, arguments in procedure_rows)
    assert arm.passed is (follows and outcome == "success")
    assert arm.counterexample is (follows and outcome == "failure")
