"""Trace handling (spec §6 step 2): sources, redaction, stale policy, stratified sampling and the attempts block."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphs.core import Step, skeleton
from graphs.core.evaluation import TaskOutcome, Trace
from graphs.core.traces import (
    TAIL_MARKER,
    StaticTraceSource,
    StratifiedSampler,
    StridedTraceSource,
    TraceSource,
    node_usage,
    order_attempts,
    redact_trace,
    render_attempts_block,
    stale_split,
    tail_cut,
    traces_document,
    traces_from_document,
)


def trace(trace_id, score=1.0, *, text="", steps=(), graph_ref=None, nodes=(), guidance=(), passed=None):
    outcome = TaskOutcome(f"task-{trace_id}", score, score >= 0.5 if passed is None else passed, "p", "t", {"k": 1})
    return Trace(
        trace_id,
        outcome,
        text=text or f"text of {trace_id}",
        steps=steps,
        graph_ref=graph_ref,
        nodes_visited=nodes,
        guidance=guidance,
    )


def ids(traces):
    return [t.id for t in traces]


# -- sources ---------------------------------------------------------------------------------------------------------


def test_static_source_returns_the_same_traces_every_round():
    traces = [trace("a"), trace("b")]
    source = StaticTraceSource(traces)
    assert isinstance(source, TraceSource)
    for iteration in (1, 2, 7):
        assert source.collect(skeleton(), graph_ref="r", iteration=iteration) == traces


def test_strided_source_takes_the_kth_window_and_wraps_around():
    traces = [trace(str(n)) for n in range(5)]
    source = StridedTraceSource(traces, 2)
    assert isinstance(source, TraceSource)
    windows = [ids(source.collect(skeleton(), graph_ref="r", iteration=k)) for k in (1, 2, 3, 4)]
    assert windows == [["0", "1"], ["2", "3"], ["4", "0"], ["1", "2"]]


def test_strided_source_with_a_stride_beyond_the_pool_returns_the_pool_once():
    source = StridedTraceSource([trace("a"), trace("b")], 5)
    assert ids(source.collect(skeleton(), graph_ref=None, iteration=2)) == ["a", "b"]


def test_strided_source_of_nothing_returns_nothing():
    assert StridedTraceSource([], 3).collect(skeleton(), graph_ref=None, iteration=1) == []


@pytest.mark.parametrize("stride", [0, -1, True, 1.5])
def test_strided_source_refuses_a_bad_stride(stride):
    with pytest.raises(ValueError):
        StridedTraceSource([trace("a")], stride)


# -- redaction -------------------------------------------------------------------------------------------------------


def test_redaction_covers_text_observations_and_guidance_only():
    original = trace(
        "a",
        text="secret text",
        steps=(Step("search", {"q": "secret"}, "secret result"), Step("answer", "secret", "")),
        guidance=("secret hint",),
    )
    redacted = redact_trace(original, lambda text: text.replace("secret", "[x]"))
    assert redacted.text == "[x] text"
    assert [step.observation for step in redacted.steps] == ["[x] result", ""]
    assert [step.args for step in redacted.steps] == [{"q": "secret"}, "secret"]
    assert redacted.guidance == ("[x] hint",)
    assert redacted.outcome == original.outcome
    assert redacted.meta == original.meta and redacted.id == original.id


def test_redaction_leaves_empty_texts_alone():
    redacted = redact_trace(Trace("a", TaskOutcome("t", 1.0, True), steps=(Step("x"),)), lambda text: "REDACTED")
    assert redacted.text == "" and redacted.steps[0].observation == ""


# -- stale policy ----------------------------------------------------------------------------------------------------

STALE_POOL = [trace("fresh", graph_ref="head"), trace("old", graph_ref="older"), trace("unknown", graph_ref=None)]


def test_warn_keeps_stale_traces_lists_them_and_warns():
    kept, stale, warnings = stale_split(STALE_POOL, "head", "warn")
    assert ids(kept) == ["fresh", "old", "unknown"]
    assert stale == ["old"]
    assert len(warnings) == 1 and "old" in warnings[0]


def test_drop_excludes_stale_traces_lists_them_and_warns():
    kept, stale, warnings = stale_split(STALE_POOL, "head", "drop")
    assert ids(kept) == ["fresh", "unknown"]
    assert stale == ["old"]
    assert len(warnings) == 1 and "old" in warnings[0]


def test_allow_keeps_everything_and_reports_nothing():
    assert stale_split(STALE_POOL, "head", "allow") == (STALE_POOL, [], [])


def test_no_stale_traces_means_no_warning():
    assert stale_split(STALE_POOL[:1], "head", "warn") == (STALE_POOL[:1], [], [])


def test_a_trace_without_graph_ref_is_never_stale():
    assert stale_split([trace("x")], None, "drop") == ([trace("x")], [], [])


def test_an_unknown_stale_policy_raises():
    with pytest.raises(ValueError, match="stale_trace_policy"):
        stale_split(STALE_POOL, "head", "ignore")


# -- stratified sampling ---------------------------------------------------------------------------------------------


def pool(failing=6, passing=6):
    return [trace(f"f{n}", 0.0) for n in range(failing)] + [trace(f"p{n}", 1.0) for n in range(passing)]


def test_none_and_none_keeps_every_trace():
    traces = pool()
    assert StratifiedSampler(None, None).sample(traces, 1) == traces


def test_sampling_takes_up_to_n_failing_and_m_passing():
    chosen = StratifiedSampler(2, 3).sample(pool(), 1)
    assert sum(t.id.startswith("f") for t in chosen) == 2
    assert sum(t.id.startswith("p") for t in chosen) == 3


def test_sampling_keeps_a_small_stratum_whole():
    chosen = StratifiedSampler(5, 5).sample(pool(failing=2, passing=1), 1)
    assert sorted(ids(chosen)) == ["f0", "f1", "p0"]


def test_none_for_one_stratum_keeps_that_whole_stratum():
    chosen = StratifiedSampler(None, 1).sample(pool(), 1)
    assert sum(t.id.startswith("f") for t in chosen) == 6
    assert sum(t.id.startswith("p") for t in chosen) == 1


def test_zero_takes_nothing_from_a_stratum():
    assert all(t.id.startswith("p") for t in StratifiedSampler(0, 2).sample(pool(), 1))


def test_the_success_threshold_splits_the_strata():
    traces = [trace("mid", 0.6), trace("low", 0.1)]
    assert ids(StratifiedSampler(1, 0, success_threshold=0.7).sample(traces, 1)) in (["mid"], ["low"])
    assert ids(StratifiedSampler(0, 1, success_threshold=0.7).sample(traces, 1)) == []
    assert ids(StratifiedSampler(0, 1, success_threshold=0.5).sample(traces, 1)) == ["mid"]


def test_sampled_traces_keep_their_given_order():
    traces = pool()
    chosen = StratifiedSampler(3, 3).sample(traces, 1)
    assert chosen == [t for t in traces if t in chosen]


def test_sampling_is_deterministic_for_a_seed_and_iteration():
    assert StratifiedSampler(2, 2, seed=5).sample(pool(), 4) == StratifiedSampler(2, 2, seed=5).sample(pool(), 4)
    sampler_a, sampler_b = StratifiedSampler(2, 2, seed=5), StratifiedSampler(2, 2, seed=5)
    assert [sampler_a.sample(pool(), k) for k in (1, 2, 3)] == [sampler_b.sample(pool(), k) for k in (1, 2, 3)]


def test_sampling_does_not_depend_on_the_input_order():
    traces = pool()
    forward = StratifiedSampler(2, 2).sample(traces, 4)
    backward = StratifiedSampler(2, 2).sample(list(reversed(traces)), 4)
    assert sorted(ids(forward)) == sorted(ids(backward))


def test_different_seeds_usually_pick_differently():
    picks = {tuple(ids(StratifiedSampler(2, 0, seed=seed).sample(pool(failing=12), 1))) for seed in range(10)}
    assert len(picks) > 1


def test_sampling_rotates_through_unseen_ids_before_repeating():
    sampler = StratifiedSampler(2, 2)
    rounds = [sampler.sample(pool(), k) for k in (1, 2, 3)]
    failing = [t.id for chosen in rounds for t in chosen if t.id.startswith("f")]
    passing = [t.id for chosen in rounds for t in chosen if t.id.startswith("p")]
    assert sorted(failing) == [f"f{n}" for n in range(6)]
    assert sorted(passing) == [f"p{n}" for n in range(6)]


def test_an_exhausted_stratum_starts_a_new_rotation():
    sampler = StratifiedSampler(4, 0)
    first = set(ids(sampler.sample(pool(failing=6, passing=0), 1)))
    second = set(ids(sampler.sample(pool(failing=6, passing=0), 2)))
    assert len(first) == len(second) == 4
    everyone = {f"f{n}" for n in range(6)}
    assert everyone - first <= second  # the two left over come before any repeat
    third = set(ids(sampler.sample(pool(failing=6, passing=0), 3)))
    assert everyone - second <= third  # the new rotation counts the leftovers as seen


def test_sampler_state_round_trips_and_continues_the_rotation():
    sampler = StratifiedSampler(2, 1, seed=3, success_threshold=0.4)
    sampler.sample(pool(), 1)
    document = json.loads(json.dumps(sampler.to_document()))
    restored = StratifiedSampler.from_document(document)
    assert restored == sampler
    assert restored.sample(pool(), 2) == sampler.sample(pool(), 2)


def test_sampler_forgets_ids_no_longer_offered():
    sampler = StratifiedSampler(1, 0)
    sampler.sample(pool(failing=3, passing=0), 1)
    sampler.sample([trace("new", 0.0), trace("newer", 0.0)], 2)
    assert sampler.seen["failing"] <= {"new", "newer"}


@pytest.mark.parametrize("size", [-1, 1.5, True])
def test_sampler_refuses_bad_sizes(size):
    with pytest.raises(ValueError):
        StratifiedSampler(size, None)


# -- the attempts block ----------------------------------------------------------------------------------------------


def test_attempts_come_high_scores_first_then_low_each_by_score_then_id():
    traces = [trace("b", 0.2), trace("a", 0.2), trace("c", 0.9), trace("d", 0.5), trace("e", 0.0), trace("f", 1.0)]
    assert ids(order_attempts(traces)) == ["f", "c", "d", "a", "b", "e"]
    text = render_attempts_block(traces)
    positions = [text.index(f"Attempt {trace_id} ") for trace_id in ["f", "c", "d", "a", "b", "e"]]
    assert positions == sorted(positions)
    assert text.index("High-scoring attempts") < text.index("Low-scoring attempts")


def test_the_threshold_decides_high_and_low():
    traces = [trace("a", 0.6), trace("b", 0.8)]
    text = render_attempts_block(traces, success_threshold=0.7)
    assert text.index("Attempt b ") < text.index("Low-scoring") < text.index("Attempt a ")


def test_each_attempt_names_id_score_and_passed():
    text = render_attempts_block([trace("a", 0.25, passed=True)])
    assert "Attempt a | task task-a | score 0.2500 | passed yes" in text
    assert "text of a" in text


def test_an_attempt_without_text_shows_its_steps():
    text = render_attempts_block([Trace("a", TaskOutcome("t", 1.0, True), steps=(Step("search", "q", "hit"),))])
    assert "Action: search(q)\nObservation: hit" in text


def test_stale_attempts_are_marked():
    text = render_attempts_block([trace("a"), trace("b")], stale_ids=["b"])
    lines = [line for line in text.splitlines() if line.startswith("--- Attempt")]
    assert "STALE" not in lines[0] and "STALE" in lines[1]


def test_the_node_usage_table_counts_visits_across_traces():
    traces = [trace("a", nodes=("Start", "search", "search", "End")), trace("b", 0.0, nodes=("Start", "End"))]
    assert node_usage(traces) == [("End", 2, 2), ("Start", 2, 2), ("search", 2, 1)]
    text = render_attempts_block(traces)
    assert text.rstrip().endswith("| search | 2 | 1 |")
    assert "Node usage across these attempts:" in text


def test_no_node_usage_table_when_no_visits_were_recorded():
    assert "Node usage" not in render_attempts_block([trace("a")])


def test_no_traces_gives_a_placeholder():
    assert render_attempts_block([]) == "(no trajectories were collected this round)"


def test_the_tail_cut_keeps_the_end_and_marks_the_cut():
    traces = [trace(f"hi{n}", 1.0, text="x" * 500) for n in range(10)] + [trace("lo", 0.0, text="the failure")]
    text = render_attempts_block(traces, char_cap=1000)
    assert len(text) <= 1000
    assert text.startswith(TAIL_MARKER)
    assert text.endswith("the failure")
    assert "High-scoring attempts" not in text


def test_a_block_within_the_cap_is_not_cut():
    text = render_attempts_block([trace("a")], char_cap=10_000)
    assert TAIL_MARKER not in text


def test_the_default_cap_is_120000_characters():
    traces = [trace(f"t{n}", text="y" * 10_000) for n in range(20)]
    text = render_attempts_block(traces)
    assert len(text) == 120_000 and text.startswith(TAIL_MARKER)


def test_the_token_cap_counts_tokens():
    def words(text):
        return len(text.split())

    traces = [trace(f"t{n}", text=" ".join(f"w{n}-{i}" for i in range(50))) for n in range(6)]
    text = render_attempts_block(traces, char_cap=60, token_counter=words)
    assert words(text) <= 60 and text.startswith(TAIL_MARKER)
    assert text.endswith("w5-49")


def test_the_token_cut_keeps_the_longest_fitting_tail():
    text = "abcdefghij" * 10

    def count(value):
        return len(value)

    assert tail_cut(text, 80, count) == tail_cut(text, 80)


def test_a_cap_smaller_than_the_marker_keeps_only_the_end():
    assert tail_cut("abcdefgh", 3) == "fgh"
    assert tail_cut("abcdefgh", 0) == ""


# -- the trace store's document --------------------------------------------------------------------------------------


def test_traces_document_shape_and_round_trip():
    traces = [trace("a", steps=(Step("search", {"q": 1}, "ok"),), nodes=("Start",), guidance=("g",))]
    document = traces_document(traces, 3)
    assert list(document) == ["schema", "iteration", "traces"]
    assert document["schema"] == 1 and document["iteration"] == 3
    assert traces_from_document(json.loads(json.dumps(document))) == (3, traces)


def test_a_newer_traces_schema_is_refused():
    with pytest.raises(ValueError, match="upgrade"):
        traces_from_document({"schema": 2, "iteration": 1, "traces": []})


# -- properties ------------------------------------------------------------------------------------------------------

trace_ids = st.text(alphabet="abc01", min_size=1, max_size=4)
scores = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])


@st.composite
def trace_pools(draw):
    chosen = draw(st.lists(trace_ids, unique=True, max_size=12))
    return [
        trace(trace_id, draw(scores), text=draw(st.text(alphabet="xy\n é", max_size=60)), nodes=draw(node_lists))
        for trace_id in chosen
    ]


node_lists = st.lists(st.sampled_from(["Start", "a", "b", "End"]), max_size=5)


@settings(max_examples=80, deadline=None)
@given(trace_pools(), st.integers(0, 600))
def test_the_attempts_block_never_exceeds_the_cap_and_keeps_the_end(traces, cap):
    full = render_attempts_block(traces, char_cap=10**9)
    text = render_attempts_block(traces, char_cap=cap)
    assert len(text) <= cap
    kept = text.removeprefix(TAIL_MARKER)
    assert full.endswith(kept)


@settings(max_examples=80, deadline=None)
@given(trace_pools(), st.none() | st.integers(0, 4), st.none() | st.integers(0, 4), st.integers(1, 6))
def test_sampling_respects_the_sizes_and_is_deterministic(traces, failing, passing, iteration):
    first = StratifiedSampler(failing, passing).sample(traces, iteration)
    second = StratifiedSampler(failing, passing).sample(traces, iteration)
    assert first == second
    assert set(ids(first)) <= set(ids(traces))
    if failing is not None:
        assert sum(t.score < 0.5 for t in first) == min(failing, sum(t.score < 0.5 for t in traces))
    if passing is not None:
        assert sum(t.score >= 0.5 for t in first) == min(passing, sum(t.score >= 0.5 for t in traces))


@settings(max_examples=60, deadline=None)
@given(trace_pools(), st.integers(1, 4))
def test_a_full_rotation_sees_every_trace(traces, size):
    sampler = StratifiedSampler(size, size)
    failing = [t for t in traces if t.score < 0.5]
    passing = [t for t in traces if t.score >= 0.5]
    rounds = max(-(-len(failing) // size), -(-len(passing) // size), 1)
    seen = {t.id for k in range(1, rounds + 1) for t in sampler.sample(traces, k)}
    assert seen == set(ids(traces))
