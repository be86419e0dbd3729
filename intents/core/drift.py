"""Drift of intent-cluster mass between two windows (trajectory-mining spec §2.8)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class ClusterLike(Protocol):
    """What drift needs of an intent cluster (IntentCluster satisfies it)."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def support(self) -> int: ...


class ClusteringLike(Protocol):
    """What drift needs of a window's clustering (IntentClustering satisfies it)."""

    @property
    def clusters(self) -> Iterable[ClusterLike]: ...


@dataclass(frozen=True, kw_only=True)
class IntentClusterChange:
    before_cluster_id: str
    after_cluster_id: str
    before_mass: float
    after_mass: float
    mass_delta: float


@dataclass(frozen=True, kw_only=True)
class IntentDriftReport:
    changes: tuple[IntentClusterChange, ...]
    retired_cluster_ids: tuple[str, ...]
    new_cluster_ids: tuple[str, ...]
    jsd: float
    before_total: int
    after_total: int


def _supports(window: ClusteringLike) -> dict[str, int]:
    supports: dict[str, int] = {}
    for cluster in window.clusters:
        if cluster.cluster_id in supports:
            raise ValueError("intent cluster ids must be unique within a window")
        supports[cluster.cluster_id] = cluster.support
    return supports


def _masses(supports: dict[str, int]) -> tuple[int, dict[str, float]]:
    total = sum(supports.values())
    return total, {cluster_id: (support / total if total else 0.0) for cluster_id, support in supports.items()}


def _kl_to_mean(p: np.ndarray, m: np.ndarray) -> float:
    keep = (p > 0) & (m > 0)
    return float(np.sum(p[keep] * np.log2(p[keep] / m[keep])))


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> float:
    """JSD in bits of two aligned mass vectors; zero terms skipped, no smoothing; clamped to [0, 1]."""
    m = (p + q) / 2
    value = 0.5 * _kl_to_mean(p, m) + 0.5 * _kl_to_mean(q, m)
    return min(1.0, max(0.0, value))


def compare_intent_windows(
    before: ClusteringLike, after: ClusteringLike, *, cluster_matches: Mapping[str, str] | None = None
) -> IntentDriftReport:
    """Mass change per matched cluster, retired and new clusters, and the Jensen–Shannon divergence of the windows."""
    before_supports, after_supports = _supports(before), _supports(after)
    if cluster_matches:
        matches = dict(cluster_matches)
        if any(b not in before_supports or a not in after_supports for b, a in matches.items()):
            raise ValueError("cluster matches reference unknown clusters")
        if len(set(matches.values())) != len(matches):
            raise ValueError("after clusters may be matched at most once")
    else:
        matches = {cluster_id: cluster_id for cluster_id in before_supports if cluster_id in after_supports}
    before_total, before_mass = _masses(before_supports)
    after_total, after_mass = _masses(after_supports)
    pairs = sorted(matches.items())
    changes = tuple(
        IntentClusterChange(
            before_cluster_id=b,
            after_cluster_id=a,
            before_mass=before_mass[b],
            after_mass=after_mass[a],
            mass_delta=after_mass[a] - before_mass[b],
        )
        for b, a in pairs
    )
    matched_after = set(matches.values())
    retired = tuple(sorted(cluster_id for cluster_id in before_supports if cluster_id not in matches))
    new = tuple(sorted(cluster_id for cluster_id in after_supports if cluster_id not in matched_after))
    p = np.array(
        [before_mass[b] for b, _ in pairs] + [before_mass[r] for r in retired] + [0.0] * len(new), dtype=np.float64
    )
    q = np.array(
        [after_mass[a] for _, a in pairs] + [0.0] * len(retired) + [after_mass[n] for n in new], dtype=np.float64
    )
    return IntentDriftReport(
        changes=changes,
        retired_cluster_ids=retired,
        new_cluster_ids=new,
        jsd=jensen_shannon(p, q),
        before_total=before_total,
        after_total=after_total,
    )
