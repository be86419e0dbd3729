"""learn_procedure equals the literal reference on generated run shapes: the families bench/mining.py measures
(backbones with insertions, planted cores, shared prefixes), small enough for the literal DP, with the guess, the
batches and the alignment shortcut (a run starting with the codes of the last matched run, up to its last aligned
step, shares its alignment) pushed to their edges."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procedures.core import learn, learn_procedure
from procedures.core.lcs import ToolCodes
from tests.helpers.procedure_runs import WHOLE_STEPS
from tests.procedures.core.reference import reference_learn_procedure, skipping_reference_learn_procedure
from trajectories.core import TrajectoryStep

SCALE = int(os.environ.get("WAYMARK_HYPOTHESIS_SCALE", "1"))
NAMES = ("a", "b", "c", "d", "e", "f")
ARGUMENT_MODES = ("empty", "constant", "mixed", "equal-values")


@st.composite
def shaped_runs(draw):
    """Runs of one of three kinds, with arguments that agree everywhere, per position, or only in part."""
    kind = draw(st.sampled_from(["backbone", "core", "prefix"]))
    alphabet = NAMES[: draw(st.integers(min_value=2, max_value=len(NAMES)))]
    tools = st.sampled_from(alphabet)
    length = draw(st.integers(min_value=1, max_value=14))
    count = draw(st.integers(min_value=1, max_value=24))
    mode = draw(st.sampled_from(ARGUMENT_MODES))
    if kind == "backbone":
        insertions = draw(st.integers(min_value=0, max_value=3))
        planted = draw(st.lists(tools, min_size=1, max_size=max(1, length // (insertions + 1))))
    else:
        insertions = 0
        planted = draw(st.lists(tools, min_size=1, max_size=length))
    ids = draw(st.lists(st.text("0129:x", min_size=1, max_size=4), min_size=count, max_size=count, unique=True))
    runs = {}
    for trajectory_id in ids:
        kept = []
        for position, tool in enumerate(planted):
            if kind == "backbone":
                kept += [(draw(tools), -1) for _ in range(draw(st.integers(min_value=0, max_value=insertions)))]
            elif kind == "core" and draw(st.booleans()):
                kept.append((draw(tools), -1))
            kept.append((tool, position))
        if kind == "prefix":
            kept += [(draw(tools), -1) for _ in range(draw(st.integers(min_value=0, max_value=4)))]
        elif draw(st.integers(min_value=0, max_value=9)) == 0:
            del kept[draw(st.integers(min_value=0, max_value=len(kept) - 1))]  # now and then a run drops a step
        if not kept:
            kept = [(draw(tools), -1)]
        runs[trajectory_id] = [
            TrajectoryStep(ordinal, tool, "execute", _arguments(draw, mode, position), ok=True)
            for ordinal, (tool, position) in enumerate(kept)
        ]
    return runs


def _arguments(draw, mode, position):
    if mode == "empty":
        return {}
    if mode == "constant" or (mode == "mixed" and position % 3 == 0):
        return {"step": position} if position >= 0 else {"noise": 1}
    if mode == "equal-values":
        return {"k": draw(st.sampled_from([1, 1.0, True]))}
    return {"k": draw(st.integers(min_value=0, max_value=2))}


def outcome(function, runs):
    try:
        return function(runs, intent="intent")
    except ValueError as error:
        return str(error)


@settings(max_examples=500 * SCALE, deadline=None)
@given(
    shaped_runs(),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=1, max_value=6),
    st.sampled_from(WHOLE_STEPS),
)
def test_generated_shapes_match_the_literal_reference(runs, guess_runs, batch_runs, whole_steps):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "_GUESS_RUNS", guess_runs)
        patch.setattr(learn, "_BATCH_RUNS", batch_runs)
        patch.setattr(learn, "_WHOLE_STEPS", whole_steps)
        assert outcome(learn_procedure, runs) == outcome(reference_learn_procedure, runs)


@settings(max_examples=200 * SCALE, deadline=None)
@given(shaped_runs())
def test_generated_shapes_match_with_the_default_guess_and_batches(runs):
    assert outcome(learn_procedure, runs) == outcome(reference_learn_procedure, runs)


def _bench_shapes():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    try:
        import mining
    finally:
        sys.path.pop(0)
    return mining


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_bench_generators_small_match_the_skipping_reference(seed):
    # The bench's own generators, scaled down: every kind, several seeds, the guess and batches at their defaults.
    mining = _bench_shapes()
    for shape in mining.random_shapes(12, seed):
        small = mining.Shape(
            shape.kind, min(shape.runs, 300), min(shape.steps, 40), shape.parameter, shape.arguments, shape.seed
        )
        runs = mining.make_runs(small)
        assert outcome(learn_procedure, runs) == outcome(skipping_reference_learn_procedure, runs), small


@pytest.mark.parametrize("whole_steps", WHOLE_STEPS)
def test_runs_sharing_the_aligned_prefix_reuse_its_alignment_and_still_compare_arguments(whole_steps):
    def steps(tools, arguments):
        return [TrajectoryStep(k, tool, "execute", arguments.get(k, {}), ok=True) for k, tool in enumerate(tools)]

    # "a b" is matched in 00; 01 and 02 start with "a x b" too (same alignment, tails differ); 02's "b" disagrees.
    runs = {
        "00": steps("axbq", {0: {"n": 1}, 2: {"m": 1}}),
        "01": steps("axbaab", {0: {"n": 1}, 2: {"m": 1}, 5: {"m": 2}}),
        "02": steps("axbb", {0: {"n": 1}, 2: {"m": 3}, 3: {"m": 1}}),
        "03": steps("abx", {0: {"n": 1}, 1: {"m": 1}}),
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "_BATCH_RUNS", 1)
        patch.setattr(learn, "_WHOLE_STEPS", whole_steps)
        candidate = learn_procedure(runs, intent="i")
    assert candidate == reference_learn_procedure(runs, intent="i")
    assert [dict(step.arguments) for step in candidate.steps] == [{"n": 1}, {}]


def test_a_run_lacking_the_sequence_after_a_shared_prefix_is_refused_whole():
    codes = ToolCodes()

    def encoded(tools, arguments):
        steps = [TrajectoryStep(k, tool, "execute", arguments.get(k, {}), ok=True) for k, tool in enumerate(tools)]
        return codes.encode(tools), steps

    first = encoded("ab", {0: {"n": 1}, 1: {"n": 2}})
    same_prefix = encoded("abc", {0: {"n": 9}, 1: {"n": 2}})
    lacking = encoded("ba", {})
    agreement = learn.ArgumentAgreement(first[0], *first)
    assert agreement.add_runs([first[0]], [first[1]])  # remembers the aligned prefix "ab"
    assert not agreement.add_runs([same_prefix[0], lacking[0]], [same_prefix[1], lacking[1]])
    assert [dict(arguments) for arguments in agreement.arguments()] == [{"n": 1}, {"n": 2}]
    assert agreement.add_runs([same_prefix[0]], [same_prefix[1]])
    assert [dict(arguments) for arguments in agreement.arguments()] == [{}, {"n": 2}]


def test_a_failed_guess_continues_the_fold_from_it():  # the streamed path: a whole input has no guess
    # The guess (the fold of the first sorted runs) is too long: a later run drops "b". The full fold goes on from
    # the guess over the later runs only, and gives the reference's sequence and arguments.
    def steps(tools):
        return [TrajectoryStep(k, tool, "execute", {"at": k}, ok=True) for k, tool in enumerate(tools)]

    runs = {f"{index:03}": steps("xaybzc") for index in range(40)}
    runs["039"] = steps("cazyxb")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "_GUESS_RUNS", 4)
        patch.setattr(learn, "_BATCH_RUNS", 3)
        patch.setattr(learn, "_WHOLE_STEPS", 0)
        candidate = learn_procedure(runs, intent="i")
    assert candidate == reference_learn_procedure(runs, intent="i")


class EqualToTrue:
    def __eq__(self, other):
        return other is True

    __hash__ = None


class IntLike(int):
    pass


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], True),
        ([True], True),
        ([True] * 3000, True),
        ([True, 1], False),
        ([1.0, True], False),
        ([True, IntLike(1)], False),
        ([True, EqualToTrue()], False),
        ([True, False], False),
        ([None], False),
        ([True, "T"], False),
        ([True, [True]], False),
        ([True, (True,)], False),
    ],
)
def test_all_true_is_identity_with_true(values, expected):
    assert learn.all_true(values) is expected
    assert all(value is True for value in values) is expected


@pytest.mark.parametrize("whole_steps", WHOLE_STEPS)
@pytest.mark.parametrize("ok", [1, 1.0, IntLike(1), EqualToTrue(), None, False])
def test_a_step_whose_ok_only_equals_true_is_refused_in_any_batch(ok, whole_steps):
    runs = {f"{index:02}": [TrajectoryStep(0, "a", "execute", {}, ok=True)] for index in range(9)}
    runs["05"] = [TrajectoryStep(0, "a", "execute", {}, ok=True), TrajectoryStep(1, "b", "execute", {}, ok=ok)]
    for batch_runs in (1, 4, 256):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(learn, "_BATCH_RUNS", batch_runs)
            patch.setattr(learn, "_WHOLE_STEPS", whole_steps)
            with pytest.raises(ValueError, match=r"^source trajectories must be identified"):
                learn_procedure(runs, intent="i")
