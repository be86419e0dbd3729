"""Embedding validation shared by clustering and novelty (trajectory-mining spec §2.6, §2.7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

MISSING = "an embedding is required for every identifier"
NOT_PEERS = "embeddings must be non-empty one-dimensional peers"
NOT_FINITE = "embeddings must be finite"
ZERO_NORM = "embeddings must have non-zero norm"


def _as_vector(value: Any) -> np.ndarray:
    try:
        vector = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(NOT_PEERS) from None
    if vector.ndim != 1 or vector.size == 0:
        raise ValueError(NOT_PEERS)
    return vector


def validated_matrix(ids: Sequence[str], embeddings: Mapping[str, Any]) -> np.ndarray:
    """L2-normalised float64 rows, one per id in `ids` order; ValueError with the §2.6 messages otherwise.

    Checks run over all ids in this order: every id has an embedding, every vector is a non-empty 1-D peer of the
    same length, every value is finite, every vector has a non-zero norm. No ids give a (0, 0) matrix.
    """
    if not isinstance(embeddings, Mapping):
        raise ValueError(MISSING)
    ids = list(ids)
    try:
        if any(identifier not in embeddings for identifier in ids):
            raise ValueError(MISSING)
    except TypeError:  # an unhashable identifier cannot have an embedding
        raise ValueError(MISSING) from None
    if not ids:
        return np.zeros((0, 0), dtype=np.float64)
    vectors = [_as_vector(embeddings[identifier]) for identifier in ids]
    if len({vector.size for vector in vectors}) != 1:
        raise ValueError(NOT_PEERS)
    matrix = np.array(vectors, dtype=np.float64)
    if not np.isfinite(matrix).all():
        raise ValueError(NOT_FINITE)
    # Scale by the largest magnitude first so that huge (overflowing) and tiny (subnormal) vectors normalise exactly.
    scale = np.abs(matrix).max(axis=1, keepdims=True)
    if (scale == 0).any():
        raise ValueError(ZERO_NORM)
    matrix = matrix / scale
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
