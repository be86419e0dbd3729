"""Benchmark: learn_procedure against the reference that skips contained runs, and against the read floor.

Two seeded inputs of N successful runs of L steps over 30 tools, each run following one 24-step backbone with tools
inserted at random positions (mostly tools off the backbone); a few backbone steps carry constant arguments, the
others per-run ones:

* `stable`: 4 optional backbone steps, each dropped with probability 0.02, so the fold settles within the first
  runs (learn_procedure's guess from a sorted prefix holds: its fast path);
* `diverse`: 12 of the backbone steps are each dropped by about one run in 2,000, so the fold shrinks a dozen
  times spread over the whole sorted order, well after the prefix the guess is folded from (the fallback path:
  the full fold and a second alignment pass).

Per input, in the same process, best CPU time of several calls, the floor, the tool read and learn_procedure taking
turns round after round (the 2-core machine is shared, and its load changes):
* the floor: reading the input learn_procedure receives once, every step of every run with the two fields §2.1
  makes every implementation read at every step touched: `ok` (a step whose `ok is not True` must be rejected)
  and `tool` (the fold compares them all). No correct implementation can read less;
* the tool read: every step's tool only, the floor before issue 13 (cheaper than any correct implementation, as
  it skips the `ok` check), printed so the old ratio stays comparable;
* learn_procedure;
* the skipping reference (tests/procedures/core/reference.py): the literal reference plus the obvious shortcut,
  a run already containing the current sequence leaves the fold unchanged, so it skips the DP;
* with `--literal`, the literal reference too (slow: the full DP table of tuples for every run).
All candidates are asserted equal. Printed: the times, learn_procedure / floor (aim <= 3x), learn_procedure / tool
read and skipping reference / learn_procedure.

    .venv/bin/python bench/mining.py            # 10,000 runs x 40 steps over 30 tools, both inputs
    .venv/bin/python bench/mining.py --quick    # 1,000 runs
"""

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collections import deque
from operator import attrgetter

from procedures.core import learn_procedure
from tests.procedures.core.reference import reference_learn_procedure, skipping_reference_learn_procedure
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
INPUTS = {
    # name: (optional backbone steps, probability that a run drops each of them)
    "stable": (OPTIONAL_STEPS, OPTIONAL_DROP_RATE),
    "diverse": (12, 1 / 2000),
}


def make_runs(count: int, length: int, *, seed: int, kind: str = "stable") -> dict[str, list[TrajectoryStep]]:
    optional_steps, drop_rate = INPUTS[kind]
    rng = random.Random(seed)
    backbone = [rng.choice(TOOLS) for _ in range(BACKBONE_LENGTH)]
    # Inserted steps mostly use tools off the backbone; now and then a backbone tool, which can shadow the backbone
    # step in the leftmost alignment (and cost it its arguments) or survive into an early fold.
    off_backbone = [tool for tool in TOOLS if tool not in backbone]
    optional = set(rng.sample(range(BACKBONE_LENGTH), optional_steps))
    constant = {position: {"tier": "enterprise", "step": position} for position in range(0, BACKBONE_LENGTH, 3)}
    runs = {}
    for number in rng.sample(range(count * 10), count):
        kept = [
            (tool, dict(constant.get(position, {"request": rng.randrange(1000)})))
            for position, tool in enumerate(backbone)
            if position not in optional or rng.random() >= drop_rate
        ]
        while len(kept) < length:
            noise = rng.choice(TOOLS) if rng.random() < NOISE_ON_BACKBONE else rng.choice(off_backbone)
            kept.insert(rng.randrange(len(kept) + 1), (noise, {"noise": rng.randrange(10)}))
        runs[f"run-{number}"] = [
            TrajectoryStep(ordinal, tool, "execute", arguments, ok=True, input_tokens=100, cost=0.001)
            for ordinal, (tool, arguments) in enumerate(kept)
        ]
    return runs


_tool = attrgetter("tool")
_ok_and_tool = attrgetter("ok", "tool")


def read_floor(runs, *, intent):
    """Every step of every run read once, its `ok` and its tool touched (at C speed: no per-step interpreter work;
    one pass, which is cheaper than one pass per field)."""
    for steps in runs.values():
        deque(map(_ok_and_tool, steps), maxlen=0)
    return None


def read_tools(runs, *, intent):
    """Every step's tool only: the floor before issue 13, which skips the `ok` every implementation must check."""
    for steps in runs.values():
        deque(map(_tool, steps), maxlen=0)
    return None


def timed(functions, runs, *, repeats):
    """Per function, its result and best CPU time of `repeats` calls (CPU time: the 2-core machine is shared). The
    functions take turns, round after round, so a change in the machine's load reaches them all alike."""
    results = [None] * len(functions)
    best = [float("inf")] * len(functions)
    for _ in range(repeats):
        for index, function in enumerate(functions):
            started = time.process_time()
            results[index] = function(runs, intent="process enterprise refund")
            best[index] = min(best[index], time.process_time() - started)
    return list(zip(results, best, strict=True))


def folds(runs) -> int:
    """How many times the fold shrinks the current sequence, in sorted order (the literal reference's work)."""
    from procedures.core.lcs import ToolCodes, is_subsequence, lcs_codes

    codes = ToolCodes()
    ordered = [codes.encode(runs[trajectory_id], _tool) for trajectory_id in sorted(runs)]
    current, shrinks = ordered[0], 0
    for sequence in ordered[1:]:
        if not is_subsequence(current, sequence):
            current, shrinks = lcs_codes(current, sequence, codes.ranks()), shrinks + 1
    return shrinks


def bench_input(kind: str, count: int, steps: int, seed: int, *, literal: bool) -> None:
    runs = make_runs(count, steps, seed=seed, kind=kind)
    (_, floor_seconds), (_, tools_seconds), (fast, fast_seconds) = timed(
        [read_floor, read_tools, learn_procedure], runs, repeats=7
    )
    [(skipping, skipping_seconds)] = timed([skipping_reference_learn_procedure], runs, repeats=3)
    assert fast == skipping, "learn_procedure and the skipping reference disagree"
    retained = sum(1 for step in fast.steps if step.arguments)
    print(
        f"input {kind!r}: {count} runs x {steps} steps over {len(TOOLS)} tools (seed {seed}),"
        f" the fold shrinks {folds(runs)} times"
    )
    print(f"  learned {len(fast.steps)} steps ({retained} with retained arguments)")
    print(f"  read floor          {floor_seconds:8.4f} s CPU (best of 7)   ok and tool of every step")
    print(f"  tool read           {tools_seconds:8.4f} s CPU (best of 7)   tool of every step (the old floor)")
    print(
        f"  learn_procedure     {fast_seconds:8.4f} s CPU (best of 7)   {fast_seconds / floor_seconds:5.1f}x the floor,"
        f" {fast_seconds / tools_seconds:5.1f}x the tool read"
    )
    print(
        f"  skipping reference  {skipping_seconds:8.4f} s CPU (best of 3)"
        f"   {skipping_seconds / fast_seconds:5.1f}x learn_procedure"
    )
    if literal:
        [(reference, reference_seconds)] = timed([reference_learn_procedure], runs, repeats=2)
        assert fast == reference, "learn_procedure and the literal reference disagree"
        print(
            f"  literal reference   {reference_seconds:8.4f} s CPU (best of 2)"
            f"   {reference_seconds / fast_seconds:5.1f}x learn_procedure"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 runs instead of 10,000")
    parser.add_argument("--runs", type=int, default=None, help="number of runs (overrides --quick)")
    parser.add_argument("--steps", type=int, default=40, help="steps per run")
    parser.add_argument("--seed", type=int, default=20260401)
    parser.add_argument("--input", choices=[*INPUTS, "both"], default="both")
    parser.add_argument("--literal", action="store_true", help="also time the literal reference (slow)")
    options = parser.parse_args(argv)
    count = options.runs or (1_000 if options.quick else 10_000)
    for kind in INPUTS if options.input == "both" else [options.input]:
        bench_input(kind, count, options.steps, options.seed, literal=options.literal)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
