"""Benchmark: learn_procedure on a family of run shapes, against the read floor and the skipping reference.

Every shape is a seeded generator of successful runs (ids `run-<n>` in a shuffled mapping order; tools drawn from
`TOOLS`, 30 names; arguments `empty` (all {}), `constant` (each position's own constant mapping) or `mixed` (every
third position constant, the others per run)):

* `backbone-k`: one backbone of L/(k+1) tools, 0 to k random tools inserted before each backbone step, random tools
  filling the rest of the L steps at random places (k = 0: every run is the backbone; k = 1, 40 steps, 5,000 runs
  is the outside measurement of issue 29);
* `core-c`: diverse runs, L random tools with a planted core of c tools in order at random places;
* `prefix-p`: runs sharing their first p tools, then random tools;
* `stable` and `diverse`: the two inputs this bench had before (a 24-step backbone, optional steps dropped rarely
  or, for `diverse`, late in the sorted order, so the fold shrinks far after the sorted prefix);
* `random`: shapes drawn from a seed (printed; a fresh one on every run unless `--seed` is given): the kind, L, N,
  k, c, p and the arguments, N·L kept under 400,000 steps.

Per shape, in the same process, best CPU time of several rounds, the floor and learn_procedure taking turns (the
2-core machine is shared, and its load changes; an input small enough to time in microseconds is timed over as
many calls as make a round last a few milliseconds):
* the floor: reading the input learn_procedure receives once, every step of every run with the two fields §2.1
  makes every implementation read at every step touched: `ok` (a step whose `ok is not True` must be rejected)
  and `tool` (the fold compares them all). No correct implementation can read less;
* learn_procedure, its result asserted equal to the skipping reference's (tests/procedures/core/reference.py: the
  literal reference plus the obvious shortcut, a run already containing the current sequence leaves the fold
  unchanged); with `--literal` to the literal reference too (slow: the full DP table of tuples for every run).
Printed per shape: N x L, how often the fold shrinks, the learned length, the times and learn_procedure / floor;
then the worst ratio and its shape, over all shapes and over the reading-bound ones (a floor of at least 1 ms and
at least as many runs as steps per run), which the aim (<= 3x the floor) is for. Below that a call's fixed cost (the
candidate, its SHA-256, the frozen steps, a regex compiled per sequence) and the LCS tables of the folds that shrink
(up to L x L cells each, in Python) are not amortized over the reading, and no reading floor says what they cost.

    .venv/bin/python bench/mining.py                   # the family, plus 6 random shapes (a fresh seed)
    .venv/bin/python bench/mining.py --seed 123        # the random shapes of seed 123
    .venv/bin/python bench/mining.py --random 20       # 20 random shapes
    .venv/bin/python bench/mining.py --only core       # the shapes whose name starts with "core"
"""

import argparse
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
ARGUMENTS = ("empty", "constant", "mixed")
AMORTIZED_FLOOR = 0.001  # seconds: the aim holds for inputs whose floor is at least this
RANDOM_STEPS_LIMIT = 400_000


@dataclass(frozen=True)
class Shape:
    kind: str  # backbone, core, prefix, stable, diverse
    runs: int
    steps: int
    parameter: int = 0  # backbone: k insertions per step; core: c planted tools; prefix: p shared tools
    arguments: str = "mixed"
    seed: int = 20260401

    @property
    def name(self) -> str:
        label = self.kind if self.kind in ("stable", "diverse") else f"{self.kind}-{self.parameter}"
        return f"{label}, {self.runs:,} x {self.steps}, {self.arguments} arguments"


def family() -> list[Shape]:
    shapes = [Shape("backbone", 5_000, 40, k, arguments) for k in (0, 1, 3) for arguments in ("empty", "mixed")]
    shapes += [Shape("core", 5_000, 40, c, arguments) for c in (3, 8, 15) for arguments in ("empty", "mixed")]
    shapes += [
        Shape("backbone", 5_000, 10, 1, "constant"),
        Shape("backbone", 1_000, 200, 1, "constant"),
        Shape("core", 5_000, 10, 3, "mixed"),
        Shape("core", 1_000, 200, 15, "mixed"),
        Shape("prefix", 5_000, 40, 30, "mixed"),
        Shape("prefix", 1_000, 200, 190, "constant"),
        Shape("backbone", 2, 40, 1, "mixed"),
        Shape("backbone", 20, 40, 1, "mixed"),
        Shape("core", 300, 40, 8, "mixed"),
        Shape("backbone", 50_000, 10, 1, "constant"),
        Shape("stable", 10_000, 40),
        Shape("diverse", 10_000, 40),
    ]
    return shapes


def random_shapes(count: int, seed: int) -> list[Shape]:
    rng = random.Random(seed)
    shapes = []
    for _ in range(count):
        kind = rng.choice(["backbone", "core", "prefix"])
        steps = rng.choice([5, 10, 20, 40, 80, 200])
        runs = min(int(10 ** rng.uniform(0.3, 4.7)), RANDOM_STEPS_LIMIT // steps)
        runs = max(runs, 2)
        parameter = {
            "backbone": rng.randint(0, 4),
            "core": rng.randint(1, steps),
            "prefix": rng.randint(1, steps),
        }[kind]
        shapes.append(Shape(kind, runs, steps, parameter, rng.choice(ARGUMENTS), rng.randrange(2**32)))
    return shapes


def _arguments(shape: Shape, rng: random.Random, position: int) -> dict:
    if shape.arguments == "empty":
        return {}
    if shape.arguments == "constant" or position % 3 == 0:
        return {"tier": "enterprise", "step": position}
    return {"request": rng.randrange(1000)}


def make_runs(shape: Shape) -> dict[str, list[TrajectoryStep]]:
    rng = random.Random(shape.seed)
    length, kind, parameter = shape.steps, shape.kind, shape.parameter
    if kind in ("stable", "diverse"):
        return _old_input(shape, rng)
    planted_length = max(1, length // (parameter + 1)) if kind == "backbone" else min(parameter, length)
    planted = [rng.choice(TOOLS) for _ in range(planted_length)]
    runs = {}
    for number in rng.sample(range(shape.runs * 10), shape.runs):
        kept = []  # (tool, its position in the planted sequence, or -1 for a random tool)
        for position, tool in enumerate(planted):
            if kind == "backbone":
                kept += [(rng.choice(TOOLS), -1) for _ in range(rng.randint(0, parameter))]
            kept.append((tool, position))
        del kept[length:]
        while len(kept) < length:
            index = len(kept) if kind == "prefix" else rng.randrange(len(kept) + 1)
            kept.insert(index, (rng.choice(TOOLS), -1))
        runs[f"run-{number}"] = [
            TrajectoryStep(
                ordinal,
                tool,
                "execute",
                _arguments(shape, rng, position)
                if position >= 0
                else ({} if shape.arguments == "empty" else {"noise": rng.randrange(10)}),
                ok=True,
                input_tokens=100,
                cost=0.001,
            )
            for ordinal, (tool, position) in enumerate(kept)
        ]
    return runs


def _old_input(shape: Shape, rng: random.Random) -> dict[str, list[TrajectoryStep]]:
    """The bench's two former inputs: a 24-step backbone with tools inserted at random places (mostly off the
    backbone); `stable`: 4 optional steps each dropped with probability 0.02; `diverse`: 12, each dropped by about
    one run in 2,000 (so the fold shrinks a dozen times over the whole sorted order)."""
    optional_steps, drop_rate = (4, 0.02) if shape.kind == "stable" else (12, 1 / 2000)
    backbone = [rng.choice(TOOLS) for _ in range(24)]
    off_backbone = [tool for tool in TOOLS if tool not in backbone]
    optional = set(rng.sample(range(24), optional_steps))
    constant = {position: {"tier": "enterprise", "step": position} for position in range(0, 24, 3)}
    runs = {}
    for number in rng.sample(range(shape.runs * 10), shape.runs):
        kept = [
            (tool, dict(constant.get(position, {"request": rng.randrange(1000)})))
            for position, tool in enumerate(backbone)
            if position not in optional or rng.random() >= drop_rate
        ]
        while len(kept) < shape.steps:
            noise = rng.choice(TOOLS) if rng.random() < 0.001 else rng.choice(off_backbone)
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


def timed(functions, runs, *, rounds, calls=1):
    """Per function, its result and best CPU time per call over `rounds` rounds of `calls` calls (CPU time: the
    2-core machine is shared). The functions take turns, round after round, so a change in the machine's load
    reaches them all alike."""
    results = [None] * len(functions)
    best = [float("inf")] * len(functions)
    for _ in range(rounds):
        for index, function in enumerate(functions):
            started = time.process_time()
            for _ in range(calls):
                results[index] = function(runs, intent="process enterprise refund")
            best[index] = min(best[index], (time.process_time() - started) / calls)
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


def outcome(function, runs):
    try:
        return function(runs, intent="process enterprise refund")
    except ValueError as error:
        return str(error)


def learn(runs, *, intent):
    """learn_procedure, its ValueError (runs sharing no step) as the result."""
    try:
        return learn_procedure(runs, intent=intent)
    except ValueError as error:
        return str(error)


def bench_shape(shape: Shape, *, literal: bool) -> tuple[float, float, float]:
    """(floor seconds, learn_procedure seconds, ratio), after asserting the candidate equals the reference's."""
    runs = make_runs(shape)
    fast = outcome(learn_procedure, runs)
    assert fast == outcome(skipping_reference_learn_procedure, runs), f"{shape}: differs from the skipping reference"
    if literal:
        assert fast == outcome(reference_learn_procedure, runs), f"{shape}: differs from the literal reference"
    [(_, probe)] = timed([read_floor], runs, rounds=1)
    calls = max(1, min(1_000, int(0.003 / max(probe, 1e-7))))
    (_, floor_seconds), (_, fast_seconds) = timed([read_floor, learn], runs, rounds=7, calls=calls)
    ratio = fast_seconds / floor_seconds
    learned = len(fast.steps) if not isinstance(fast, str) else 0
    print(
        f"  {shape.name:<46} seed {shape.seed:<10} shrinks {folds(runs):>3}  learned {learned:>3}"
        f"  floor {floor_seconds * 1e3:9.4f} ms  learn {fast_seconds * 1e3:9.4f} ms  {ratio:5.2f}x"
        + ("" if reading_bound(shape, floor_seconds) else "  (not reading-bound)")
    )
    return floor_seconds, fast_seconds, ratio


def _first(item):
    return item[0]


def reading_bound(shape: Shape, floor_seconds: float) -> bool:
    """Whether reading the input is what the shape measures: a floor of at least 1 ms, and at least as many runs as
    steps per run (the fold's few LCS tables, L x L cells each, are then amortized over N x L steps read)."""
    return floor_seconds >= AMORTIZED_FLOOR and shape.runs >= shape.steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="seed of the random shapes (default: a fresh one)")
    parser.add_argument("--random", type=int, default=6, help="how many random shapes")
    parser.add_argument("--only", default="", help="only the shapes whose name starts with this")
    parser.add_argument("--literal", action="store_true", help="also assert against the literal reference (slow)")
    options = parser.parse_args(argv)
    seed = options.seed if options.seed is not None else int.from_bytes(os.urandom(4), "big")
    print(f"random shapes: seed {seed} (bench/mining.py --seed {seed} draws them again)")
    shapes = [shape for shape in family() + random_shapes(options.random, seed) if shape.name.startswith(options.only)]
    worst, worst_read = (0.0, None), (0.0, None)
    started = time.monotonic()
    for shape in shapes:
        floor_seconds, _, ratio = bench_shape(shape, literal=options.literal)
        worst = max(worst, (ratio, shape), key=_first)
        if reading_bound(shape, floor_seconds):
            worst_read = max(worst_read, (ratio, shape), key=_first)
    print(f"{len(shapes)} shapes in {time.monotonic() - started:.0f} s; every candidate equal to the reference's")
    for label, (ratio, shape) in (("reading-bound shapes (aim <= 3x)", worst_read), ("all shapes", worst)):
        if shape is not None:
            print(f"worst learn_procedure / floor, {label}: {ratio:.2f}x on {shape.name} (seed {shape.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
