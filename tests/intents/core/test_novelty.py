import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from intents.core import IntentCandidate, IntentEvidence, IntentKind, NovelIntent, detect_novel_intents

EVIDENCE = (IntentEvidence(trajectory_id="t1", start=0, end=0),)


def candidates(*ids):
    return [IntentCandidate(candidate_id, "Reset password", IntentKind.INFERRED, EVIDENCE) for candidate_id in ids]


CENTROIDS = {"intent-cluster:b": [0.0, 1.0], "intent-cluster:a": [1.0, 0.0]}


def test_each_candidate_gets_its_nearest_centroid_in_input_order():
    results = detect_novel_intents(
        candidates("c2", "c1", "c3"),
        {"c1": [2.0, 0.1], "c2": [0.0, 5.0], "c3": [-1.0, -1.0]},
        CENTROIDS,
    )
    assert [result.candidate_id for result in results] == ["c2", "c1", "c3"]
    assert [result.nearest_cluster_id for result in results] == [
        "intent-cluster:b",
        "intent-cluster:a",
        "intent-cluster:a",
    ]
    assert results[0].similarity == pytest.approx(1.0)
    assert results[1].similarity == pytest.approx(2.0 / math.hypot(2.0, 0.1))
    assert results[2].similarity == pytest.approx(-math.sqrt(0.5))
    assert [result.novel for result in results] == [False, False, True]
    assert all(isinstance(result.similarity, float) for result in results)


def test_ties_go_to_the_smaller_centroid_id():
    (result,) = detect_novel_intents(candidates("c"), {"c": [1.0, 1.0]}, CENTROIDS)
    assert result.nearest_cluster_id == "intent-cluster:a"
    same = {f"k{i}": [0.3, 0.7, 0.1] for i in (3, 1, 2)}
    (result,) = detect_novel_intents(candidates("c"), {"c": [0.1, 0.2, 0.3]}, same)
    assert result.nearest_cluster_id == "k1"


def test_ties_between_identical_centroids_hold_in_many_dimensions():
    rng = np.random.default_rng(7)
    for dimension in (1, 3, 8, 17, 64, 129):
        vector = rng.normal(size=dimension).tolist()
        centroids = {f"c{i:02d}": list(vector) for i in range(12, 0, -1)}
        embeddings = {f"x{i}": rng.normal(size=dimension).tolist() for i in range(20)}
        results = detect_novel_intents(candidates(*embeddings), embeddings, centroids)
        assert {result.nearest_cluster_id for result in results} == {"c01"}


def test_novel_is_strictly_below_the_threshold():
    (at,) = detect_novel_intents(candidates("c"), {"c": [1.0, 0.0]}, CENTROIDS, threshold=1.0)
    assert at.novel is False
    (above,) = detect_novel_intents(candidates("c"), {"c": [0.0, 1.0]}, {"k": [1.0, 0.0]}, threshold=0.0)
    assert above.similarity == 0.0
    assert above.novel is False
    (below,) = detect_novel_intents(candidates("c"), {"c": [-1.0, 0.0]}, {"k": [1.0, 0.0]}, threshold=-1.0)
    assert below.similarity == pytest.approx(-1.0)


@pytest.mark.parametrize("threshold", [1.0001, -1.5, float("nan"), float("inf"), "high", None])
def test_an_out_of_range_threshold_raises(threshold):
    with pytest.raises(ValueError, match=r"^threshold must be in \[-1, 1\] and centroids are required$"):
        detect_novel_intents(candidates("c"), {"c": [1.0, 0.0]}, CENTROIDS, threshold=threshold)


def test_missing_centroids_raise_even_without_candidates():
    with pytest.raises(ValueError, match="centroids are required"):
        detect_novel_intents([], {}, {})


def test_no_candidates_give_no_results():
    assert detect_novel_intents([], {}, CENTROIDS) == ()


@pytest.mark.parametrize(
    ("embeddings", "centroids", "message"),
    [
        ({}, CENTROIDS, "an embedding is required for every identifier"),
        ({"c": [1.0, float("nan")]}, CENTROIDS, "embeddings must be finite"),
        ({"c": [1.0, 0.0]}, {"k": [0.0, 0.0]}, "embeddings must have non-zero norm"),
        ({"c": [1.0, 0.0]}, {"k": [1.0, float("inf")]}, "embeddings must be finite"),
        ({"c": [1.0, 0.0]}, {"k": [1.0], "j": [1.0, 0.0]}, "embeddings must be non-empty one-dimensional peers"),
        ({"c": [1.0, 0.0]}, {"k": [1.0, 0.0, 0.0]}, "embeddings must be non-empty one-dimensional peers"),
    ],
)
def test_embeddings_and_centroids_are_validated(embeddings, centroids, message):
    with pytest.raises(ValueError) as raised:
        detect_novel_intents(candidates("c"), embeddings, centroids)
    assert str(raised.value) == message


def test_novel_intent_is_frozen_and_keyword_only():
    result = NovelIntent(candidate_id="c", nearest_cluster_id="k", similarity=0.5, novel=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.novel = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        NovelIntent("c", "k", 0.5, True)  # type: ignore[misc]


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).filter(lambda value: abs(value) > 1e-3)
vectors = st.lists(finite, min_size=3, max_size=3)


@given(
    st.lists(vectors, min_size=1, max_size=6),
    st.dictionaries(st.text("abc", min_size=1, max_size=3), vectors, min_size=1, max_size=5),
    st.floats(min_value=-1.0, max_value=1.0),
)
def test_the_result_matches_a_brute_force_scan(candidate_vectors, centroids, threshold):
    ids = [f"c{i}" for i in range(len(candidate_vectors))]
    embeddings = dict(zip(ids, candidate_vectors, strict=True))
    results = detect_novel_intents(candidates(*ids), embeddings, centroids, threshold=threshold)
    for result, vector in zip(results, candidate_vectors, strict=True):
        v = np.asarray(vector) / np.linalg.norm(vector)
        scores = {key: float(v @ (np.asarray(c) / np.linalg.norm(c))) for key, c in centroids.items()}
        best = max(scores.values())
        assert result.similarity == pytest.approx(best, abs=1e-9)
        assert scores[result.nearest_cluster_id] >= best - 1e-9
        assert -1.0 - 1e-9 <= result.similarity <= 1.0 + 1e-9
        assert result.novel == (result.similarity < threshold)
