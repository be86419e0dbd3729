"""cluster_intents (trajectory-mining spec §2.6): every rule on hand-made vectors, a naive full-matrix reference on
random data, and properties."""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intents.core import IntentCandidate, IntentEvidence
from intents.core import clustering as clustering_module
from intents.core.clustering import IntentCluster, IntentClustering, cluster_intents

THRESHOLDS_INVALID = "similarity_threshold must be in [-1, 1] and ambiguity_margin must be >= 0"


def candidate(candidate_id: str, intent: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(candidate_id=candidate_id, intent=intent or f"label of {candidate_id}")


def ones(*positions: int, dimensions: int = 16) -> np.ndarray:
    """A 0/1 vector. With 1, 4 or 16 ones its normalised entries (1, 1/2, 1/4) are exact, so every similarity
    between such vectors is an exact multiple of 1/16, whatever the summation order."""
    vector = np.zeros(dimensions)
    vector[list(positions)] = 1.0
    return vector


def cluster(vectors: dict[str, np.ndarray], **options) -> IntentClustering:
    return cluster_intents([candidate(key) for key in vectors], vectors, **options)


def members(result: IntentClustering) -> set[frozenset[str]]:
    return {frozenset(item.candidate_ids) for item in result.clusters}


# -- validation ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "margin"),
    [(1.0000001, 0.03), (-1.0000001, 0.03), (math.nan, 0.03), (0.5, -1e-12), (0.5, math.nan), ("high", 0.03)],
)
def test_it_rejects_a_threshold_outside_minus_one_to_one_or_a_negative_margin(threshold, margin):
    with pytest.raises(ValueError, match=r"^similarity_threshold must be in \[-1, 1\] and ambiguity_margin must be"):
        cluster({"a": ones(0)}, similarity_threshold=threshold, ambiguity_margin=margin)


def test_it_checks_the_settings_even_without_candidates():
    with pytest.raises(ValueError) as raised:
        cluster_intents([], {}, similarity_threshold=2.0)
    assert str(raised.value) == THRESHOLDS_INVALID


@pytest.mark.parametrize(("threshold", "margin"), [(-1.0, 0.0), (1.0, 0.0), (1, 5)])
def test_the_bounds_of_the_settings_are_allowed(threshold, margin):
    result = cluster({"a": ones(0), "b": ones(1)}, similarity_threshold=threshold, ambiguity_margin=margin)
    assert result.threshold == float(threshold)


def test_it_rejects_repeated_candidate_ids():
    with pytest.raises(ValueError, match=r"^candidate ids must be unique$"):
        cluster_intents([candidate("a"), candidate("a")], {"a": ones(0)})


@pytest.mark.parametrize(
    ("embeddings", "message"),
    [
        ({"a": ones(0)}, "an embedding is required for every identifier"),
        ({"a": ones(0), "b": np.ones(3)}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": ones(0), "b": np.ones((2, 8))}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": [], "b": []}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": ones(0), "b": [math.inf] + [0.0] * 15}, "embeddings must be finite"),
        ({"a": ones(0), "b": [math.nan] * 16}, "embeddings must be finite"),
        ({"a": ones(0), "b": np.zeros(16)}, "embeddings must have non-zero norm"),
    ],
)
def test_it_rejects_missing_or_malformed_embeddings(embeddings, message):
    with pytest.raises(ValueError) as raised:
        cluster_intents([candidate("a"), candidate("b")], embeddings)
    assert str(raised.value) == message


def test_no_candidates_give_no_clusters():
    assert cluster_intents([], {}) == IntentClustering((), 0.82)
    assert cluster_intents([], {}, similarity_threshold=0.5).threshold == 0.5


# -- links ----------------------------------------------------------------------------------------------------------


def test_the_threshold_is_inclusive():
    vectors = {"a": ones(0, 1, 2, 3), "b": ones(1, 2, 3, 4)}  # similarity exactly 0.75
    assert members(cluster(vectors, similarity_threshold=0.75)) == {frozenset({"a", "b"})}
    above = float(np.nextafter(0.75, 1.0))
    assert members(cluster(vectors, similarity_threshold=above)) == {frozenset({"a"}), frozenset({"b"})}


def test_links_chain_single_link_style():
    vectors = {"a": ones(0, 1, 2, 3), "b": ones(1, 2, 3, 4), "c": ones(2, 3, 4, 5)}  # a·c = 0.5 only
    assert members(cluster(vectors, similarity_threshold=0.75)) == {frozenset({"a", "b", "c"})}
    assert members(cluster(vectors, similarity_threshold=0.8)) == {frozenset({"a"}), frozenset({"b"}), frozenset("c")}


def test_vectors_are_compared_by_direction_only():
    vectors = {"a": np.array([3.0, 4.0]), "b": np.array([300.0, 400.0]), "c": np.array([-3.0, -4.0])}
    assert members(cluster(vectors, similarity_threshold=1.0)) == {frozenset({"a", "b"}), frozenset({"c"})}


def test_a_threshold_of_minus_one_links_everything():
    vectors = {"a": np.array([1.0, 0.0]), "b": np.array([-1.0, 0.0]), "c": np.array([0.0, 1.0])}
    assert members(cluster(vectors, similarity_threshold=-1.0)) == {frozenset({"a", "b", "c"})}


@pytest.mark.parametrize("seed", range(12))
def test_links_are_decided_by_the_exact_similarity_at_the_threshold(seed):
    """The float32 block product cannot tell these apart; the result must follow the exact cosine of the two
    normalised float64 vectors, whichever side of it (by two ulps) the threshold lies."""
    rng = np.random.default_rng(seed)
    dimensions = int(rng.integers(2, 400))
    first, second = rng.standard_normal((2, dimensions))
    second = first + rng.uniform(0.05, 1.0) * second  # a pair near the default threshold
    embeddings = {"a": first, "b": second}
    matrix = clustering_module.validated_matrix(["a", "b"], embeddings)
    exact = sum(Fraction(x) * Fraction(y) for x, y in zip(matrix[0].tolist(), matrix[1].tolist(), strict=True))
    nearest = float(exact)
    below = float(np.nextafter(np.nextafter(nearest, -2.0), -2.0))
    above = float(np.nextafter(np.nextafter(nearest, 2.0), 2.0))
    if below < -1.0 or above > 1.0:
        return
    assert Fraction(below) < exact < Fraction(above)
    assert members(cluster(embeddings, similarity_threshold=below)) == {frozenset({"a", "b"})}
    assert members(cluster(embeddings, similarity_threshold=above)) == {frozenset({"a"}), frozenset({"b"})}


# -- medoid, cohesion ----------------------------------------------------------------------------------------------


def test_the_medoid_has_the_highest_mean_similarity():
    vectors = {"a": ones(0, 1, 2, 3), "b": ones(1, 2, 3, 4), "c": ones(2, 3, 4, 5)}
    (only,) = cluster(vectors, similarity_threshold=0.75).clusters
    assert only.medoid_id == "b"
    assert only.cluster_id == "intent-cluster:b"


def test_a_medoid_tie_goes_to_the_smallest_candidate_id_not_the_first_input():
    vectors = {"z": ones(0, 1, 2, 3), "m": ones(1, 2, 3, 4)}  # the two means are equal
    (pair,) = cluster(vectors, similarity_threshold=0.75).clusters
    assert pair.medoid_id == "m"
    rng = np.random.default_rng(3)
    shared = rng.standard_normal(384)
    duplicates = {"k3": shared, "k1": shared.copy(), "k2": shared * 7.0}
    (same,) = cluster(duplicates).clusters
    assert same.medoid_id == "k1"


def test_a_random_pair_ties_on_its_medoid_whatever_the_rounding():
    rng = np.random.default_rng(11)
    for _ in range(50):
        first = rng.standard_normal(384)
        second = first + 0.2 * rng.standard_normal(384)
        (pair,) = cluster({"y": first, "x": second}, similarity_threshold=-1.0).clusters
        assert pair.medoid_id == "x"


def test_a_singleton_has_cohesion_one_exactly():
    result = cluster({"a": np.array([0.1, 0.7, -0.3]), "b": np.array([-0.5, 0.2, 0.9])}, similarity_threshold=0.99)
    assert [item.cohesion for item in result.clusters] == [1.0, 1.0]


def test_a_pair_has_cohesion_one_plus_its_similarity_over_two():
    (pair,) = cluster({"a": ones(0, 1, 2, 3), "b": ones(1, 2, 3, 4)}, similarity_threshold=0.75).clusters
    assert pair.cohesion == pytest.approx((1 + 0.75) / 2, abs=1e-15)
    rng = np.random.default_rng(5)
    first, second = rng.standard_normal((2, 50))
    similarity = float(first @ second / np.linalg.norm(first) / np.linalg.norm(second))
    (random_pair,) = cluster({"a": first, "b": second}, similarity_threshold=-1.0).clusters
    assert random_pair.cohesion == pytest.approx((1 + similarity) / 2, abs=1e-14)


def test_cohesion_is_the_mean_of_the_whole_sub_matrix_diagonal_included():
    vectors = {"a": ones(0, 1, 2, 3), "b": ones(1, 2, 3, 4), "c": ones(2, 3, 4, 5)}
    (only,) = cluster(vectors, similarity_threshold=0.75).clusters
    assert only.cohesion == pytest.approx((3 * 1.0 + 2 * (0.75 + 0.75 + 0.5)) / 9, abs=1e-15)


# -- ambiguity --------------------------------------------------------------------------------------------------------


CHAIN_AND_NEIGHBOUR = {
    "a1": ones(0, 1, 2, 3),
    "a2": ones(1, 2, 3, 4),  # medoid of a1-a2-a3
    "a3": ones(2, 3, 4, 5),  # own medoid 0.75, medoid b 0.5: a gap of exactly 0.25
    "b": ones(4, 5, 6, 7),  # a singleton: own 1.0, medoid a2 0.25
}


@pytest.mark.parametrize(
    ("margin", "ambiguous"),
    [
        (0.0, set()),
        (float(np.nextafter(0.25, 0.0)), set()),
        (0.25, {"a3"}),
        (0.75, {"a1", "a2", "a3", "b"}),
    ],
)
def test_a_member_is_ambiguous_when_another_medoid_is_within_the_margin_inclusive(margin, ambiguous):
    result = cluster(CHAIN_AND_NEIGHBOUR, similarity_threshold=0.75, ambiguity_margin=margin)
    assert [item.cluster_id for item in result.clusters] == ["intent-cluster:a2", "intent-cluster:b"]
    found = {identifier for item in result.clusters for identifier in item.ambiguous_candidate_ids}
    assert found == ambiguous


def test_a_singleton_is_ambiguous_only_when_another_medoid_is_within_the_margin_of_one():
    vectors = {"a": ones(0, 1, 2, 3), "b": ones(1, 2, 3, 4)}  # 0.75 apart, kept apart by the threshold
    kept_apart = cluster(vectors, similarity_threshold=0.8, ambiguity_margin=0.25)
    assert [item.ambiguous_candidate_ids for item in kept_apart.clusters] == [("a",), ("b",)]
    clear = cluster(vectors, similarity_threshold=0.8, ambiguity_margin=0.2)
    assert [item.ambiguous_candidate_ids for item in clear.clusters] == [(), ()]


def test_with_one_cluster_nothing_is_ambiguous():
    vectors = {"a": ones(0, 1, 2, 3), "b": ones(1, 2, 3, 4), "c": ones(2, 3, 4, 5)}
    (only,) = cluster(vectors, similarity_threshold=0.75, ambiguity_margin=100.0).clusters
    assert only.ambiguous_candidate_ids == ()
    (alone,) = cluster({"a": ones(0)}, ambiguity_margin=100.0).clusters
    assert alone.ambiguous_candidate_ids == ()


# -- records ---------------------------------------------------------------------------------------------------------


def test_records_are_sorted_and_labels_are_the_sorted_set_of_raw_intents():
    candidates = [
        candidate("c9", "Reset password"),
        candidate("c2", "reset password"),
        candidate("c5", "Reset password"),
        candidate("b7", "cancel order"),
        candidate("a1", "Cancel my order!"),
    ]
    embeddings = {
        "c9": ones(0, 1, 2, 3),
        "c2": ones(0, 1, 2, 3),
        "c5": ones(0, 1, 2, 4),
        "b7": ones(8, 9, 10, 11),
        "a1": ones(8, 9, 10, 12),
    }
    result = cluster_intents(candidates, embeddings, similarity_threshold=0.75, ambiguity_margin=0.0)
    assert result == IntentClustering(
        (
            IntentCluster(
                cluster_id="intent-cluster:a1",
                medoid_id="a1",
                candidate_ids=("a1", "b7"),
                labels=("Cancel my order!", "cancel order"),
                cohesion=0.875,
                ambiguous_candidate_ids=(),
            ),
            IntentCluster(
                cluster_id="intent-cluster:c2",
                medoid_id="c2",
                candidate_ids=("c2", "c5", "c9"),
                labels=("Reset password", "reset password"),
                cohesion=pytest.approx((3 + 2 * (1.0 + 0.75 + 0.75)) / 9, abs=1e-15),
                ambiguous_candidate_ids=(),
            ),
        ),
        0.75,
    )
    assert [item.support for item in result.clusters] == [2, 3]


def test_clusters_are_sorted_by_cluster_id_not_by_size_or_input():
    vectors = {"z": ones(0), "y": ones(1), "x1": ones(2, 3, 4, 5), "x0": ones(2, 3, 4, 6)}
    result = cluster(vectors, similarity_threshold=0.75)
    assert [item.cluster_id for item in result.clusters] == [
        "intent-cluster:x0",
        "intent-cluster:y",
        "intent-cluster:z",
    ]


def test_it_takes_real_intent_candidates_and_plain_lists():
    evidence = (IntentEvidence(trajectory_id="t1", start=0, end=1),)
    candidates = [
        IntentCandidate("intent:1", "Reset password", "inferred", evidence),
        IntentCandidate("intent:2", "Password reset", "declared", evidence),
    ]
    result = cluster_intents(candidates, {"intent:1": [1.0, 0.0, 0.0], "intent:2": [0.9, 0.1, 0.0]})
    assert members(result) == {frozenset({"intent:1", "intent:2"})}
    assert result.clusters[0].labels == ("Password reset", "Reset password")


def test_float32_embeddings_as_stored_are_accepted():
    rng = np.random.default_rng(2)
    vectors = {f"c{index}": row.astype(np.float32) for index, row in enumerate(rng.standard_normal((30, 16)))}
    expected = cluster({key: value.astype(np.float64) for key, value in vectors.items()}, similarity_threshold=0.3)
    assert cluster(vectors, similarity_threshold=0.3) == expected


# -- against the naive reference ----------------------------------------------------------------------------------


def reference(candidates, embeddings, threshold, margin):
    """The reference algorithm written plainly: the full matrix, a union-find over every pair, argmax by loops."""
    ids = [item.candidate_id for item in candidates]
    matrix = np.array([np.asarray(embeddings[key], dtype=np.float64) for key in ids])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    similarity = matrix @ matrix.T
    np.fill_diagonal(similarity, 1.0)
    parent = list(range(len(ids)))

    def find(index):
        while parent[index] != index:
            index = parent[index]
        return index

    for i in range(len(ids)):
        for j in range(i + 1, len(ids)):
            if similarity[i, j] >= threshold:
                root_i, root_j = find(i), find(j)
                if root_i != root_j:
                    parent[max(root_i, root_j)] = min(root_i, root_j)
    components: dict[int, list[int]] = {}
    for index in range(len(ids)):
        components.setdefault(find(index), []).append(index)
    medoids = {}
    cohesion = {}
    for root, group in components.items():
        sub = similarity[np.ix_(group, group)]
        means = sub.mean(axis=1)
        best = means.max()
        medoids[root] = min(ids[group[k]] for k in range(len(group)) if means[k] == best)
        cohesion[root] = float(sub.mean())
    medoid_rows = {root: ids.index(medoid) for root, medoid in medoids.items()}
    clusters = []
    for root, group in components.items():
        ambiguous = []
        if len(components) > 1:
            for index in group:
                own = similarity[index, medoid_rows[root]]
                other = max(similarity[index, row] for key, row in medoid_rows.items() if key != root)
                if own - other <= margin:
                    ambiguous.append(ids[index])
        clusters.append(
            IntentCluster(
                cluster_id="intent-cluster:" + medoids[root],
                medoid_id=medoids[root],
                candidate_ids=tuple(sorted(ids[index] for index in group)),
                labels=tuple(sorted({candidates[index].intent for index in group})),
                cohesion=pytest.approx(cohesion[root], abs=1e-12),
                ambiguous_candidate_ids=tuple(sorted(ambiguous)),
            )
        )
    return IntentClustering(tuple(sorted(clusters, key=lambda item: item.cluster_id)), threshold)


def random_case(seed: int, count: int, dimensions: int):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((int(rng.integers(2, 12)), dimensions))
    vectors = centres[rng.integers(0, len(centres), count)] + rng.uniform(0.2, 0.9) * rng.standard_normal(
        (count, dimensions)
    )
    ids = [f"intent:{rng.integers(0, 16**6):06x}{index}" for index in range(count)]
    candidates = [candidate(key, f"label {index % 7}") for index, key in enumerate(ids)]
    return candidates, dict(zip(ids, vectors, strict=True)), float(rng.uniform(0.2, 0.95)), float(rng.uniform(0, 0.2))


@pytest.mark.parametrize("seed", range(8))
def test_it_matches_the_naive_reference_on_random_data(seed):
    candidates, embeddings, threshold, margin = random_case(seed, count=60 + 30 * seed, dimensions=8 + 7 * seed)
    expected = reference(candidates, embeddings, threshold, margin)
    result = cluster_intents(candidates, embeddings, similarity_threshold=threshold, ambiguity_margin=margin)
    assert result == expected


@pytest.mark.parametrize("seed", range(4))
def test_small_blocks_and_caps_change_nothing(seed, monkeypatch):
    """Row blocks of a few rows, dense blocks contracted row by row, band pairs recomputed in tiny chunks."""
    candidates, embeddings, threshold, margin = random_case(100 + seed, count=150, dimensions=12)
    threshold = [threshold, -0.5, 0.0, 0.9][seed]  # low thresholds make every block dense
    expected = reference(candidates, embeddings, threshold, margin)
    monkeypatch.setattr(clustering_module, "_BLOCK_ENTRIES", 7 * 150)
    monkeypatch.setattr(clustering_module, "_LINK_CAP", 40)
    monkeypatch.setattr(clustering_module, "_PAIR_CHUNK", 16)
    result = cluster_intents(candidates, embeddings, similarity_threshold=threshold, ambiguity_margin=margin)
    assert result == expected


def test_band_pairs_are_recomputed_when_the_float32_product_cannot_decide(monkeypatch):
    """With a huge float32 band every pair goes through the float64 recomputation; nothing changes."""
    candidates, embeddings, threshold, margin = random_case(7, count=120, dimensions=20)
    expected = reference(candidates, embeddings, threshold, margin)
    original = clustering_module._slack
    monkeypatch.setattr(clustering_module, "_FLOAT32_MAX_SLACK", math.inf)
    monkeypatch.setattr(
        clustering_module, "_slack", lambda size, roundoff: 3.0 if roundoff > 1e-10 else original(size, roundoff)
    )
    result = cluster_intents(candidates, embeddings, similarity_threshold=threshold, ambiguity_margin=margin)
    assert result == expected


def test_the_float64_product_gives_the_same_result(monkeypatch):
    """Used when the vectors have too many dimensions for float32 to narrow the threshold down."""
    candidates, embeddings, threshold, margin = random_case(8, count=120, dimensions=20)
    expected = reference(candidates, embeddings, threshold, margin)
    monkeypatch.setattr(clustering_module, "_FLOAT32_MAX_SLACK", 0.0)
    result = cluster_intents(candidates, embeddings, similarity_threshold=threshold, ambiguity_margin=margin)
    assert result == expected


# -- properties --------------------------------------------------------------------------------------------------------

small_vectors = st.lists(st.lists(st.integers(-3, 3), min_size=4, max_size=4).filter(any), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(
    vectors=small_vectors,
    threshold=st.sampled_from([-1.0, 0.0, 0.5, 0.8, 0.82, 1.0]) | st.floats(-1, 1),
    data=st.data(),
)
def test_membership_and_medoids_do_not_depend_on_input_order(vectors, threshold, data):
    ids = [f"c{index:02d}" for index in range(len(vectors))]
    embeddings = {key: np.array(vector, dtype=np.float64) for key, vector in zip(ids, vectors, strict=True)}
    shuffled = data.draw(st.permutations(ids))
    first = cluster_intents([candidate(key) for key in ids], embeddings, similarity_threshold=threshold)
    second = cluster_intents([candidate(key) for key in shuffled], embeddings, similarity_threshold=threshold)
    assert members(first) == members(second)
    assert [item.medoid_id for item in first.clusters] == [item.medoid_id for item in second.clusters]


@settings(max_examples=60, deadline=None)
@given(vectors=small_vectors, threshold=st.floats(-1, 1), margin=st.floats(0, 2))
def test_every_candidate_is_in_exactly_one_cluster_and_cohesion_is_a_cosine(vectors, threshold, margin):
    ids = [f"c{index:02d}" for index in range(len(vectors))]
    embeddings = dict(zip(ids, vectors, strict=True))
    result = cluster_intents(
        [candidate(key) for key in ids], embeddings, similarity_threshold=threshold, ambiguity_margin=margin
    )
    placed = [key for item in result.clusters for key in item.candidate_ids]
    assert sorted(placed) == ids
    assert sum(item.support for item in result.clusters) == len(ids)
    for item in result.clusters:
        assert -1.0 <= item.cohesion <= 1.0
        assert item.medoid_id in item.candidate_ids
        assert set(item.ambiguous_candidate_ids) <= set(item.candidate_ids)
    if len(result.clusters) == 1:
        assert result.clusters[0].ambiguous_candidate_ids == ()
