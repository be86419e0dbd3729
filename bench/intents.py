#!/usr/bin/env python
"""Intent benchmarks, measured against baselines run in the same process.

Part 1, clustering: `cluster_intents` on 20,000 candidates × 384 dimensions against scipy's single linkage
(`linkage(method="single", metric="cosine")`, the whole dendrogram) cut with `fcluster(criterion="distance",
t=1 − threshold)` at the same threshold, on the same vectors. The data has real cluster structure: 300 random unit
centres, each candidate a centre plus Gaussian noise whose size varies by centre (tight clusters, and loose ones that
break into several components and singletons at 0.82), plus 1% of candidates pointing anywhere. The two partitions
are asserted identical (as sets of sets of candidate ids). Prints both times, their ratio (aim: <= 1x scipy), the
floor (one pass over the input: L2-normalising the matrix) and the peak memory of the clustering run.

Part 2 (proposals of 1,000 runs) is not written yet: it goes in a function of its own beside `bench_clustering`,
called from main() after part 1.

    .venv/bin/python bench/intents.py            # 20,000 candidates x 384 dimensions (scipy takes about a minute)
    .venv/bin/python bench/intents.py --quick    # 5,000 candidates
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from intents.core.candidates import IntentCandidate, IntentEvidence
from intents.core.clustering import cluster_intents

THRESHOLD = 0.82
CENTRES = 300
OUTLIER_SHARE = 0.01


def clustered_vectors(count: int, dimensions: int, seed: int) -> np.ndarray:
    """`count` float32 vectors (as an embedder would store them) around CENTRES centres, plus outliers."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CENTRES, dimensions))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    # A squared noise-to-signal ratio r gives pairs of one centre a cosine of about 1 / (1 + r): 0.91 to 0.78.
    spread = rng.uniform(0.10, 0.28, CENTRES)
    owner = rng.integers(0, CENTRES, count)
    noise = rng.standard_normal((count, dimensions)) * np.sqrt(spread[owner] / dimensions)[:, None]
    vectors = centres[owner] + noise
    outliers = rng.random(count) < OUTLIER_SHARE
    vectors[outliers] = rng.standard_normal((int(outliers.sum()), dimensions))
    return (vectors * rng.uniform(0.5, 2.0, (count, 1))).astype(np.float32)


def candidates_for(count: int) -> list[IntentCandidate]:
    evidence = (IntentEvidence(trajectory_id="bench-run", start=0, end=0),)
    return [
        IntentCandidate(f"intent:{index:020x}", f"intent label {index % 997}", "inferred", evidence)
        for index in range(count)
    ]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def bench_clustering(count: int, dimensions: int, seed: int, repeats: int) -> bool:
    from scipy.cluster.hierarchy import fcluster, linkage  # dev dependency, benchmark only

    print(f"part 1: cluster_intents, {count:,} candidates x {dimensions} dimensions, threshold {THRESHOLD}")
    vectors = clustered_vectors(count, dimensions, seed)
    candidates = candidates_for(count)
    ids = [candidate.candidate_id for candidate in candidates]
    embeddings = dict(zip(ids, vectors, strict=True))

    floor = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        as_float = vectors.astype(np.float64)
        as_float / np.linalg.norm(as_float, axis=1, keepdims=True)
        floor = min(floor, time.perf_counter() - started)

    rss_before = peak_rss_mib()
    ours = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = cluster_intents(candidates, embeddings, similarity_threshold=THRESHOLD)
        ours = min(ours, time.perf_counter() - started)
    rss_ours = peak_rss_mib()

    started = time.perf_counter()
    tree = linkage(vectors.astype(np.float64), method="single", metric="cosine")
    flat = fcluster(tree, t=1.0 - THRESHOLD, criterion="distance")
    baseline = time.perf_counter() - started

    groups: dict[int, set[str]] = {}
    for identifier, label in zip(ids, flat.tolist(), strict=True):
        groups.setdefault(label, set()).add(identifier)
    expected = {frozenset(group) for group in groups.values()}
    found = {frozenset(cluster.candidate_ids) for cluster in result.clusters}
    same = found == expected
    sizes = sorted((cluster.support for cluster in result.clusters), reverse=True)
    singletons = sum(size == 1 for size in sizes)
    ambiguous = sum(len(cluster.ambiguous_candidate_ids) for cluster in result.clusters)

    print(f"  clusters: {len(sizes):,} ({singletons:,} singletons, largest {sizes[0]:,}), ambiguous: {ambiguous:,}")
    print(f"  partitions identical to scipy's: {'yes' if same else 'NO'}")
    print(f"  floor (normalise the matrix once):     {floor:8.3f} s")
    print(f"  cluster_intents (best of {repeats}):          {ours:8.3f} s   {ours / floor:7.1f}x the floor")
    print(f"  scipy linkage + fcluster (one run):   {baseline:8.3f} s")
    print(f"  ratio cluster_intents / scipy:        {ours / baseline:8.3f}   (aim: <= 1)")
    print(f"  peak memory: {rss_before:,.0f} MiB before, {rss_ours:,.0f} MiB after cluster_intents (scipy not yet run)")
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 candidates instead of 20,000")
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--repeats", type=int, default=3, help="runs of cluster_intents (the best is reported)")
    arguments = parser.parse_args()
    count = 5_000 if arguments.quick else 20_000
    ok = bench_clustering(count, 384, arguments.seed, arguments.repeats)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
