"""learn_procedure (trajectory-mining §2.1): the seed's example, tie-breaks, order, retention, identity, errors."""

import hashlib
import os
from operator import attrgetter
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procedures.core import ProcedureCandidate, ProcedureStep, learn, learn_procedure
from procedures.core.lcs import ToolCodes, is_subsequence, lcs
from tests.helpers.procedure_runs import TOOLS, WHOLE_STEPS, repeated_runs, run, tool_runs
from tests.procedures.core.reference import reference_lcs, reference_learn_procedure
from trajectories.core import TrajectoryStep


def tools_of(candidate):
    return [step.tool for step in candidate.steps]


_tool = attrgetter("tool")


def test_it_learns_the_seed_refund_example():
    runs = {
        "run-1": [
            TrajectoryStep(0, "lookup_policy", "inspect", {"tier": "enterprise"}, ok=True),
            TrajectoryStep(1, "issue_refund", "execute", {"currency": "USD"}, ok=True),
        ],
        "run-2": [
            TrajectoryStep(0, "lookup_policy", "inspect", {"tier": "enterprise"}, ok=True),
            TrajectoryStep(1, "check_account", "inspect", ok=True),
            TrajectoryStep(2, "issue_refund", "execute", {"currency": "USD"}, ok=True),
        ],
    }
    candidate = learn_procedure(runs, intent="process enterprise refund")
    assert tools_of(candidate) == ["lookup_policy", "issue_refund"]
    assert [dict(step.arguments) for step in candidate.steps] == [{"tier": "enterprise"}, {"currency": "USD"}]
    assert candidate.source_trajectory_ids == ("run-1", "run-2")
    assert candidate.intent == "process enterprise refund"


def test_it_keeps_the_first_two_stable_steps_of_the_seed_table():
    runs = {
        "success-a": run("lookup_policy", "issue_refund", "notify"),
        "success-b": run("lookup_policy", "issue_refund"),
    }
    assert tools_of(learn_procedure(runs, intent="refund")) == ["lookup_policy", "issue_refund"]


def test_it_rejects_the_seed_failure_run_as_a_source():
    runs = {
        "success-a": run("lookup_policy", "issue_refund", "notify"),
        "failure": run("issue_refund", "error", ok=False),
    }
    with pytest.raises(ValueError, match=r"^source trajectories must be identified, non-empty, and successful$"):
        learn_procedure(runs, intent="refund")


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (("a", "b"), ("b", "a"), ["a"]),
        (("x", "y", "z"), ("z", "y", "x"), ["x"]),
        (("a", "b", "c"), ("c", "a", "b"), ["a", "b"]),
    ],
)
def test_it_breaks_ties_towards_the_lexicographically_smaller_cell(first, second, expected):
    assert tools_of(learn_procedure({"1": run(*first), "2": run(*second)}, intent="i")) == expected
    assert list(lcs(first, second)) == expected
    assert list(lcs(second, first)) == expected


def test_the_fold_depends_on_the_sorted_run_order():
    runs = {"1": run("a", "b", "c"), "2": run("b", "a", "c"), "3": run("a", "c", "b")}
    assert tools_of(learn_procedure(runs, intent="i")) == ["a", "c"]


def test_runs_sort_as_plain_strings_so_10_comes_before_2():
    runs = {"2:x": run("b", "a"), "10:x": run("a", "b")}
    candidate = learn_procedure(runs, intent="i")
    assert candidate.source_trajectory_ids == ("10:x", "2:x")
    # LCS((a, b), (b, a)) is (a): folding starts from "10:x" and the tie-break picks the smaller tuple.
    assert tools_of(candidate) == ["a"]


def test_the_smallest_id_supplies_the_retained_arguments():
    runs = {
        "2:x": run("search", arguments={0: {"limit": 1.0}}),
        "10:x": run("search", arguments={0: {"limit": 1}}),
    }
    assert learn_procedure(runs, intent="i").steps[0].arguments == {"limit": 1}
    assert type(learn_procedure(runs, intent="i").steps[0].arguments["limit"]) is int


def test_arguments_equal_as_python_values_are_retained():
    runs = {
        "a": run("search", "read", arguments={0: {"limit": 1}, 1: {"flag": True}}),
        "b": run("search", "read", arguments={0: {"limit": 1.0}, 1: {"flag": 1}}),
        "c": run("search", "read", arguments={0: {"limit": True}, 1: {"flag": 1.0}}),
    }
    candidate = learn_procedure(runs, intent="i")
    assert [dict(step.arguments) for step in candidate.steps] == [{"limit": 1}, {"flag": True}]


def test_differing_arguments_leave_the_step_with_none():
    runs = {
        "a": run("search", "read", arguments={0: {"q": "refund"}, 1: {"doc": "policy"}}),
        "b": run("search", "read", arguments={0: {"q": "return"}, 1: {"doc": "policy"}}),
        "c": run("search", "read", arguments={0: {"q": "refund"}, 1: {"doc": "policy", "page": 2}}),
    }
    candidate = learn_procedure(runs, intent="i")
    assert [dict(step.arguments) for step in candidate.steps] == [{}, {}]


def test_arguments_come_from_the_leftmost_occurrence_not_the_lcs_alignment():
    runs = {
        "a": run("search", "search", "read", arguments={0: {"q": "x"}, 1: {"q": "y"}}),
        "b": run("search", "read", arguments={0: {"q": "x"}}),
    }
    candidate = learn_procedure(runs, intent="i")
    assert tools_of(candidate) == ["search", "read"]
    assert dict(candidate.steps[0].arguments) == {"q": "x"}


def test_the_revision_ignores_arguments_and_sources():
    one = learn_procedure({"a": run("x", "y", arguments={0: {"k": 1}})}, intent="  refund ")
    other = learn_procedure({"b": run("x", "y", arguments={0: {"k": 2}}), "c": run("x", "z", "y")}, intent="refund")
    digest = hashlib.sha256(b"refund\0x\0y").hexdigest()
    assert one.revision == other.revision == f"sha256:{digest}"
    assert one.procedure_id == other.procedure_id == f"procedure:{digest[:16]}"
    assert one.intent == "refund"
    assert one.steps != other.steps


def test_the_revision_changes_with_the_intent_and_the_tools():
    base = learn_procedure({"a": run("x", "y")}, intent="refund")
    assert learn_procedure({"a": run("x", "y")}, intent="refunds").revision != base.revision
    assert learn_procedure({"a": run("y", "x")}, intent="refund").revision != base.revision


@pytest.mark.parametrize(
    ("runs", "intent"),
    [
        ({"a": run("x")}, ""),
        ({"a": run("x")}, "   \t"),
        ({}, "refund"),
    ],
)
def test_it_requires_an_intent_and_a_run(runs, intent):
    with pytest.raises(ValueError, match=r"^intent and at least one trajectory are required$"):
        learn_procedure(runs, intent=intent)


@pytest.mark.parametrize(
    "runs",
    [
        {"  ": run("x")},
        {"": run("x")},
        {"a": run("x"), "b": []},
        {"a": run("x"), "b": run("x", ok=False)},
        {"a": run("x"), "b": run("x", ok=None)},
        {"a": [*run("x"), TrajectoryStep(1, "y", "execute", ok=1)]},
        {"a": run("x"), 7: run("x")},
        {"a": run("x"), "b": iter([])},
    ],
)
def test_it_rejects_unidentified_empty_or_unsuccessful_runs(runs):
    with pytest.raises(ValueError, match=r"^source trajectories must be identified, non-empty, and successful$"):
        learn_procedure(runs, intent="refund")


def test_runs_given_as_iterables_are_read_once_as_sequences():
    runs = {"a": iter(run("x", "y")), "b": (step for step in run("x", "z", "y"))}
    assert tools_of(learn_procedure(runs, intent="i")) == ["x", "y"]


def test_an_empty_intent_is_reported_before_bad_runs():
    with pytest.raises(ValueError, match=r"^intent and at least one trajectory are required$"):
        learn_procedure({"": []}, intent=" ")


def test_a_failed_step_is_reported_even_when_the_runs_share_nothing():
    with pytest.raises(ValueError, match=r"^source trajectories must be identified"):
        learn_procedure({"a": run("x"), "b": run("y", ok=False)}, intent="i")


def test_it_rejects_runs_sharing_no_steps():
    with pytest.raises(ValueError, match=r"^successful trajectories share no procedure steps$"):
        learn_procedure({"a": run("x", "y"), "b": run("z")}, intent="i")


def test_a_procedure_step_requires_a_tool():
    for tool in ("", "  "):
        with pytest.raises(ValueError, match=r"^procedure tool is required$"):
            ProcedureStep(tool=tool)
    with pytest.raises(TypeError):
        ProcedureStep("search")  # keyword-only


@pytest.mark.parametrize("arguments", [None, ["q", "refund"], "q=refund"])
def test_procedure_step_arguments_must_be_a_mapping(arguments):
    with pytest.raises(ValueError, match=r"^procedure arguments must be a mapping$"):
        ProcedureStep(tool="search", arguments=arguments)


def test_procedure_step_arguments_are_frozen_recursively():
    step = ProcedureStep(tool="search", arguments={"filters": {"tags": ["a", "b"]}, "limit": 3})
    assert isinstance(step.arguments, MappingProxyType)
    with pytest.raises(TypeError):
        step.arguments["limit"] = 4
    with pytest.raises(TypeError):
        step.arguments["filters"]["tags"] = []
    assert step.arguments["filters"]["tags"] == ("a", "b")
    with pytest.raises(AttributeError):
        step.tool = "other"
    assert step.to_dict() == {"tool": "search", "arguments": {"filters": {"tags": ["a", "b"]}, "limit": 3}}


def test_learned_arguments_do_not_share_state_with_the_input():
    source = {"q": "refund"}
    candidate = learn_procedure({"a": run("search", arguments={0: source})}, intent="i")
    source["q"] = "changed"
    assert candidate.steps[0].arguments == {"q": "refund"}
    assert ProcedureStep(tool="search") == ProcedureStep(tool="search", arguments={})


def test_the_candidate_serializes_for_storage():
    candidate = learn_procedure({"b": run("x", "y"), "a": run("x", "y")}, intent="i")
    assert isinstance(candidate, ProcedureCandidate)
    data = candidate.to_dict()
    assert data["steps"] == [{"tool": "x", "arguments": {}}, {"tool": "y", "arguments": {}}]
    assert data["source_trajectory_ids"] == ["a", "b"]
    assert data["revision"] == candidate.revision


def test_repeated_sequences_and_contained_sequences_keep_the_current_result():
    runs = {f"{index:03}": run("a", "x", "b", "c") for index in range(50)}
    runs["100"] = run("a", "q", "x", "b", "r", "c")
    assert tools_of(learn_procedure(runs, intent="i")) == ["a", "x", "b", "c"]
    assert is_subsequence(("a", "b"), ("a", "x", "b"))
    assert not is_subsequence(("b", "a"), ("a", "x", "b"))
    assert is_subsequence((), ())


# --- properties against the straightforward reference -------------------------------------------------------------


# WAYMARK_HYPOTHESIS_SCALE=10 runs every property ten times as long (for a thorough local check).
SCALE = int(os.environ.get("WAYMARK_HYPOTHESIS_SCALE", "1"))


def outcome(function, runs):
    try:
        return function(runs, intent="intent")
    except ValueError as error:
        return str(error)


@settings(max_examples=600 * SCALE, deadline=None)
@given(tool_runs())
def test_it_matches_the_reference_implementation(runs):
    assert outcome(learn_procedure, runs) == outcome(reference_learn_procedure, runs)


@settings(max_examples=200 * SCALE, deadline=None)
@given(tool_runs(names=("]", "^", "\\", "-", "é", "a b", "[", "$")))
def test_tool_names_that_are_regex_syntax_change_nothing(runs):
    assert outcome(learn_procedure, runs) == outcome(reference_learn_procedure, runs)


@settings(max_examples=300 * SCALE, deadline=None)
@given(tool_runs())
def test_the_result_is_a_common_subsequence_of_every_run(runs):
    result = outcome(learn_procedure, runs)
    if isinstance(result, str):
        return
    for steps in runs.values():
        assert is_subsequence(tools_of(result), [step.tool for step in steps])


@settings(max_examples=600 * SCALE, deadline=None)
@given(st.lists(TOOLS, max_size=12), st.lists(TOOLS, max_size=12))
def test_lcs_matches_the_reference_cell_for_cell(first, second):
    assert lcs(tuple(first), tuple(second)) == reference_lcs(tuple(first), tuple(second))


@settings(max_examples=200 * SCALE, deadline=None)
@given(st.lists(st.sampled_from("abcdefgh"), max_size=40), st.lists(st.sampled_from("abcdefgh"), max_size=40))
def test_lcs_of_longer_sequences_matches_the_reference(first, second):
    # Long enough that the bit-parallel rows span many bits and the greedy takes many steps; shuffled codes
    # (first sight order) against sorted names, so the tie-break must go by the ranks.
    assert lcs(tuple(first), tuple(second)) == reference_lcs(tuple(first), tuple(second))


@settings(max_examples=200 * SCALE, deadline=None)
@given(st.lists(st.sampled_from("abc"), max_size=9), st.lists(st.sampled_from("abc"), max_size=9))
def test_the_reference_cell_is_the_smallest_longest_common_subsequence(first, second):
    # The fact lcs.py's `_table_lcs` is built on, checked on the literal reference by brute force.
    common = {
        picked
        for mask in range(1 << len(first))
        if is_subsequence(picked := tuple(tool for k, tool in enumerate(first) if mask >> k & 1), second)
    }
    longest = max(map(len, common))
    assert reference_lcs(tuple(first), tuple(second)) == min(c for c in common if len(c) == longest)


@settings(max_examples=300 * SCALE, deadline=None)
@given(st.lists(TOOLS, max_size=12), st.lists(TOOLS, max_size=6))
def test_a_contained_sequence_is_its_own_lcs(longer, picks):
    # Any subsequence of the longer run: under the per-cell tie-break the LCS is exactly that subsequence.
    chosen = tuple(tool for index, tool in enumerate(longer) if index % 2 == 0 or tool in picks)
    assert reference_lcs(chosen, tuple(longer)) == chosen
    assert lcs(chosen, tuple(longer)) == chosen


def test_tool_codes_skip_the_surrogate_range():
    codes = ToolCodes()
    names = [f"tool-{index}" for index in range(0xD800 - 0x100 + 5)]
    encoded = codes.encode(names)
    assert not any(0xD800 <= ord(char) < 0xE000 for char in encoded)
    assert len(set(encoded)) == len(names)
    assert codes.decode(encoded) == tuple(names)


# --- the fast paths: the fold's guess from a sorted prefix, the alignment cache, retention stopping early -----------


@settings(max_examples=400 * SCALE, deadline=None)
@given(tool_runs(), st.integers(min_value=1, max_value=3), st.sampled_from(WHOLE_STEPS))
def test_a_guess_from_too_few_runs_still_matches_the_reference(runs, guess_runs, whole_steps):
    # The guess is folded from a prefix of the sorted runs; with a prefix this short it is often too long, and the
    # result must then come from the full fold, with the same arguments and errors.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "_GUESS_RUNS", guess_runs)
        patch.setattr(learn, "_WHOLE_STEPS", whole_steps)
        assert outcome(learn_procedure, runs) == outcome(reference_learn_procedure, runs)


@settings(max_examples=300 * SCALE, deadline=None)
@given(repeated_runs(), st.integers(min_value=1, max_value=300), st.sampled_from(WHOLE_STEPS))
def test_repeated_sequences_and_late_differences_match_the_reference(runs, guess_runs, whole_steps):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "_GUESS_RUNS", guess_runs)
        patch.setattr(learn, "_WHOLE_STEPS", whole_steps)
        assert outcome(learn_procedure, runs) == outcome(reference_learn_procedure, runs)


def test_many_identical_runs_keep_arguments_equal_as_python_values():
    runs = {f"{index:04}": run("a", "b", "c", arguments={0: {"n": 1}, 2: {"q": "x"}}) for index in range(600)}
    runs["0300"] = run("a", "b", "c", arguments={0: {"n": 1.0}, 2: {"q": "x"}})
    runs["0400"] = run("a", "x", "b", "c", arguments={0: {"n": True}, 3: {"q": "y"}})
    candidate = learn_procedure(runs, intent="i")
    assert candidate == reference_learn_procedure(runs, intent="i")
    assert [dict(step.arguments) for step in candidate.steps] == [{"n": 1}, {}, {}]


def test_a_run_late_in_the_mapping_that_drops_a_step_shrinks_the_procedure():
    # 600 runs: the guess is folded from the first 256 sorted ids, and the last one (sorted and in the mapping)
    # lacks "b", so the guess is too long and the full fold decides.
    runs = {f"{index:04}": run("a", "b", "c", arguments={0: {"n": 1}, 2: {"n": 2}}) for index in range(599)}
    runs["0599"] = run("c", "a", "c", arguments={1: {"n": 1}, 2: {"n": 2}})
    candidate = learn_procedure(runs, intent="i")
    assert candidate == reference_learn_procedure(runs, intent="i")
    assert tools_of(candidate) == ["a", "c"]
    assert [dict(step.arguments) for step in candidate.steps] == [{"n": 1}, {"n": 2}]


def test_a_failed_step_wins_over_arguments_that_are_no_mapping():
    runs = {"a": [TrajectoryStep(0, "x", "execute", None, ok=True)], "b": run("x", ok=False)}
    with pytest.raises(ValueError, match=r"^source trajectories must be identified, non-empty, and successful$"):
        learn_procedure(runs, intent="i")
    with pytest.raises(ValueError, match=r"^source trajectories must be identified, non-empty, and successful$"):
        reference_learn_procedure(runs, intent="i")


# --- batches: runs are checked, encoded and aligned `_BATCH_RUNS` at a time; the fold skips repeats at C speed -----


@settings(max_examples=300 * SCALE, deadline=None)
@given(
    st.one_of(tool_runs(), repeated_runs()),
    st.integers(min_value=1, max_value=40),
    st.integers(1, 5),
    st.sampled_from([1, 2, learn._NAMES_FROM]),
    st.sampled_from(WHOLE_STEPS),
)
def test_batch_edges_anywhere_change_nothing(runs, guess_runs, batch_runs, names_from, whole_steps):
    # A batch whose aligned arguments all equal the expected dicts is settled in one comparison, any other batch
    # (differing values, read-only or caller mappings) run by run; with a short guess, some batch lacks the guess
    # and the second pass runs in batches too. Runs starting with the known alignment prefix are found in the
    # joined codes or, with a prefix of `_NAMES_FROM` tools or more, by their names (the runs drawn are short).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "_GUESS_RUNS", guess_runs)
        patch.setattr(learn, "_BATCH_RUNS", batch_runs)
        patch.setattr(learn, "_NAMES_FROM", names_from)
        patch.setattr(learn, "_WHOLE_STEPS", whole_steps)
        assert outcome(learn_procedure, runs) == outcome(reference_learn_procedure, runs)


@pytest.mark.parametrize("whole_steps", WHOLE_STEPS)
def test_a_failed_step_in_a_later_batch_wins_over_arguments_that_are_no_mapping(whole_steps):
    runs = {f"{index:02}": run("a", "b") for index in range(9)}
    runs["04"] = [TrajectoryStep(0, "a", "execute", None, ok=True), *run("b")]
    runs["08"] = run("a", "b", ok=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "_BATCH_RUNS", 3)
        patch.setattr(learn, "_WHOLE_STEPS", whole_steps)
        with pytest.raises(ValueError, match=r"^source trajectories must be identified"):
            learn_procedure(runs, intent="i")
        del runs["08"]
        with pytest.raises(TypeError):
            learn_procedure(runs, intent="i")


def test_a_batch_with_a_run_lacking_the_sequence_is_refused_whole():
    codes = ToolCodes()
    first = run("a", "b", arguments={0: {"n": 1}, 1: {"n": 2}})
    differing = run("a", "b", arguments={0: {"n": 9}, 1: {"n": 2}})
    lacking = run("b", "a", arguments={0: {"n": 2}, 1: {"n": 1}})
    agreement = learn.ArgumentAgreement(codes.encode(["a", "b"]), codes.encode(first, _tool), first)
    batch = [differing, lacking]
    assert not agreement.add_runs([codes.encode(steps, _tool) for steps in batch], batch)
    assert [dict(arguments) for arguments in agreement.arguments()] == [{"n": 1}, {"n": 2}]
    assert agreement.add_runs([codes.encode(differing, _tool)], [differing])
    assert [dict(arguments) for arguments in agreement.arguments()] == [{}, {"n": 2}]


@st.composite
def sequences_with_repeats(draw):
    pool = draw(st.lists(st.lists(TOOLS, max_size=8), min_size=1, max_size=4))
    order = draw(st.lists(st.integers(min_value=0, max_value=len(pool) - 1), min_size=1, max_size=12))
    return [tuple(pool[index]) for index in order]


@settings(max_examples=400 * SCALE, deadline=None)
@given(sequences_with_repeats())
def test_the_fold_skipping_repeats_and_contained_runs_is_the_literal_fold(sequences):
    literal = sequences[0]
    for sequence in sequences[1:]:
        literal = reference_lcs(literal, sequence)
    codes = ToolCodes()
    encoded = [codes.encode(sequence) for sequence in sequences]
    assert codes.decode(learn.shared_codes(encoded, codes.ranks())) == literal


def test_the_fold_folds_a_run_that_follows_repeats_of_contained_ones():
    codes = ToolCodes()
    sequences = [("a", "b", "c"), ("a", "x", "b", "c"), ("a", "b", "c"), ("a", "x", "b", "c"), ("c", "a", "b")]
    encoded = [codes.encode(sequence) for sequence in sequences]
    assert codes.decode(learn.shared_codes(encoded, codes.ranks())) == ("a", "b")


class AlwaysEqual(dict):
    """A caller's mapping whose own `==` says yes to everything: §2.1 compares plain dicts, so it is not asked."""

    def __eq__(self, other):
        return True

    __hash__ = None


@pytest.mark.parametrize("whole_steps", WHOLE_STEPS)
@pytest.mark.parametrize("batch_runs", [1, 2, 64])
def test_arguments_compare_as_plain_dicts_not_by_their_own_equality(batch_runs, whole_steps):
    runs = {f"{index:02}": run("a", "b", arguments={0: {"n": 1}, 1: {"m": 1}}) for index in range(5)}
    runs["03"] = run("a", "b", arguments={0: AlwaysEqual(n=2), 1: AlwaysEqual(m=1)})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "_BATCH_RUNS", batch_runs)
        patch.setattr(learn, "_WHOLE_STEPS", whole_steps)
        candidate = learn_procedure(runs, intent="i")
    assert candidate == reference_learn_procedure(runs, intent="i")
    assert [dict(step.arguments) for step in candidate.steps] == [{}, {"m": 1}]
