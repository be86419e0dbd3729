"""Candidates far from every known intent cluster (trajectory-mining spec §2.7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .candidates import IntentCandidate
from .vectors import validated_matrix


@dataclass(frozen=True, kw_only=True)
class NovelIntent:
    candidate_id: str
    nearest_cluster_id: str
    similarity: float
    novel: bool


def detect_novel_intents(
    candidates: Sequence[IntentCandidate],
    embeddings: Mapping[str, Any],
    known_centroids: Mapping[str, Any],
    *,
    threshold: float = 0.75,
) -> tuple[NovelIntent, ...]:
    """Nearest centroid by cosine for each candidate in input order (ties to the smaller id); novel if `< threshold`."""
    try:
        in_range = -1.0 <= float(threshold) <= 1.0
    except (TypeError, ValueError):
        in_range = False
    if not in_range or not known_centroids:
        raise ValueError("threshold must be in [-1, 1] and centroids are required")
    candidate_ids = [candidate.candidate_id for candidate in candidates]
    centroid_ids = sorted(known_centroids)
    vectors = validated_matrix(candidate_ids, embeddings)
    centroids = validated_matrix(centroid_ids, known_centroids)
    if not candidate_ids:
        return ()
    if vectors.shape[1] != centroids.shape[1]:
        raise ValueError("embeddings must be non-empty one-dimensional peers")
    similarities = vectors @ centroids.T
    nearest = np.argmax(similarities, axis=1)  # the first maximum, i.e. the smallest of the sorted centroid ids
    results = []
    for row, (candidate_id, column) in enumerate(zip(candidate_ids, nearest.tolist(), strict=True)):
        similarity = float(similarities[row, column])
        results.append(
            NovelIntent(
                candidate_id=candidate_id,
                nearest_cluster_id=centroid_ids[column],
                similarity=similarity,
                novel=similarity < threshold,
            )
        )
    return tuple(results)
