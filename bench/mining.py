"""Benchmark: learn_procedure against the straightforward reference implementation, same input, same process.

Input (seeded): N successful runs of L steps over 30 tools. Every run follows one shared backbone of 24 steps, drops
each of 4 optional backbone steps with a small probability, and fills up to L steps with tools inserted at random
positions; a few backbone steps carry constant arguments, the others per-run ones. So the learned procedure is
non-trivial (the backbone minus the optional steps, with some arguments retained) and several folds really shrink
the current sequence.

Both implementations run on the same mapping; their candidates are asserted equal; the script prints both times and
the speed-up ratio. `--quick` uses 1,000 runs for `make bench`-style smoke runs; the default is the issue's size.

    .venv/bin/python bench/mining.py            # 10,000 runs x 40 steps over 30 tools
    .venv/bin/python bench/mining.py --quick
"""

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from procedures.core import learn_procedure
from tests.procedures.core.reference import reference_learn_procedure
from trajectories.core import TrajectoryStep

TOOLS = [
    "lookup_policy",
    "check_account",
    "issue_refund",
    "notify",
    "search",
    "read_document",
    "list_orders",
    "inspect_order",
    "create_task",
    "tag_document",
    "untag_document",
    "approve_answer",
    "sync_source",
    "run_workflow",
    "navigate",
    "get_customer",
    "update_address",
    "cancel_order",
    "escalate",
    "verify_identity",
    "send_email",
    "log_note",
    "fetch_invoice",
    "apply_credit",
    "close_ticket",
    "open_ticket",
    "summarize",
    "translate",
    "schedule_callback",
    "check_inventory",
]
BACKBONE_LENGTH = 24
OPTIONAL_STEPS = 4
OPTIONAL_DROP_RATE = 0.02
NOISE_ON_BACKBONE = 0.001


def make_runs(count: int, length: int, *, seed: int) -> dict[str, list[TrajectoryStep]]:
    rng = random.Random(seed)
    backbone = [rng.choice(TOOLS) for _ in range(BACKBONE_LENGTH)]
    # Inserted steps mostly use tools off the backbone; now and then a backbone tool, which can shadow the backbone
    # step in the leftmost alignment (and cost it its arguments) or survive into an early fold.
    off_backbone = [tool for tool in TOOLS if tool not in backbone]
    optional = set(rng.sample(range(BACKBONE_LENGTH), OPTIONAL_STEPS))
    constant = {position: {"tier": "enterprise", "step": position} for position in range(0, BACKBONE_LENGTH, 3)}
    runs = {}
    for number in rng.sample(range(count * 10), count):
        kept = [
            (tool, dict(constant.get(position, {"request": rng.randrange(1000)})))
            for position, tool in enumerate(backbone)
            if position not in optional or rng.random() >= OPTIONAL_DROP_RATE
        ]
        while len(kept) < length:
            noise = rng.choice(TOOLS) if rng.random() < NOISE_ON_BACKBONE else rng.choice(off_backbone)
            kept.insert(rng.randrange(len(kept) + 1), (noise, {"noise": rng.randrange(10)}))
        runs[f"run-{number}"] = [
            TrajectoryStep(ordinal, tool, "execute", arguments, ok=True, input_tokens=100, cost=0.001)
            for ordinal, (tool, arguments) in enumerate(kept)
        ]
    return runs


def timed(function, runs, *, repeats):
    """The result and the best CPU time of `repeats` calls (CPU time: the 2-core machine is shared)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        result = function(runs, intent="process enterprise refund")
        best = min(best, time.process_time() - started)
    return result, best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 runs instead of 10,000")
    parser.add_argument("--runs", type=int, default=None, help="number of runs (overrides --quick)")
    parser.add_argument("--steps", type=int, default=40, help="steps per run")
    parser.add_argument("--seed", type=int, default=20260401)
    options = parser.parse_args(argv)
    count = options.runs or (1_000 if options.quick else 10_000)

    runs = make_runs(count, options.steps, seed=options.seed)
    fast, fast_seconds = timed(learn_procedure, runs, repeats=5)
    reference, reference_seconds = timed(reference_learn_procedure, runs, repeats=2)
    assert fast == reference, "learn_procedure and the reference disagree"

    retained = sum(1 for step in fast.steps if step.arguments)
    print(f"learn_procedure: {count} runs x {options.steps} steps over {len(TOOLS)} tools (seed {options.seed})")
    print(f"  learned {len(fast.steps)} steps ({retained} with retained arguments): {' > '.join(fast.tools)}")
    print(f"  reference    {reference_seconds:8.3f} s CPU (best of 2)")
    print(f"  fast         {fast_seconds:8.3f} s CPU (best of 5)")
    print(f"  speed-up     {reference_seconds / fast_seconds:8.1f}x  (outputs equal)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
