import pytest
from hypothesis import given
from hypothesis import strategies as st

from intents.core import (
    IntentCandidate,
    IntentEvidence,
    IntentKind,
    IntentReview,
    IntentReviewSummary,
    summarize_intent_reviews,
)

EVIDENCE = (IntentEvidence(trajectory_id="t1", start=0, end=0),)


def candidate(candidate_id):
    return IntentCandidate(candidate_id, "Reset password", IntentKind.INFERRED, EVIDENCE)


def review(candidate_id, reviewer_id, valid):
    return IntentReview(candidate_id=candidate_id, reviewer_id=reviewer_id, valid=valid)


def test_every_candidate_gets_a_summary_sorted_by_id():
    summaries = summarize_intent_reviews(
        [candidate("intent:b"), candidate("intent:a"), candidate("intent:c")],
        [
            review("intent:b", "carol", True),
            review("intent:b", "alice", False),
            review("intent:b", "bob", True),
            review("intent:a", "alice", True),
        ],
    )
    assert summaries == (
        IntentReviewSummary(
            candidate_id="intent:a",
            valid_reviews=1,
            invalid_reviews=0,
            reviewer_ids=("alice",),
            duplicate_reviewer_ids=(),
        ),
        IntentReviewSummary(
            candidate_id="intent:b",
            valid_reviews=2,
            invalid_reviews=1,
            reviewer_ids=("alice", "bob", "carol"),
            duplicate_reviewer_ids=(),
        ),
        IntentReviewSummary(
            candidate_id="intent:c", valid_reviews=0, invalid_reviews=0, reviewer_ids=(), duplicate_reviewer_ids=()
        ),
    )
    assert [summary.agreement for summary in summaries] == [1.0, pytest.approx(2 / 3), 0.0]


def test_a_reviewers_first_review_counts_and_later_ones_are_listed():
    (summary,) = summarize_intent_reviews(
        [candidate("intent:a")],
        [
            review("intent:a", "zed", False),
            review("intent:a", "amy", True),
            review("intent:a", "zed", True),
            review("intent:a", "zed", True),
            review("intent:a", "amy", False),
        ],
    )
    assert (summary.valid_reviews, summary.invalid_reviews) == (1, 1)
    assert summary.reviewer_ids == ("amy", "zed")
    assert summary.duplicate_reviewer_ids == ("amy", "zed", "zed")
    assert summary.agreement == 0.5


def test_the_same_reviewer_may_review_different_candidates():
    summaries = summarize_intent_reviews(
        [candidate("intent:a"), candidate("intent:b")],
        [review("intent:a", "amy", True), review("intent:b", "amy", False)],
    )
    assert [(s.valid_reviews, s.invalid_reviews, s.duplicate_reviewer_ids) for s in summaries] == [
        (1, 0, ()),
        (0, 1, ()),
    ]


def test_a_repeated_candidate_gets_one_summary():
    summaries = summarize_intent_reviews([candidate("intent:a"), candidate("intent:a")], [])
    assert [summary.candidate_id for summary in summaries] == ["intent:a"]


def test_an_unknown_candidate_raises():
    with pytest.raises(ValueError, match=r"^intent review references an unknown candidate$"):
        summarize_intent_reviews([candidate("intent:a")], [review("intent:zzz", "amy", True)])


@pytest.mark.parametrize("reviewer_id", ["", "   ", None])
def test_a_blank_reviewer_raises(reviewer_id):
    with pytest.raises(ValueError, match=r"^intent reviewer ID is required$"):
        summarize_intent_reviews([candidate("intent:a")], [review("intent:a", reviewer_id, True)])


def test_a_summary_without_reviews_has_zero_agreement():
    summary = IntentReviewSummary(
        candidate_id="intent:a", valid_reviews=0, invalid_reviews=0, reviewer_ids=(), duplicate_reviewer_ids=()
    )
    assert summary.agreement == 0.0


def test_review_is_keyword_only():
    with pytest.raises(TypeError):
        IntentReview("intent:a", "amy", True)  # type: ignore[misc]


reviews_strategy = st.lists(
    st.tuples(st.sampled_from(["intent:a", "intent:b"]), st.sampled_from(["amy", "bob", "cy", "dee"]), st.booleans()),
    max_size=20,
)


@given(reviews_strategy)
def test_agreement_lies_in_the_unit_interval_and_counts_are_consistent(rows):
    summaries = summarize_intent_reviews([candidate("intent:a"), candidate("intent:b")], [review(*row) for row in rows])
    for summary in summaries:
        assert 0.0 <= summary.agreement <= 1.0
        counted = summary.valid_reviews + summary.invalid_reviews
        assert counted == len(summary.reviewer_ids)
        assert counted + len(summary.duplicate_reviewer_ids) == sum(1 for row in rows if row[0] == summary.candidate_id)
        if counted:
            assert summary.agreement >= 0.5
        first = {}
        for candidate_id, reviewer_id, valid in rows:
            if candidate_id == summary.candidate_id:
                first.setdefault(reviewer_id, valid)
        assert summary.valid_reviews == sum(first.values())
