"""Single-link clustering of intent candidates by the cosine of their embeddings (trajectory-mining spec §2.6).

The reference fills the whole n×n similarity matrix. This module gives the same result without ever holding it:

* **Links.** The upper triangle is computed in row blocks of a few million entries. The block product runs in
  float32 (three times faster than float64 on the same BLAS), which is exact at the threshold thanks to a proven
  error bound: a float32 similarity further than `slack` from the threshold is on the same side as the exact one;
  the few pairs inside that band are recomputed from the float64 rows, first by a plain float64 dot product (with its
  own, much smaller, band) and, for the pairs still undecided, by a compensated dot product (Ogita–Rump–Oishi Dot2,
  as accurate as twice the working precision). So every `S[i, j] >= threshold` decision is the decision of the
  float64 similarity itself, and it depends only on the two vectors: not on block layout, input order or BLAS.
* **Components.** The links of each block are merged into a flat label array (every candidate carries the smallest
  input index of its component, the root of a union-find whose roots are always the smaller index) by vectorised
  hooking and pointer jumping. Blocks whose links are dense are first contracted row by row, so the number of links
  held at once stays bounded even when everything is similar to everything.
* **Medoids and cohesion** come from the identity `sum_j S[i, j] = x_i · sum_j x_j` over a component: O(n·d) instead
  of the O(|C|²·d) sub-matrix, with the diagonal counted as exactly 1.0 (`1 + x_i · (sum_j x_j − x_i)`). Means that
  differ by less than `MEDOID_TIE_TOLERANCE` (far above the rounding of that identity, far below any real
  difference) are a tie, which goes to the smallest candidate id.
* **Ambiguity** compares each member with the medoids only (members × medoids, in row blocks).

The core imports numpy only; embeddings are validated by `validated_matrix` (shared with novelty detection).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .vectors import validated_matrix

CLUSTER_PREFIX = "intent-cluster:"
THRESHOLDS_INVALID = "similarity_threshold must be in [-1, 1] and ambiguity_margin must be >= 0"
IDS_NOT_UNIQUE = "candidate ids must be unique"

MEDOID_TIE_TOLERANCE = 1e-12

_BLOCK_ENTRIES = 1 << 24  # similarity entries per row block: 64 MiB in float32, 128 MiB in float64
_LINK_CAP = 1 << 22  # links extracted at once (two index arrays of 32 MiB each)
_PAIR_CHUNK = 1 << 13  # pairs recomputed at once from the float64 rows (two gathers of 24 MiB at 384 dimensions)
_VELTKAMP = 134217729.0  # 2**27 + 1 splits a float64 into two halves whose products are exact
_FLOAT32_ROUNDOFF = 2.0**-24
_FLOAT32_MAX_SLACK = 1e-3  # float32 products while their band is this narrow (up to 16,000 dimensions)
_FLOAT64_ROUNDOFF = 2.0**-53


class ClusterableCandidate(Protocol):
    """What clustering needs of a candidate (IntentCandidate satisfies it)."""

    @property
    def candidate_id(self) -> str: ...

    @property
    def intent(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class IntentCluster:
    cluster_id: str
    medoid_id: str
    candidate_ids: tuple[str, ...]
    labels: tuple[str, ...]
    cohesion: float
    ambiguous_candidate_ids: tuple[str, ...]

    @property
    def support(self) -> int:
        """The number of member candidates."""
        return len(self.candidate_ids)


@dataclass(frozen=True)
class IntentClustering:
    clusters: tuple[IntentCluster, ...]
    threshold: float


def cluster_intents(
    candidates: Sequence[ClusterableCandidate],
    embeddings: Mapping[str, Any],
    *,
    similarity_threshold: float = 0.82,
    ambiguity_margin: float = 0.03,
) -> IntentClustering:
    """Single-link clusters of candidates whose cosine similarity is `>= similarity_threshold` (inclusive).

    `embeddings` maps every candidate id to its vector. Each cluster has its medoid (highest mean similarity to
    the members, ties to the smallest id), its cohesion (mean of the whole similarity sub-matrix, diagonal
    included) and its ambiguous members (own medoid no more than `ambiguity_margin` closer than another cluster's
    medoid; none when there is a single cluster). Clusters are sorted by `cluster_id`.
    """
    threshold, margin = _checked_settings(similarity_threshold, ambiguity_margin)
    candidates = list(candidates)
    ids = [candidate.candidate_id for candidate in candidates]
    if len(set(ids)) != len(ids):
        raise ValueError(IDS_NOT_UNIQUE)
    vectors = validated_matrix(ids, embeddings)
    if not ids:
        return IntentClustering((), threshold)
    labels = single_link_labels(vectors, threshold)
    groups = _Components(labels)
    medoids, cohesion = _medoids_and_cohesion(vectors, groups, ids)
    ambiguous = _ambiguous(vectors, groups, medoids, margin)
    clusters = []
    for component in range(groups.count):
        members = groups.members(component)
        medoid_id = ids[medoids[component]]
        clusters.append(
            IntentCluster(
                cluster_id=CLUSTER_PREFIX + medoid_id,
                medoid_id=medoid_id,
                candidate_ids=tuple(sorted(ids[index] for index in members)),
                labels=tuple(sorted({candidates[index].intent for index in members})),
                cohesion=float(cohesion[component]),
                ambiguous_candidate_ids=tuple(sorted(ids[index] for index in members[ambiguous[members]])),
            )
        )
    clusters.sort(key=lambda cluster: cluster.cluster_id)
    return IntentClustering(tuple(clusters), threshold)


def _checked_settings(similarity_threshold: Any, ambiguity_margin: Any) -> tuple[float, float]:
    try:
        threshold = float(similarity_threshold)
        margin = float(ambiguity_margin)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(THRESHOLDS_INVALID) from None
    if not (-1.0 <= threshold <= 1.0) or not (margin >= 0.0):  # NaN fails both comparisons
        raise ValueError(THRESHOLDS_INVALID)
    return threshold, margin


# -- links and components ----------------------------------------------------------------------------------------


def single_link_labels(vectors: np.ndarray, threshold: float) -> np.ndarray:
    """For L2-normalised float64 rows: each row's component under the links `row_i · row_j >= threshold`, as the
    smallest row index of that component (so labels are also the union-find roots with the smaller index as root).
    """
    count, dimensions = vectors.shape
    labels = np.arange(count, dtype=np.intp)
    slack32 = _slack(dimensions, _FLOAT32_ROUNDOFF)
    if slack32 <= _FLOAT32_MAX_SLACK:
        product, slack = vectors.astype(np.float32), slack32
    else:  # too many dimensions for float32 to narrow anything down: the float64 product has a band too
        product, slack = vectors, _slack(dimensions, _FLOAT64_ROUNDOFF)
    lower, upper = threshold - slack, threshold + slack
    rows = max(1, min(count, _BLOCK_ENTRIES // count))
    for start in range(0, count, rows):
        if (labels[start:] == labels[start]).all():  # the rest is one component already: no pair left to link
            break
        stop = min(count, start + rows)
        block = product[start:stop] @ product[start:].T  # rows start..stop against columns start..count
        height = stop - start
        block[:, :height][np.tri(height, dtype=bool)] = -np.inf  # only pairs i < j
        near = block >= lower
        linked = np.count_nonzero(near)
        if linked == 0:
            continue
        if linked <= _LINK_CAP:
            row, column = _positions(near)
            sure = block[row, column] >= upper
            row += start
            column += start
            _union(labels, row[sure], column[sure])
            _link_if_similar(labels, vectors, row[~sure], column[~sure], threshold)
        else:
            sure = block >= upper
            near &= ~sure
            _union_dense(labels, sure, start, start)
            _link_band_dense(labels, vectors, near, start, start, threshold)
    return labels


def _slack(dimensions: int, unit_roundoff: float) -> float:
    """More than the largest possible error of a computed dot product of two unit vectors rounded to this precision.

    Rounding the inputs costs at most 2u·Σ|x_i y_i| and any summation order at most γ_d·Σ|x_i y_i|, with
    γ_d = d·u / (1 − d·u) and Σ|x_i y_i| <= ‖x‖‖y‖ ≈ 1; the factor and the constant leave room for the norms'
    own rounding and for the (≈1e-16) error of the compensated dot product that decides inside the band.
    """
    scaled = (dimensions + 2) * unit_roundoff
    if scaled >= 0.5:
        return np.inf
    return 1.01 * scaled / (1.0 - scaled) + 1e-15


def _positions(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.nonzero` of a 2-D mask, an order of magnitude faster on sparse masks (one flat scan, then divmod)."""
    return np.divmod(np.flatnonzero(mask), mask.shape[1])


def _union(labels: np.ndarray, left: np.ndarray, right: np.ndarray) -> None:
    """Merge the components of each pair. `labels` is flat before and after: every entry is its component's root,
    the smallest index (when two roots join, the larger is hooked under the smaller)."""
    while left.size:
        left_root = labels[left]
        right_root = labels[right]
        open_ = left_root != right_root
        if not open_.any():
            return
        left, right = left[open_], right[open_]
        left_root, right_root = left_root[open_], right_root[open_]
        np.minimum.at(labels, np.maximum(left_root, right_root), np.minimum(left_root, right_root))
        _flatten(labels)


def _flatten(labels: np.ndarray) -> None:
    """Pointer jumping until every entry points at a root (entries only ever point to smaller indices)."""
    while True:
        jumped = labels[labels]
        if np.array_equal(jumped, labels):
            return
        labels[:] = jumped


def _union_dense(labels: np.ndarray, links: np.ndarray, row_offset: int, column_offset: int) -> None:
    """Merge a boolean block of links without extracting them all when there are many: each round links every row
    with its first linked column and every column with its first linked row, then drops the links that now lie inside
    one component. Every component that still has a link merges with another, so their number at least halves."""
    columns = slice(column_offset, column_offset + links.shape[1])
    rows = slice(row_offset, row_offset + links.shape[0])
    while True:
        linked = np.count_nonzero(links)
        if linked == 0:
            return
        if linked <= _LINK_CAP:
            row, column = _positions(links)
            _union(labels, row + row_offset, column + column_offset)
            return
        row = np.flatnonzero(links.any(axis=1))
        column = np.flatnonzero(links.any(axis=0))
        _union(
            labels,
            np.concatenate((row, links[:, column].argmax(axis=0))) + row_offset,
            np.concatenate((links[row].argmax(axis=1), column)) + column_offset,
        )
        links &= labels[rows, None] != labels[None, columns]


def _link_band_dense(
    labels: np.ndarray, vectors: np.ndarray, band: np.ndarray, row_offset: int, column_offset: int, threshold: float
) -> None:
    """`_link_if_similar` over a boolean block of candidate pairs, a slice of rows at a time."""
    step = max(1, _LINK_CAP // max(1, band.shape[1]))
    columns = slice(column_offset, column_offset + band.shape[1])
    for first in range(0, band.shape[0], step):
        last = min(band.shape[0], first + step)
        rows = slice(row_offset + first, row_offset + last)
        open_ = band[first:last] & (labels[rows, None] != labels[None, columns])
        row, column = _positions(open_)
        _link_if_similar(labels, vectors, row + row_offset + first, column + column_offset, threshold)


def _link_if_similar(
    labels: np.ndarray, vectors: np.ndarray, left: np.ndarray, right: np.ndarray, threshold: float
) -> None:
    """Union the pairs whose float64 similarity is `>= threshold`, skipping pairs already in one component."""
    slack = _slack(vectors.shape[1], _FLOAT64_ROUNDOFF)
    for start in range(0, left.size, _PAIR_CHUNK):
        row, column = left[start : start + _PAIR_CHUNK], right[start : start + _PAIR_CHUNK]
        open_ = labels[row] != labels[column]
        row, column = row[open_], column[open_]
        if not row.size:
            continue
        first, second = vectors[row], vectors[column]
        similarity = np.einsum("ij,ij->i", first, second)
        linked = similarity >= threshold + slack
        undecided = np.flatnonzero(np.abs(similarity - threshold) < slack)
        if undecided.size:
            linked[undecided] = _compensated_dot(first[undecided], second[undecided]) >= threshold
        _union(labels, row[linked], column[linked])


def _compensated_dot(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Row-wise dot products as accurate as if computed in twice the precision, then rounded (Dot2: error-free
    products by Veltkamp–Dekker splitting, summed left to right with error-free sums). The result depends on the
    two vectors only, and is the same with the vectors swapped."""
    product = first * second
    first_high = _VELTKAMP * first
    first_high -= first_high - first
    first_low = first - first_high
    second_high = _VELTKAMP * second
    second_high -= second_high - second
    second_low = second - second_high
    error = first_low * second_low - (
        ((product - first_high * second_high) - first_low * second_high) - first_high * second_low
    )
    product, error = product.T.copy(), error.T.copy()
    total, compensation = product[0], error[0]
    for term, term_error in zip(product[1:], error[1:], strict=True):
        summed = total + term
        virtual = summed - total
        compensation = compensation + ((total - (summed - virtual)) + (term - virtual)) + term_error
        total = summed
    return total + compensation


class _Components:
    """Candidates grouped by component label; components numbered by their smallest member index."""

    def __init__(self, labels: np.ndarray) -> None:
        self.order = np.argsort(labels, kind="stable")  # members of a component stay in input order
        ordered = labels[self.order]
        self.starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        self.sizes = np.diff(np.append(self.starts, labels.size))
        self.count = self.starts.size
        self.of = np.empty(labels.size, dtype=np.intp)
        self.of[self.order] = np.repeat(np.arange(self.count), self.sizes)

    def members(self, component: int) -> np.ndarray:
        start = self.starts[component]
        return self.order[start : start + self.sizes[component]]


def _medoids_and_cohesion(
    vectors: np.ndarray, groups: _Components, ids: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Each component's medoid (a row index) and cohesion, from the row sums of its similarity sub-matrix."""
    sums = np.add.reduceat(vectors[groups.order], groups.starts, axis=0)
    others = sums[groups.of]
    others -= vectors  # Σ_{j≠i} x_j: exactly zero for a singleton
    row_sums = 1.0 + np.einsum("ij,ij->i", vectors, others)  # the diagonal counts as exactly 1.0
    means = (row_sums / groups.sizes[groups.of])[groups.order]
    best = np.maximum.reduceat(means, groups.starts)
    tied = means >= np.repeat(best, groups.sizes) - MEDOID_TIE_TOLERANCE
    id_order = sorted(range(len(ids)), key=ids.__getitem__)
    rank = np.empty(len(ids), dtype=np.intp)
    rank[id_order] = np.arange(len(ids))
    ranks = np.where(tied, rank[groups.order], len(ids))
    medoids = np.asarray(id_order, dtype=np.intp)[np.minimum.reduceat(ranks, groups.starts)]
    cohesion = np.add.reduceat(row_sums[groups.order], groups.starts) / (groups.sizes.astype(np.float64) ** 2)
    return medoids, np.clip(cohesion, -1.0, 1.0)


def _ambiguous(vectors: np.ndarray, groups: _Components, medoids: np.ndarray, margin: float) -> np.ndarray:
    """Per row: own medoid's similarity minus the best other medoid's is `<= margin` (never with one cluster).

    Like the links, the members × medoids product runs in float32 when that is safe: a float32 gap further than
    twice the similarity slack from the margin decides as the float64 gap would; the rows inside are redone in
    float64."""
    count, dimensions = vectors.shape
    ambiguous = np.zeros(count, dtype=bool)
    if groups.count < 2:
        return ambiguous
    is_medoid = np.zeros(count, dtype=bool)
    is_medoid[medoids] = True
    slack32 = _slack(dimensions, _FLOAT32_ROUNDOFF)
    narrowed = slack32 <= _FLOAT32_MAX_SLACK
    product = vectors.astype(np.float32) if narrowed else vectors
    band = 2.0 * (slack32 + _slack(dimensions, _FLOAT64_ROUNDOFF))
    rows = max(1, min(count, _BLOCK_ENTRIES // groups.count))
    for start in range(0, count, rows):
        block = slice(start, min(count, start + rows))
        gaps = _medoid_gaps(product[block], product[medoids], groups.of[block], is_medoid[block])
        decided = gaps <= margin
        if narrowed:
            unsure = np.flatnonzero(np.abs(gaps - margin) <= band)
            if unsure.size:
                redo = start + unsure
                exact = _medoid_gaps(vectors[redo], vectors[medoids], groups.of[redo], is_medoid[redo])
                decided[unsure] = exact <= margin
        ambiguous[block] = decided
    return ambiguous


def _medoid_gaps(
    rows: np.ndarray, medoid_vectors: np.ndarray, own_column: np.ndarray, is_medoid: np.ndarray
) -> np.ndarray:
    """Similarity to the own medoid (exactly 1.0 for a medoid) minus the best similarity to another medoid."""
    similarity = rows @ medoid_vectors.T
    local = np.arange(rows.shape[0])
    own = np.where(is_medoid, 1.0, similarity[local, own_column].astype(np.float64))
    similarity[local, own_column] = -np.inf
    return own - similarity.max(axis=1).astype(np.float64)
