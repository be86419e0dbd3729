"""The seeded split keeps its exact behaviour while using less memory (procedures.mining.split_ids)."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from procedures.mining import split_ids


def literal_split(ids, *, held_out_share, seed, at_least_one=False):
    """The split as first written (a set of the ids, a set of the held-out ones)."""
    ordered = sorted(set(ids))
    shuffled = list(ordered)
    random.Random(seed).shuffle(shuffled)
    count = round(len(ordered) * held_out_share)
    if at_least_one and len(ordered) >= 2:
        count = min(max(count, 1), len(ordered) - 1)
    held_out = set(shuffled[:count])
    return tuple(i for i in ordered if i not in held_out), tuple(i for i in ordered if i in held_out)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=60), max_size=50),
    st.floats(min_value=0.01, max_value=0.99),
    st.integers(min_value=0, max_value=1000),
    st.booleans(),
)
def test_the_split_is_the_literal_one_for_repeated_and_unordered_ids(ids, share, seed, at_least_one):
    split = split_ids(ids, held_out_share=share, seed=seed, at_least_one=at_least_one)
    assert (split.training, split.held_out) == literal_split(
        ids, held_out_share=share, seed=seed, at_least_one=at_least_one
    )
