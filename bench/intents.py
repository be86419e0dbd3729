#!/usr/bin/env python
"""Intent benchmarks, measured against baselines run in the same process.

Part 1, clustering: `cluster_intents` on 20,000 candidates × 384 dimensions against scipy's single linkage
(`linkage(method="single", metric="cosine")`, the whole dendrogram) cut with `fcluster(criterion="distance",
t=1 − threshold)` at the same threshold, on the same vectors. The data has real cluster structure: 300 random unit
centres, each candidate a centre plus Gaussian noise whose size varies by centre (tight clusters, and loose ones that
break into several components and singletons at 0.82), plus 1% of candidates pointing anywhere. The two partitions
are asserted identical (as sets of sets of candidate ids). Prints both times, their ratio (aim: <= 1x scipy), the
floor (one pass over the input: L2-normalising the matrix) and the peak memory of the clustering run.

Part 2, proposals: 1,000 stored runs (PostgreSQL, a throwaway database `waymark_bench_intents`) proposed in
batches of 5 by a simulated model that waits 500 ms a call and answers like the scripted stand-in. Waymark's own time
is everything but the model's wait: claiming the run and each batch, reading the runs with their steps, rendering and
redacting the prompt, the ledger rows, parsing and validating the reply, embedding the new labels, storing candidates
and vectors, the run's progress. Steps run in process, one after another (the Celery hop between batches is measured
in bench/evolve.py). The baseline is the same work with no database: render, parse and embed in memory. The floor is
the model's wait. Figure: own time per run as a share of one 500 ms call (aim <= 2%).

    .venv/bin/python bench/intents.py            # 20,000 candidates x 384 dimensions (scipy takes about a minute)
    .venv/bin/python bench/intents.py --quick    # 5,000 candidates, 200 runs
    .venv/bin/python bench/intents.py --part 2   # only the proposals
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
from _database import django_on

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


MODEL_SECONDS = 0.5
PROPOSAL_DATABASE = "waymark_bench_intents"


def _setup_django() -> None:
    django_on(PROPOSAL_DATABASE)
    from config.celery import app

    app.conf.task_always_eager = False  # steps are run (and timed) by this script
    app.conf.broker_url = "memory://"


class SlowStandIn:
    """Waits MODEL_SECONDS, then answers as the scripted stand-in would for the batch."""

    provider = "scripted"
    model_id = "bench-slow-intents"
    waited = 0.0

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def complete(self, request):
        from llm.core import ModelResponse, Usage

        started = time.perf_counter()
        time.sleep(MODEL_SECONDS)
        SlowStandIn.waited += time.perf_counter() - started
        return ModelResponse(text=self.reply, usage=Usage(input_tokens=2000, output_tokens=300))


def _stored_runs(count: int) -> None:
    from accounts.services import Actor
    from trajectories.models import Run
    from trajectories.services import run_ingest_batch

    Run.objects.filter(source="bench-intents").delete()
    intents = ["refund a damaged parcel", "change the delivery address", "cancel my order", "where is my order"]
    items = []
    for number in range(count):
        steps = [
            {
                "tool": "lookup_order",
                "arguments": {"order_id": f"A-{number}"},
                "observation": "order found",
                "ok": True,
            },
            {"tool": "check_policy", "arguments": {"topic": "refunds"}, "observation": "30 days", "ok": True},
            {"tool": "issue_refund", "arguments": {"amount": 20 + number % 50}, "observation": "done", "ok": True},
        ]
        items.append(
            {
                "source": "bench-intents",
                "external_id": f"run-{number}",
                "task": f"Customer request number {number}",
                "intent": intents[number % len(intents)],
                "outcome": "failure" if number % 7 == 0 else "success",
                "steps": steps,
            }
        )
    for start in range(0, count, 500):
        run_ingest_batch(actor=Actor.system(), items=items[start : start + 500])


def _baseline(count: int) -> float:
    """Render, parse and embed every batch in memory (no database): the best simple version of the same work."""
    from intents.core.candidates import parse_intent_reply
    from intents.core.embed import HashedNgramEmbedder
    from intents.core.prompts import RunBrief, render_batch, stand_in_reply
    from trajectories.models import Run
    from trajectories.selectors import as_trajectory_run

    stored = list(Run.objects.filter(source="bench-intents").prefetch_related("steps").order_by("id")[:count])
    briefs = [RunBrief(as_trajectory_run(run), task=run.task, declared_intent=run.intent) for run in stored]
    embedder = HashedNgramEmbedder()
    started = time.perf_counter()
    for index in range(0, len(briefs), 5):
        batch = briefs[index : index + 5]
        render_batch(batch)
        candidates = parse_intent_reply([brief.run for brief in batch], stand_in_reply(batch))
        embedder.embed([candidate.intent for candidate in candidates])
    return time.perf_counter() - started


def bench_proposals(count: int) -> bool:
    _setup_django()
    from accounts.services import Actor
    from intents import services
    from intents.core.prompts import stand_in_reply
    from intents.models import Embedding, IntentBatchRun, IntentCandidateRecord, IntentProposalRun

    IntentBatchRun.objects.all().delete()
    IntentCandidateRecord.objects.all().delete()
    Embedding.objects.all().delete()
    _stored_runs(count)
    services.proposal_model = lambda batch, briefs: SlowStandIn(stand_in_reply(briefs))
    baseline = _baseline(count)
    SlowStandIn.waited = 0.0
    started = time.perf_counter()
    run = services.intent_proposal_start(actor=Actor.system(), intent="", batch_size=5, enqueue=False)
    while IntentProposalRun.objects.get(pk=run.pk).status not in ("succeeded", "failed", "cancelled"):
        services.intent_proposal_step(run_id=run.pk, worker="bench")
    wall = time.perf_counter() - started
    run.refresh_from_db()
    batches = run.batches_total
    own = wall - SlowStandIn.waited
    per_run_ms = own / count * 1000
    share = (own / count) / MODEL_SECONDS
    print(
        f"proposals: {count} runs in {batches} batches of 5; run {run.status}; "
        f"{IntentCandidateRecord.objects.count()} candidates, {Embedding.objects.count()} vectors"
    )
    print(f"  floor     model wait {SlowStandIn.waited:7.2f} s ({MODEL_SECONDS * 1000:.0f} ms a call)")
    print(f"  baseline  in memory  {baseline * 1000 / count:7.2f} ms per run (render, parse, embed)")
    print(f"  Waymark   own time   {per_run_ms:7.2f} ms per run ({own / batches * 1000:.1f} ms per batch)")
    print(
        f"figure: Waymark's own time per run {share:.2%} of one {MODEL_SECONDS * 1000:.0f} ms model call "
        f"(aim <= 2%); own time / baseline {own / baseline:.1f}x"
    )
    return run.status == "succeeded"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 candidates instead of 20,000, 200 runs")
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--repeats", type=int, default=3, help="runs of cluster_intents (the best is reported)")
    parser.add_argument("--part", type=int, choices=(1, 2), help="only part 1 (clustering) or part 2 (proposals)")
    arguments = parser.parse_args()
    count = 5_000 if arguments.quick else 20_000
    ok = True
    if arguments.part in (None, 1):
        ok = bench_clustering(count, 384, arguments.seed, arguments.repeats) and ok
    if arguments.part in (None, 2):
        ok = bench_proposals(200 if arguments.quick else 1_000) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
