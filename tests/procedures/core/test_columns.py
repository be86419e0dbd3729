"""Mining and offline replay over runs streamed as columns (procedures.core.columns) give exactly what
learn_procedure, the literal reference and replay_procedure give on the same runs."""

import dataclasses
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procedures.core import ProcedureStep, ReplayCase, learn_procedure, replay_procedure
from procedures.core import columns as columns_module
from procedures.core.columns import NOT_ASCENDING, OfflineReplay, learn_streamed
from procedures.core.replay import CaseRun
from tests.helpers.procedure_runs import repeated_runs, run, tool_runs
from tests.procedures.core.reference import reference_learn_procedure
from trajectories.core import TrajectoryStep

SCALE = int(os.environ.get("WAYMARK_HYPOTHESIS_SCALE", "1"))


class Stream:
    """The runs of a mapping as columns in ascending id order, optionally with arguments as JSON text; counts
    how many times it is read."""

    def __init__(self, runs, *, as_json=False):
        self.runs = runs
        self.as_json = as_json
        self.reads = 0

    def __call__(self):
        self.reads += 1
        for trajectory_id in sorted(self.runs):
            steps = self.runs[trajectory_id]
            arguments = [json.dumps(dict(step.arguments)) if self.as_json else step.arguments for step in steps]
            yield trajectory_id, [step.tool for step in steps], arguments


def outcome(function, *args, **kwargs):
    try:
        return function(*args, intent="intent", **kwargs)
    except ValueError as error:
        return str(error)


def streamed(runs, *, as_json=False):
    stream = Stream(runs, as_json=as_json)
    return outcome(learn_streamed, stream, decode=json.loads if as_json else lambda value: value)


@settings(max_examples=500 * SCALE, deadline=None)
@given(tool_runs(), st.sampled_from([1, 2, 3, 256]))
def test_streamed_mining_gives_the_candidate_of_learn_procedure_and_the_reference(runs, guess_runs):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns_module, "GUESS_RUNS", guess_runs)
        result = streamed(runs)
    assert result == outcome(learn_procedure, runs)
    assert result == outcome(reference_learn_procedure, runs)
    without_ids = outcome(learn_streamed, Stream(runs), keep_source_ids=False)  # how mining calls it
    if isinstance(result, str):
        assert without_ids == result
    else:
        assert without_ids == dataclasses.replace(result, source_trajectory_ids=())


def _json_safe(runs):
    """The same runs with plain-dict arguments (what a JSON round trip gives back)."""
    return {
        trajectory_id: [
            TrajectoryStep(step.ordinal, step.tool, "execute", json.loads(json.dumps(dict(step.arguments))), ok=True)
            for step in steps
        ]
        for trajectory_id, steps in runs.items()
    }


@settings(max_examples=300 * SCALE, deadline=None)
@given(repeated_runs(), st.integers(min_value=1, max_value=45))
def test_arguments_read_as_json_text_are_compared_as_python_values(runs, guess_runs):
    # 1, 1.0 and True are different JSON texts but equal Python values: retention must not go by the text.
    runs = _json_safe(runs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns_module, "GUESS_RUNS", guess_runs)
        result = streamed(runs, as_json=True)
    assert result == outcome(learn_procedure, runs)
    assert result == outcome(reference_learn_procedure, runs)


def test_a_guess_that_holds_reads_the_runs_once_and_one_that_does_not_reads_them_twice():
    runs = {f"{number:03}": run("a", "b", "c", arguments={0: {"n": 1}}) for number in range(10)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns_module, "GUESS_RUNS", 3)
        holds = Stream(runs)
        assert learn_streamed(holds, intent="i") == learn_procedure(runs, intent="i")
        runs["009"] = run("a", "c", arguments={0: {"n": 1}})  # the last run shrinks the fold: the guess was too long
        shrinks = Stream(runs)
        candidate = learn_streamed(shrinks, intent="i")
    assert (holds.reads, shrinks.reads) == (1, 2)
    assert candidate == learn_procedure(runs, intent="i") == reference_learn_procedure(runs, intent="i")
    assert [step.tool for step in candidate.steps] == ["a", "c"]
    assert dict(candidate.steps[0].arguments) == {"n": 1}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([], "intent and at least one trajectory are required"),
        ([("b", ["x"], [{}]), ("a", ["x"], [{}])], NOT_ASCENDING),
        ([("a", ["x"], [{}]), ("a", ["x"], [{}])], NOT_ASCENDING),
        ([(" ", ["x"], [{}])], "source trajectories must be identified, non-empty, and successful"),
        ([("a", ["x"], [{}]), ("b", [], [])], "source trajectories must be identified, non-empty, and successful"),
        ([("a", ["x"], [{}]), ("b", ["y"], [{}])], "successful trajectories share no procedure steps"),
    ],
)
def test_streamed_mining_refuses_what_learn_procedure_refuses_and_unordered_streams(rows, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        learn_streamed(lambda: iter(rows), intent="i")


def test_a_blank_intent_is_refused_before_reading():
    with pytest.raises(ValueError, match=r"^intent and at least one trajectory are required$"):
        learn_streamed(lambda: pytest.fail("read"), intent="  ")


# --- offline replay over columns -------------------------------------------------------------------------------------
ARGUMENTS = st.sampled_from([{}, {"k": 1}, {"k": 1.0}, {"k": "1"}, {"k": 2, "j": None}])


@st.composite
def replay_scenarios(draw):
    tools = st.sampled_from(["a", "b", "c", "d"])
    procedure = [
        ProcedureStep(tool=tool, arguments=draw(ARGUMENTS)) for tool in draw(st.lists(tools, min_size=1, max_size=4))
    ]
    active = None
    if draw(st.booleans()):
        active = [ProcedureStep(tool=tool, arguments=draw(ARGUMENTS)) for tool in draw(st.lists(tools, min_size=1))]
    cases = []
    for number in range(draw(st.integers(min_value=0, max_value=8))):
        if draw(st.integers(min_value=0, max_value=5)) == 0:
            cases.append((str(number), None))
            continue
        steps = [
            TrajectoryStep(ordinal, tool, "execute", draw(ARGUMENTS), ok=draw(st.sampled_from([True, False, None])))
            for ordinal, tool in enumerate(draw(st.lists(tools, max_size=8)))
        ]
        outcome_ = draw(st.sampled_from(["success", "failure", "unknown"]))
        tokens = draw(st.integers(min_value=0, max_value=10_000))
        cost = draw(st.floats(min_value=0, max_value=10, allow_nan=False))
        cases.append((str(number), CaseRun(outcome=outcome_, steps=steps, tokens=tokens, cost=cost)))
    return procedure, active, cases


@settings(max_examples=400 * SCALE, deadline=None)
@given(replay_scenarios())
def test_offline_replay_over_columns_gives_the_cases_and_report_of_replay_procedure(scenario):
    procedure, active, cases = scenario
    expected = replay_procedure(
        procedure, [ReplayCase(case_id=case_id, run=run_) for case_id, run_ in cases], active=active
    )
    offline = OfflineReplay(procedure, active=active, decode=json.loads)
    results = []
    for case_id, run_ in cases:
        columns = None
        if run_ is not None:
            texts = [json.dumps(dict(step.arguments)) for step in run_.steps]
            columns = (run_.outcome, [step.tool for step in run_.steps], texts, run_.tokens, run_.cost)
        results.append(offline.case(case_id, columns))
    report = offline.report()
    assert tuple(results) == expected.cases
    assert report.metrics == expected.metrics
    assert report.active_metrics == expected.active_metrics
    for name in ("regressions", "improvements", "counterexamples", "unanswered", "active_unanswered"):
        assert getattr(report, name) == getattr(expected, name)


def test_offline_replay_over_columns_refuses_a_bad_outcome_like_a_case_run():
    offline = OfflineReplay([ProcedureStep(tool="a")])
    with pytest.raises(ValueError, match=r"^run outcome must be one of success, failure, unknown$"):
        offline.case("1", ("done", ["a"], [{}], 0, 0.0))


@settings(max_examples=200 * SCALE, deadline=None)
@given(tool_runs())
def test_the_skipping_baseline_of_the_benchmark_agrees_with_the_reference(runs):
    # bench/mining.py's baseline must compute the same thing, or its figure means nothing.
    from tests.procedures.core.reference import skipping_reference_learn_procedure

    assert outcome(skipping_reference_learn_procedure, runs) == outcome(reference_learn_procedure, runs)
