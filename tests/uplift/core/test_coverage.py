"""The model-coverage rule: only a model carrying most of an artifact's recent runs, uncertified, raises the flag."""

from uplift.core.coverage import MIN_RUNS, coverage


def test_a_dominant_uncertified_model_is_flagged():
    found = coverage({"model-b": 7, "model-a": 3}, {"model-a"})
    assert found.flagged and (found.model, found.runs) == ("model-b", 10) and found.share == 0.7


def test_a_certified_dominant_model_is_covered():
    assert not coverage({"model-b": 7, "model-a": 3}, {"model-b"}).flagged


def test_a_minority_model_under_trial_never_flags():
    assert not coverage({"model-a": 6, "model-b": 4}, {"model-a"}).flagged
    assert not coverage({"model-a": 5, "model-b": 5}, set()).flagged  # half is not most


def test_too_few_runs_or_no_model_named_are_covered():
    assert not coverage({"model-b": MIN_RUNS - 1}, set()).flagged
    assert coverage({"model-b": MIN_RUNS}, set()).flagged
    assert coverage({}, set()) == coverage({"": 40}, set())
    assert not coverage({"": 40}, set()).flagged and coverage({}, set()).runs == 0


def test_ties_go_to_the_first_name_on_every_process():
    assert coverage({"b": 3, "a": 3}, set(), min_runs=1, majority=0.4).model == "a"
