"""Pure helpers of the mining service: intent keys, the deterministic split and the full-content revision.

No Django here, but not in procedures.core either: these are application choices (docs/decisions.md, procedures),
not reference behaviour.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
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
    ordered = sorted(set(ids))
    shuffled = list(ordered)
    random.Random(seed).shuffle(shuffled)
    count = round(len(ordered) * held_out_share)
    if at_least_one and len(ordered) >= 2:
        count = min(max(count, 1), len(ordered) - 1)
    held_out = set(shuffled[:count])
    return Split(
        training=tuple(i for i in ordered if i not in held_out),
        held_out=tuple(i for i in ordered if i in held_out),
    )


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
