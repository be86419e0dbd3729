#!/usr/bin/env python
"""Graph evolution: Waymark's own time per round against the in-memory reference loop's own time.

Each round waits on a simulated model (200 ms, as a fast real refiner call would take at least) and measures the
candidate with a 50-task evaluator that answers at once; the refiner revises one edge every round, so every round is
refined, measured, accepted and recorded. Everything else is Waymark's: the Celery hop of each step, claiming the
run, loading the chains, rendering the attempts block and the rejection memory, the prompt, the gate, the three
transactions of a round (checkpoint #1 with the traces, checkpoint #2, the record), the ledger rows and the round
row. In the same process:

* floor: the model's sleeps alone (nothing can be faster than waiting for the model);
* baseline: the reference loop (`graphs.core.evolve`) in memory — no database, no broker — with the same model and
  evaluator: the best simple version of the same rounds;
* Waymark: a run of the same rounds through `evolution_start` on PostgreSQL, one Celery step per round on a real
  worker (Redis broker, solo pool, in this process). The worker is kept from run to run, as production's are: a
  first run of 2 rounds warms it (its connection, the queries compiled once per thread), as `baseline(2)` warms the
  loop.

Prints, for each of `--repeat` pairs (the baseline's rounds, then Waymark's), the wall time per round, the own time
per round (wall − model − evaluator) and its share of the wall time for both; the figure is the median over the pairs
of Waymark's own time over the baseline's. The run's end queues its last accepted candidate's certification
(graphs.certification_services; the first round certifies its own, its retained graph being the active one): a
separate Celery task that any worker runs, not a step of the run; here it goes to its own queue, is run after the
runs by a worker of its own and is timed apart.
Creates (once) and migrates a throwaway database `waymark_bench_evolve`.

    .venv/bin/python bench/evolve.py [--rounds 10] [--model-ms 200] [--repeat 5]
(DATABASE_URL names the PostgreSQL server, default 127.0.0.1:5432; Redis on 127.0.0.1:6379)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

from _database import django_on

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_DATABASE = "waymark_bench_evolve"
CERTIFICATIONS_QUEUE = "bench-evolve-certifications"
TASKS = 50
MODEL_SECONDS = 0.2
SPENT = {"model": 0.0, "evaluator": 0.0}


class SlowModel:
    """A refiner that thinks for MODEL_SECONDS, then revises one edge's guidance (a new, valid candidate)."""

    provider = "scripted"
    model_id = "bench-slow"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request):
        from llm.core import ModelResponse, Usage
        from tests.graphs.evolution.records import revised_edge

        started = time.perf_counter()
        time.sleep(MODEL_SECONDS)
        SPENT["model"] += time.perf_counter() - started
        self.calls += 1
        reply = revised_edge(f"Read the top hit before answering (revision {time.time_ns()}).")
        return ModelResponse(text=json.dumps(reply), usage=Usage(input_tokens=3000, output_tokens=120))


class FiftyTasks:
    """Answers at once: 50 task outcomes, and 50 traces of a few steps each for the refiner."""

    available_tools = ("search", "read", "answer")

    def evaluate(self, ref, graph, *, iteration, purpose):
        from graphs.core.evaluation import Evaluation, TaskOutcome

        started = time.perf_counter()
        outcomes = [TaskOutcome(f"t{i}", 1.0 if i % 5 else 0.0, bool(i % 5)) for i in range(TASKS)]
        evaluation = Evaluation.from_outcomes(ref, outcomes, {"purpose": purpose, "iteration": iteration})
        SPENT["evaluator"] += time.perf_counter() - started
        return evaluation

    def collect(self, graph, *, graph_ref, iteration):
        from graphs.core.evaluation import TaskOutcome, Trace
        from graphs.core.guide import Step

        started = time.perf_counter()
        steps = (Step("search", {"q": "who"}, "2 hits"), Step("read", {"title": "A"}, "a fact"), Step("answer", "x"))
        traces = [
            Trace(
                f"it{iteration}-{i}",
                TaskOutcome(f"t{i}", 1.0 if i % 5 else 0.0, bool(i % 5)),
                steps=steps,
                graph_ref=graph_ref,
                nodes_visited=("Start", "search", "read", "answer"),
            )
            for i in range(TASKS)
        ]
        SPENT["evaluator"] += time.perf_counter() - started
        return traces


def _reset() -> None:
    SPENT.update(model=0.0, evaluator=0.0)


def baseline(rounds: int) -> tuple[float, dict]:
    from graphs.core.budget import HookedModel, Meter
    from graphs.core.evolve import EvolveConfig, evolve
    from graphs.core.stores import (
        MemoryRevisionStore,
        RevisionCheckpointStore,
        RevisionGraphStore,
        RevisionRejectionStore,
        RevisionTraceStore,
    )
    from graphs.demo import two_hop_graph

    _reset()
    store = MemoryRevisionStore()
    environment = FiftyTasks()
    started = time.perf_counter()
    evolve(
        config=EvolveConfig(max_rounds=rounds, workspace="bench", cycle_policy="allow"),
        model=HookedModel(SlowModel(), Meter()),
        graph_store=RevisionGraphStore(store, "bench"),
        rejection_store=RevisionRejectionStore(store, "bench"),
        trace_source=environment,
        evaluator=environment,
        trace_store=RevisionTraceStore(store, "bench"),
        checkpoint_store=RevisionCheckpointStore(store, "bench"),
        initial_graph=two_hop_graph(),
        available_tools=list(FiftyTasks.available_tools),
    )
    return time.perf_counter() - started, dict(SPENT)


@contextlib.contextmanager
def waymark_worker():
    """The worker the runs' steps go to, kept from run to run as production's workers are (the first run warms its
    connection and the per-process caches, as `baseline(2)` warms the loop)."""
    from celery.contrib.testing.worker import start_worker
    from django.conf import settings

    from config.celery import app
    from graphs.evolution import services

    settings.WAYMARK_GRAPH_EVALUATORS = {"fifty": "__main__.FiftyTasks"}
    # The worker keeps its connection between steps as production's do (CONN_MAX_AGE: WAYMARK_DB_CONN_MAX_AGE, 60 s
    # by default; config/celery.py); the test settings the bench runs on would close it after every task.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 60
    services.get_chat_model = SlowModel
    app.conf.update(
        broker_url="redis://127.0.0.1:6379/11",
        task_always_eager=False,
        task_routes={"graphs.certification_step": {"queue": CERTIFICATIONS_QUEUE}},
    )
    app._pool = None
    app.amqp._producer_pool = None
    with app.connection_for_write() as conn:
        for queue in ("celery", CERTIFICATIONS_QUEUE):
            conn.default_channel.queue_purge(queue)
    with start_worker(app, perform_ping_check=False, pool="solo", shutdown_timeout=20, queues=["celery"]):
        yield


def _one_run(rounds: int):
    from accounts.services import Actor
    from graphs.demo import TWO_HOP_GRAPH
    from graphs.evolution import services
    from graphs.models import EvolutionRun, Workspace
    from graphs.services import workspace_create

    slug = f"bench-{time.time_ns()}"
    workspace = workspace_create(actor=Actor.system(), slug=slug, graph=TWO_HOP_GRAPH).workspace
    workspace = Workspace.objects.get(pk=workspace.pk)
    _reset()
    run = services.evolution_start(
        actor=Actor.system(), workspace=workspace, rounds=rounds, evaluator="fifty", config={"cycle_policy": "allow"}
    )
    while not EvolutionRun.objects.get(pk=run.pk).is_finished:
        time.sleep(0.5)  # poll rarely: this thread shares the process (and the GIL) with the worker
    run.refresh_from_db()
    # The run's own clock: from the start request's commit to the last step's end (the polling adds nothing).
    wall = (run.finished_at - run.created_at).total_seconds()
    return run, workspace, wall, dict(SPENT)


def _certify_queued(workspaces: list) -> tuple[int, float]:
    """The certifications the runs on `workspaces` queued, run after them by a worker of their own: (count,
    seconds)."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app
    from graphs.models import GraphCertification

    queued = GraphCertification.objects.filter(workspace__in=workspaces, status__in=GraphCertification.OPEN)
    count = queued.count()
    started = time.perf_counter()
    if count:
        with start_worker(
            app, perform_ping_check=False, pool="solo", shutdown_timeout=20, queues=[CERTIFICATIONS_QUEUE]
        ):
            while queued.exists():
                time.sleep(0.02)
    return count, time.perf_counter() - started


def _line(name: str, wall: float, spent: dict, rounds: int) -> float:
    """Print one line; the own time per round (wall − model − evaluator), in seconds."""
    overhead = max(0.0, wall - spent["model"] - spent["evaluator"])
    print(
        f"{name:<9} {wall / rounds * 1000:8.1f} ms/round   model {spent['model'] / rounds * 1000:6.1f} ms   "
        f"evaluator {spent['evaluator'] / rounds * 1000:5.1f} ms   own {overhead / rounds * 1000:6.1f} ms "
        f"= {overhead / wall:6.2%} of the wall"
    )
    return overhead / rounds


def main() -> None:
    global MODEL_SECONDS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--model-ms", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5, help="pairs measured (the figure is their median ratio)")
    args = parser.parse_args()
    MODEL_SECONDS = args.model_ms / 1000
    django_on(BENCH_DATABASE)
    rounds = args.rounds
    print(f"{rounds} rounds, simulated model {args.model_ms} ms, {TASKS}-task evaluator answering at once")
    print(f"floor     {MODEL_SECONDS * 1000:8.1f} ms/round   (the model's wait alone)")
    baseline(2)  # warm up: imports, numpy, first-call caches
    pairs = []
    with waymark_worker():
        _one_run(2)  # warm up the worker, as baseline(2) the loop
        for _ in range(args.repeat):
            pairs.append((baseline(rounds), _one_run(rounds)))
    ratios = [_pair(base, run, rounds) for base, run in pairs]
    print(
        f"figure: Waymark's own time per round over the loop's, the median of {len(ratios)} pairs: "
        f"{statistics.median(ratios):.2f}x (from {min(ratios):.2f}x to {max(ratios):.2f}x; aim <= 2x)"
    )
    # The certifications the runs queued, run after them by a worker of its own (the first worker has stopped: two
    # test workers in one process do not stop cleanly).
    certified, certifying = _certify_queued([workspace for _, (_, workspace, _, _) in pairs])
    if certified:
        print(
            f"the {certified} certifications the runs queued (each run's last accepted candidate), run after them by a "
            f"worker of their own: {certifying / certified * 1000:.1f} ms each"
        )


def _pair(base: tuple[float, dict], run: tuple, rounds: int) -> float:
    """A pair measured (the baseline's rounds, then Waymark's) printed; the ratio of their own times."""
    base_wall, base_spent = base
    finished, _, wall, spent = run
    base_own = _line("baseline", base_wall, base_spent, rounds)
    own = _line("Waymark", wall, spent, rounds)
    print(f"Waymark run: {finished.status} after {finished.rounds_done} rounds ({finished.stopped_reason})")
    print(
        f"pair: Waymark's own time per round {own * 1000:.1f} ms = {own / base_own:.2f}x the in-memory loop's "
        f"own {base_own * 1000:.1f} ms; Waymark's own share of the wall {own * rounds / wall:.2%}"
    )
    return own / base_own


if __name__ == "__main__":
    main()
