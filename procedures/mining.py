"""Pure helpers of the mining service: intent keys, the deterministic split and the full-content revision.

No Django here, but not in procedures.core either: these are application choices (docs/decisions.md, procedures),
not reference behaviour.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import eq
from typing import Any

from intents.core import normalize_intent


def intent_key(label: str) -> str:
    """The grouping key of a declared intent label: intents.core.normalize_intent (DESIGN.md §6)."""
    return normalize_intent(label)


@dataclass(frozen=True)
class Split:
    training: tuple[int, ...]
    held_out: tuple[int, ...]


def split_ids(ids: Iterable[int], *, held_out_share: float, seed: int, at_least_one: bool = False) -> Split:
    """Sort the ids, shuffle them with a RNG seeded by `seed`, and hold out the first round(n * share).

    Same ids, share and seed: same split. With `at_least_one`, both sides get at least one id when n >= 2.
    """
    ordered = sorted(ids)  # a list, not a set: 8 bytes an id (a million runs are mined in flat-ish memory)
    if any(map(eq, ordered, islice(ordered, 1, None))):
        ordered = sorted(set(ordered))
    shuffled = list(ordered)
    random.Random(seed).shuffle(shuffled)
    count = round(len(ordered) * held_out_share)
    if at_least_one and len(ordered) >= 2:
        count = min(max(count, 1), len(ordered) - 1)
    held_out = sorted(shuffled[:count])
    del shuffled
    return Split(training=tuple(_without(ordered, held_out)), held_out=tuple(held_out))


def _without(ordered: Sequence[int], removed: Sequence[int]) -> Iterator[int]:
    """The ids of `ordered` not in `removed` (both ascending, `removed` a subset), by merging."""
    position = 0
    for pk in ordered:
        if position < len(removed) and removed[position] == pk:
            position += 1
        else:
            yield pk


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_revision(
    *,
    intent: str,
    steps: Sequence[Mapping[str, Any]],
    preconditions: Sequence[Any] = (),
    failure_exits: Sequence[Any] = (),
) -> str:
    """sha256 over everything a version holds: the intent key, each step's tool and arguments, preconditions and
    failure exits, as canonical JSON. Unlike learn_procedure's revision, arguments change it."""
    document = {
        "intent": intent,
        "steps": [{"tool": step["tool"], "arguments": dict(step.get("arguments") or {})} for step in steps],
        "preconditions": list(preconditions),
        "failure_exits": list(failure_exits),
    }
    return "sha256:" + hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def trajectory_id(run_id: int) -> str:
    """The id a stored run has inside learn_procedure: zero-padded so string order is numeric order."""
    return f"{run_id:012d}"
