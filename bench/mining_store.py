#!/usr/bin/env python
"""Mining plus offline replay for one intent over stored runs on PostgreSQL, against reading the same rows raw.

Creates (once) and migrates a throwaway database `waymark_bench_mining`, empties it, and COPYs in N runs of one
intent (default 100,000; `--quick` 10,000), 80% successful, 4 to 6 steps each (a retried step with ok false in
one run in ten, an optional step in one in five, per-run and constant arguments). Then, in the same process:

* the floor: one raw SQL read of every step row of the intent's runs (what any mining must read at least once);
* Waymark: `procedure_mine` (the seeded split computed once into a temporary table, the training runs' ok steps
  streamed as columns while the fold runs, the version stored with its run-id lists written from that table) and
  `replay_offline_run` (the held-out ids with their runs streamed as columns by one query, judged, the gate, the
  case rows copied in).

Prints both times (the best of `--repeat` rounds, default 5), the case count and the ratio (Waymark / floor; aim <=
3x): the median over the rounds of Waymark's time against the floor's in the same round, each round reading the
floor just before mining and replaying, so the slow moments of a shared machine weigh on both sides of a ratio.

With `--memory`, it then measures the peak memory of mine + replay for each size in `--memory-runs` (default
100,000 and 1,000,000): the runs are loaded by this process, and a fresh subprocess per size sets Django up, reads
its resident size, runs mine + replay once and reports its peak resident size from there (the kernel's VmHWM, reset
after setup, so imports and migrations stay out of it). Aim: the peaks within 20% of each other (memory flat in the
number of runs). Loading 1,000,000 runs takes about a minute and a half.

    .venv/bin/python bench/mining_store.py [--quick] [--runs N] [--repeat R] [--memory [--memory-runs A,B]]
(DATABASE_URL names the PostgreSQL server, default 127.0.0.1:5432)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from _database import django_on

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_DATABASE = "waymark_bench_mining"
INTENT = "refund_request"


def _setup_django() -> None:
    django_on(BENCH_DATABASE)
    # Replays are run (and timed) by this script: queue tasks in memory instead of running them on commit.
    from config.celery import app

    app.conf.task_always_eager = False


def _steps(rng: random.Random, n: int, success: bool) -> list[tuple]:
    order = f"ORD-{n}"
    steps = [("lookup_policy", {"topic": "refunds"}, True)]
    if rng.random() < 0.1:
        steps.append(("check_account", {"customer_id": f"C{n % 997}"}, False))
    steps.append(("check_account", {"customer_id": f"C{n % 997}"}, True))
    if rng.random() < 0.2:
        steps.append(("search", {"query": "damaged parcel"}, True))
    if success:
        steps.append(("issue_refund", {"order_id": order, "amount": round(rng.uniform(5, 200), 2)}, True))
        steps.append(("notify", {"channel": "email", "template": "refund_issued"}, True))
    else:
        steps.append(("issue_refund", {"order_id": order}, False))
        steps.append(("transfer_to_human", {"reason": "refund denied"}, True))
    return steps


def _run_rows(count: int, now: datetime, counter: list[int]):
    """The run rows, generated (never held all at once); `counter[0]` counts their steps on the way."""
    rng = random.Random(20261202)
    for n in range(1, count + 1):
        success = rng.random() < 0.8
        run_steps = _steps(rng, n, success)
        counter[0] += len(run_steps)
        yield n, success, run_steps, now


def _load(count: int) -> int:
    """Empty the tables and COPY `count` runs with their steps in (generated on the fly, so 1,000,000 runs load in
    flat memory). Returns the number of steps."""
    from django.db import connection

    now = datetime.now(UTC)
    run_columns = (
        "id, source, external_id, task, intent, outcome, graph_workspace, graph_revision, metadata, created_at,"
        " step_count, total_tokens, cost, tools, search_document"
    )
    step_columns = (
        "run_id, ordinal, tool, action_family, arguments, observation, ok, input_tokens, cached_input_tokens,"
        " output_tokens, cost"
    )
    counter = [0]
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE procedures_replaycase, procedures_replayrun, procedures_procedureversion, procedures_procedure,"
            " trajectories_job, trajectories_step, trajectories_run RESTART IDENTITY CASCADE"
        )
        raw = cursor.cursor
        with raw.copy(f"COPY trajectories_run ({run_columns}) FROM STDIN") as copy:
            for n, success, run_steps, created in _run_rows(count, now, [0]):
                copy.write_row(
                    (
                        n, "bench", f"run-{n}", f"Refund order ORD-{n}", INTENT, "success" if success else "failure",
                        "", "", "{}", created, len(run_steps), 960 * len(run_steps), 0.003 * len(run_steps),
                        json.dumps(sorted({tool for tool, _, _ in run_steps})), "",
                    )
                )  # fmt: skip
        with raw.copy(f"COPY trajectories_step ({step_columns}) FROM STDIN") as copy:
            for n, _, run_steps, _ in _run_rows(count, now, counter):
                for ordinal, (tool, arguments, ok) in enumerate(run_steps):
                    copy.write_row((n, ordinal, tool, "other", json.dumps(arguments), "", ok, 900, 0, 60, 0.003))
        cursor.execute("SELECT setval('trajectories_run_id_seq', %s)", [count])
        cursor.execute("ANALYZE trajectories_run")
        cursor.execute("ANALYZE trajectories_step")
    return counter[0]


def _baseline() -> float:
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.run_id, s.ordinal, s.tool, s.arguments, s.ok FROM trajectories_step s"
            " JOIN trajectories_run r ON r.id = s.run_id WHERE r.intent = %s ORDER BY s.run_id, s.ordinal",
            [INTENT],
        )
        rows = cursor.fetchall()
    assert rows
    return time.perf_counter() - started


def _reset_procedures() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE procedures_replaycase, procedures_replayrun, procedures_procedureversion, procedures_procedure"
            " RESTART IDENTITY CASCADE"
        )


def _waymark() -> tuple[float, float, object]:
    from accounts.services import Actor
    from procedures.mining.services import procedure_mine
    from procedures.models import ReplayRun
    from procedures.replay.services.offline import replay_offline_run

    _reset_procedures()
    started = time.perf_counter()
    result = procedure_mine(actor=Actor.system(), intent=INTENT, live=False)
    mined = time.perf_counter()
    (replay_id,) = (replay.pk for replay in result.replays)
    del result  # the replay runs in a task of its own: it starts from the replay row, as a worker does
    replay = replay_offline_run(replay=ReplayRun.objects.get(pk=replay_id))
    replayed = time.perf_counter()
    return mined - started, replayed - mined, replay


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(f"{field}:"))


def _memory_child() -> int:
    """In a fresh process: resident size after setup, then mine + offline replay once, then the peak resident size
    since setup (kB; the kernel's high-water mark is reset after setup, so migrations and imports stay out of it)."""
    _setup_django()
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM trajectories_run")
        (runs,) = cursor.fetchone()
    before = _status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # reset VmHWM to the current resident size
    started = time.perf_counter()
    _, _, replay = _waymark()
    seconds = time.perf_counter() - started
    peak = _status_kb("VmHWM")
    print(json.dumps({"runs": runs, "before_kb": before, "peak_kb": peak, "seconds": seconds,
                      "cases": len(replay.held_out_run_ids)}))  # fmt: skip
    return 0


def _measure_memory(sizes: list[int]) -> None:
    import subprocess

    results = []
    for size in sizes:
        started = time.perf_counter()
        steps = _load(size)
        print(f"memory: stored {size:,} runs / {steps:,} steps in {time.perf_counter() - started:.1f} s", flush=True)
        child = subprocess.run(
            [sys.executable, __file__, "--memory-child"], check=True, capture_output=True, text=True, env=os.environ
        )
        result = json.loads(child.stdout.strip().splitlines()[-1])
        results.append(result)
        print(
            f"  {result['runs']:>9,} runs: mine + replay {result['seconds']:6.2f} s, {result['cases']:,} cases;"
            f" resident after setup {result['before_kb'] / 1024:6.1f} MiB, peak {result['peak_kb'] / 1024:6.1f} MiB"
            f" (+{(result['peak_kb'] - result['before_kb']) / 1024:.1f} MiB)",
            flush=True,
        )
    if len(results) > 1:
        peaks = [result["peak_kb"] for result in results]
        print(f"peak memory, largest / smallest size: {max(peaks) / min(peaks):.2f}x (aim: within 1.2x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 runs instead of 100,000")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory", action="store_true", help="also measure peak memory per size in a subprocess")
    parser.add_argument("--memory-runs", default="100000,1000000", help="sizes for --memory, comma-separated")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        return _memory_child()
    count = args.runs or (10_000 if args.quick else 100_000)
    _setup_django()
    started = time.perf_counter()
    steps = _load(count)
    print(f"stored {count:,} runs / {steps:,} steps of one intent in {time.perf_counter() - started:.1f} s (COPY)")
    baselines, mines, replays = [], [], []
    replay = None
    for _ in range(max(1, args.repeat)):
        baselines.append(_baseline())
        mine_seconds, replay_seconds, replay = _waymark()
        mines.append(mine_seconds)
        replays.append(replay_seconds)
    totals = [m + r for m, r in zip(mines, replays, strict=True)]
    best, baseline = min(totals), min(baselines)
    ratios = [total / floor for total, floor in zip(totals, baselines, strict=True)]
    version = replay.version
    verdict = "passed" if replay.gate_report["passed"] else "failed"
    print(
        f"version: {' -> '.join(version.tools)}; {len(version.source_run_ids):,} runs mined,"
        f" {len(replay.held_out_run_ids):,} held-out cases, gate {verdict}"
    )
    print(f"floor: raw read of every step row  {baseline:7.2f} s  (best of {len(baselines)})")
    print(f"procedure_mine                     {min(mines):7.2f} s")
    print(f"replay_offline_run                 {min(replays):7.2f} s")
    print(f"mine + offline replay              {best:7.2f} s  (best of {len(mines)})")
    print(
        f"ratio (Waymark / floor, the median over {len(ratios)} paired rounds): {statistics.median(ratios):.1f}x"
        f" (aim <= 3x; rounds {min(ratios):.1f}-{max(ratios):.1f}x)",
        flush=True,
    )
    if args.memory:
        _measure_memory([int(size) for size in args.memory_runs.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
