import math

import numpy as np
import pytest

from intents.core import validated_matrix


def test_rows_are_l2_normalised_float64_in_the_ids_order():
    matrix = validated_matrix(["b", "a"], {"a": [3, 4], "b": np.array([0.0, -2.0], dtype=np.float32), "c": [9, 9]})
    assert matrix.dtype == np.float64
    np.testing.assert_allclose(matrix, [[0.0, -1.0], [0.6, 0.8]])


def test_no_ids_give_an_empty_matrix():
    assert validated_matrix([], {}).shape == (0, 0)


def test_huge_and_tiny_vectors_normalise():
    matrix = validated_matrix(["big", "tiny"], {"big": [1e300, 1e300], "tiny": [5e-324, 0.0]})
    np.testing.assert_allclose(matrix, [[math.sqrt(0.5), math.sqrt(0.5)], [1.0, 0.0]])


def test_the_input_is_not_modified():
    vector = np.array([3.0, 4.0])
    validated_matrix(["a"], {"a": vector})
    assert vector.tolist() == [3.0, 4.0]


@pytest.mark.parametrize(
    ("embeddings", "message"),
    [
        ({"a": [1.0]}, "an embedding is required for every identifier"),
        ([[1.0], [1.0]], "an embedding is required for every identifier"),
        ({"a": [], "b": [1.0]}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": 1.0, "b": [1.0]}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": [[1.0, 0.0]], "b": [1.0, 0.0]}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": [1.0, 0.0], "b": [1.0, 0.0, 0.0]}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": ["x"], "b": [1.0]}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": [[1.0], [1.0, 2.0]], "b": [1.0]}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": None, "b": [1.0]}, "embeddings must be non-empty one-dimensional peers"),
        ({"a": [1.0, float("nan")], "b": [1.0, 0.0]}, "embeddings must be finite"),
        ({"a": [1.0, float("-inf")], "b": [1.0, 0.0]}, "embeddings must be finite"),
        ({"a": [0.0, 0.0], "b": [1.0, 0.0]}, "embeddings must have non-zero norm"),
    ],
)
def test_invalid_embeddings_raise_value_error(embeddings, message):
    with pytest.raises(ValueError) as raised:
        validated_matrix(["a", "b"], embeddings)
    assert str(raised.value) == message


def test_missing_is_reported_before_shape_problems():
    with pytest.raises(ValueError, match="required for every identifier"):
        validated_matrix(["a", "b"], {"a": []})


def test_an_unhashable_id_is_missing():
    with pytest.raises(ValueError, match="required for every identifier"):
        validated_matrix([["a"]], {"a": [1.0]})
