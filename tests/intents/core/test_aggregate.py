import pytest
from hypothesis import given
from hypothesis import strategies as st

from intents.core import (
    IntentAggregate,
    IntentCandidate,
    IntentEvidence,
    IntentKind,
    aggregate_intents,
    normalize_intent,
)


def candidate(candidate_id, intent, *trajectory_ids, kind=IntentKind.INFERRED):
    evidence = tuple(IntentEvidence(trajectory_id=tid, start=0, end=0) for tid in trajectory_ids)
    return IntentCandidate(candidate_id, intent, kind, evidence)


def test_candidates_are_grouped_by_normalized_label():
    aggregates = aggregate_intents(
        [
            candidate("intent:3", "Reset password", "t2", "t1", kind=IntentKind.HINDSIGHT),
            candidate("intent:1", "reset_PASSWORD!", "t1", kind=IntentKind.DECLARED),
            candidate("intent:2", "Book a flight", "t3"),
            candidate("intent:4", "Reset password", "t2", kind=IntentKind.DECLARED),
        ]
    )
    assert aggregates == (
        IntentAggregate(
            key="book a flight",
            labels=("Book a flight",),
            candidate_ids=("intent:2",),
            trajectory_ids=("t3",),
            kinds=(IntentKind.INFERRED,),
        ),
        IntentAggregate(
            key="reset password",
            labels=("Reset password", "reset_PASSWORD!"),
            candidate_ids=("intent:1", "intent:3", "intent:4"),
            trajectory_ids=("t1", "t2"),
            kinds=(IntentKind.DECLARED, IntentKind.HINDSIGHT),
        ),
    )
    assert [aggregate.support for aggregate in aggregates] == [1, 2]


def test_support_counts_trajectories_not_candidates():
    (aggregate,) = aggregate_intents([candidate(f"intent:{i}", "Same", "t1") for i in range(5)])
    assert len(aggregate.candidate_ids) == 5
    assert aggregate.support == 1


def test_repeated_candidate_ids_are_kept():
    (aggregate,) = aggregate_intents([candidate("intent:1", "Same", "t1"), candidate("intent:1", "Same", "t1")])
    assert aggregate.candidate_ids == ("intent:1", "intent:1")


def test_kinds_are_sorted_by_value():
    kinds = [IntentKind.INFERRED, IntentKind.HINDSIGHT, IntentKind.DECLARED]
    (aggregate,) = aggregate_intents([candidate(f"intent:{kind}", "Same", "t1", kind=kind) for kind in kinds])
    assert [kind.value for kind in aggregate.kinds] == ["declared", "hindsight", "inferred"]


def test_a_custom_key_is_stripped():
    aggregates = aggregate_intents(
        [candidate("intent:1", "Reset", "t1"), candidate("intent:2", "Refund", "t2")],
        key=lambda label: f"  {label[0]} ",
    )
    assert [aggregate.key for aggregate in aggregates] == ["R"]
    assert aggregates[0].labels == ("Refund", "Reset")


def test_output_is_sorted_by_key_in_plain_string_order():
    aggregates = aggregate_intents([candidate(f"intent:{label}", label, "t") for label in ["b", "10", "2", "a"]])
    assert [aggregate.key for aggregate in aggregates] == ["10", "2", "a", "b"]


def test_an_empty_key_raises():
    with pytest.raises(ValueError, match=r"^intent grouping key cannot be empty$"):
        aggregate_intents([candidate("intent:1", "Reset", "t1")], key=lambda label: "   ")


def test_no_candidates_give_no_aggregates():
    assert aggregate_intents([]) == ()


labels = st.sampled_from(["Reset password", "reset_password", "Book flight", "BOOK   flight!", "Refund"])
trajectory_lists = st.lists(st.sampled_from(["t1", "t2", "t3", "t10", "x"]), min_size=1, max_size=4)


@given(st.lists(st.tuples(labels, trajectory_lists, st.sampled_from(list(IntentKind))), max_size=12))
def test_support_equals_the_distinct_trajectory_ids_of_each_group(rows):
    candidates = [candidate(f"intent:{i}", label, *tids, kind=kind) for i, (label, tids, kind) in enumerate(rows)]
    aggregates = aggregate_intents(candidates)
    assert [aggregate.key for aggregate in aggregates] == sorted({aggregate.key for aggregate in aggregates})
    assert sum(len(aggregate.candidate_ids) for aggregate in aggregates) == len(candidates)
    for aggregate in aggregates:
        members = [c for c in candidates if normalize_intent(c.intent) == aggregate.key]
        expected = {item.trajectory_id for member in members for item in member.evidence}
        assert aggregate.support == len(expected)
        assert aggregate.trajectory_ids == tuple(sorted(expected))
        assert aggregate.labels == tuple(sorted({member.intent for member in members}))
