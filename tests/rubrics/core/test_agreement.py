"""rubrics.core.agreement: Krippendorff's alpha (interval) and pairwise agreement per rubric dimension."""

from __future__ import annotations

import math

import pytest

from rubrics.core.agreement import DEFAULT_TOLERANCE, DimensionAgreement, PairAgreement, Rating, rubric_agreement


def only(results):
    (result,) = results
    return result


def test_perfect_agreement_gives_alpha_one():
    ratings = [
        (rater, unit, "accuracy", score)
        for rater in ("alice", "judge-1", "judge-2")
        for unit, score in (("u1", 0.2), ("u2", 0.8), ("u3", 0.5))
    ]
    result = only(rubric_agreement(ratings))
    assert result.alpha == pytest.approx(1.0)
    assert result.note == ""
    assert result.raters == ("alice", "judge-1", "judge-2")
    assert result.units == ("u1", "u2", "u3")
    assert all(pair.mean_absolute_difference == 0.0 and pair.within_tolerance == 1.0 for pair in result.pairs)


def test_two_raters_hand_computed():
    # Two raters, three units: u1 (0, 0), u2 (1, 1), u3 (0, 1).
    # Coincidences: o00 = 2, o11 = 2, o01 = o10 = 1; n0 = n1 = 3, n = 6.
    # D_o = (o01 + o10) * 1 / n = 2/6; D_e = 2 * n0 * n1 * 1 / (n (n - 1)) = 18/30.
    # alpha = 1 - D_o / D_e = 1 - (1/3) / (3/5) = 4/9.
    ratings = [
        ("a", "u1", "d", 0.0),
        ("b", "u1", "d", 0.0),
        ("a", "u2", "d", 1.0),
        ("b", "u2", "d", 1.0),
        ("a", "u3", "d", 0.0),
        ("b", "u3", "d", 1.0),
    ]
    result = only(rubric_agreement(ratings))
    assert result.alpha == pytest.approx(4 / 9)
    (pair,) = result.pairs
    assert pair == PairAgreement("a", "b", 3, pytest.approx(1 / 3), pytest.approx(2 / 3))


def test_three_raters_with_missing_values_hand_computed():
    # u1: a = b = 0.25, c = 0.75 (three raters: each ordered pair weighs 1/2); u2: a = b = 0.75;
    # u3: a only (unpairable, ignored).
    # o(.25,.25) = 1, o(.25,.75) = o(.75,.25) = 1, o(.75,.75) = 2; n(.25) = 2, n(.75) = 3, n = 5; δ² = 0.25.
    # D_o = 2 * 0.25 / 5 = 0.1; D_e = 2 * 2 * 3 * 0.25 / 20 = 0.15; alpha = 1 - 0.1 / 0.15 = 1/3.
    ratings = [
        ("a", "u1", "d", 0.25),
        ("b", "u1", "d", 0.25),
        ("c", "u1", "d", 0.75),
        ("a", "u2", "d", 0.75),
        ("b", "u2", "d", 0.75),
        ("a", "u3", "d", 0.25),
    ]
    result = only(rubric_agreement(ratings))
    assert result.alpha == pytest.approx(1 / 3)
    assert [(p.rater_a, p.rater_b, p.shared_units) for p in result.pairs] == [
        ("a", "b", 2),
        ("a", "c", 1),
        ("b", "c", 1),
    ]
    assert result.pairs[1].mean_absolute_difference == pytest.approx(0.5)
    assert result.pairs[1].within_tolerance == 0.0


def test_alpha_is_invariant_under_an_affine_rescale():
    base = [
        ("a", "u1", 0.0),
        ("b", "u1", 0.5),
        ("a", "u2", 1.0),
        ("b", "u2", 0.75),
        ("a", "u3", 0.25),
        ("b", "u3", 0.25),
    ]
    first = only(rubric_agreement([(r, u, "d", s) for r, u, s in base])).alpha
    second = only(rubric_agreement([(r, u, "d", 0.2 + s / 2) for r, u, s in base])).alpha
    assert first == pytest.approx(second)


def test_systematic_disagreement_is_negative():
    ratings = [("a", "u1", "d", 0.0), ("b", "u1", "d", 1.0), ("a", "u2", "d", 1.0), ("b", "u2", "d", 0.0)]
    assert only(rubric_agreement(ratings)).alpha < 0


@pytest.mark.parametrize(
    ("ratings", "note"),
    [
        ([("a", "u1", "d", 0.5), ("a", "u2", "d", 0.9)], "fewer than 2 raters"),
        ([("a", "u1", "d", 0.5), ("b", "u2", "d", 0.9)], "no unit was rated by 2 or more raters"),
        ([("a", "u1", "d", 0.5), ("b", "u1", "d", 0.5)], "no variance"),
        # the unpaired 0.9 adds a value but no pairable variance
        ([("a", "u1", "d", 0.5), ("b", "u1", "d", 0.5), ("b", "u2", "d", 0.9)], "no variance"),
    ],
)
def test_undefined_alpha_is_none_with_a_note(ratings, note):
    result = only(rubric_agreement(ratings))
    assert result.alpha is None
    assert note in result.note and result.note.startswith("undefined")


def test_pairs_without_overlap_have_no_statistics():
    ratings = [("a", "u1", "d", 0.5), ("b", "u1", "d", 0.6), ("c", "u2", "d", 0.1)]
    result = only(rubric_agreement(ratings))
    assert result.pairs == (
        PairAgreement("a", "b", 1, pytest.approx(0.1), 1.0),
        PairAgreement("a", "c", 0, None, None),
        PairAgreement("b", "c", 0, None, None),
    )


def test_tolerance_is_inclusive_and_configurable():
    ratings = [("a", "u1", "d", 0.8), ("b", "u1", "d", 0.55), ("a", "u2", "d", 0.1), ("b", "u2", "d", 0.5)]
    result = only(rubric_agreement(ratings))
    assert result.tolerance == DEFAULT_TOLERANCE == 0.25
    assert result.pairs[0].within_tolerance == 0.5  # |0.8 - 0.55| counts as within 0.25
    assert only(rubric_agreement(ratings, tolerance=0.0)).pairs[0].within_tolerance == 0.0
    assert only(rubric_agreement(ratings, tolerance=0.5)).pairs[0].within_tolerance == 1.0


def test_dimensions_are_separate_and_sorted():
    ratings = [
        Rating("judge", "u1", "safety", 1.0),
        ("person", "u1", "safety", 1.0),
        ("judge", "u1", "accuracy", 0.0),
        ("person", "u1", "accuracy", 1.0),
        ("judge", "u2", "accuracy", 1.0),
        ("person", "u2", "accuracy", 1.0),
    ]
    results = rubric_agreement(ratings)
    assert [r.dimension_id for r in results] == ["accuracy", "safety"]
    assert all(isinstance(r, DimensionAgreement) for r in results)
    assert results[0].pairs[0].mean_absolute_difference == pytest.approx(0.5)
    assert results[1].alpha is None


def test_output_is_deterministic_whatever_the_input_order():
    ratings = [
        ("b", "u2", "x", 0.1),
        ("a", "u1", "x", 0.3),
        ("c", "u1", "x", 0.4),
        ("a", "u2", "x", 0.2),
        ("b", "u1", "x", 0.9),
        ("c", "u2", "y", 0.5),
        ("a", "u2", "y", 0.7),
    ]
    forward = rubric_agreement(ratings)
    backward = rubric_agreement(list(reversed(ratings)))
    assert [r.to_document() for r in forward] == [r.to_document() for r in backward]
    assert forward[0].to_document()["pairs"][0] == {
        "rater_a": "a",
        "rater_b": "b",
        "shared_units": 2,
        "mean_absolute_difference": pytest.approx(0.35),
        "within_tolerance": 0.5,
    }


def test_empty_input():
    assert rubric_agreement([]) == ()


@pytest.mark.parametrize(
    "rating",
    [
        ("a", "u1", "d"),
        ("a", "u1", "d", 0.5, "extra"),
        ("", "u1", "d", 0.5),
        ("a", " ", "d", 0.5),
        ("a", "u1", None, 0.5),
        ("a", "u1", "d", "0.5"),
        ("a", "u1", "d", True),
        ("a", "u1", "d", math.nan),
        ("a", "u1", "d", math.inf),
        42,
    ],
)
def test_bad_ratings_are_value_errors(rating):
    with pytest.raises(ValueError):
        rubric_agreement([rating])


def test_a_repeated_rating_is_a_value_error():
    with pytest.raises(ValueError, match="twice"):
        rubric_agreement([("a", "u1", "d", 0.5), ("a", "u1", "d", 0.5)])


@pytest.mark.parametrize("tolerance", [-0.1, math.nan, math.inf, "0.2", True, None])
def test_bad_tolerance(tolerance):
    with pytest.raises(ValueError):
        rubric_agreement([], tolerance=tolerance)
