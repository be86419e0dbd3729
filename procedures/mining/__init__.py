"""Mining: procedures learned from an intent's runs. The services are in procedures.mining.services; here are its pure
helpers: intent keys, the deterministic split and the full-content revision.

No Django here, but not in procedures.core either: these are application choices (docs/decisions.md, procedures),
not reference behaviour.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common.canonical import digest as canonical_digest
from intents.core import normalize_intent


def intent_key(label: str) -> str:
    """The grouping key of a declared intent label: intents.core.normalize_intent (DESIGN.md §6)."""
    return normalize_intent(label)


@dataclass(frozen=True)
class Split:
    training: tuple[int, ...]
    held_out: tuple[int, ...]


_WORD = 0xFFFFFFFF
# Two odd multipliers below 2**31, so a 32-bit word times either fits a signed 64-bit integer (PostgreSQL's bigint
# and SQLite's integer compute the key exactly; Python's too).
_MULTIPLIERS = (0x7FEB352D, 0x5BD1E995)


@functools.lru_cache(maxsize=256)
def seed_word(seed: int) -> int:
    """The seed as the 32-bit word every key of its split starts from: the first 4 bytes of the MD5 of its decimal
    digits, so nearby seeds give unrelated splits."""
    return int.from_bytes(hashlib.md5(str(seed).encode(), usedforsecurity=False).digest()[:4], "big")


def split_key(seed: int, run_id: int) -> int:
    """Where a run falls in a seeded split (the lowest keys are held out): a 32-bit mix of the run id and the seed's
    word (multiply, xor-shift, multiply), cheap in SQL as well (`split_key_sql`)."""
    x = (run_id ^ (run_id >> 32) ^ seed_word(seed)) & _WORD
    x = (x * _MULTIPLIERS[0]) & _WORD
    x ^= x >> 15
    return (x * _MULTIPLIERS[1]) & _WORD


def split_key_sql(column: str, seed: int, *, vendor: str) -> str:
    """`split_key` as a SQL expression over an integer `column` (PostgreSQL, or SQLite, which has no xor operator:
    a ^ b written as (a | b) - (a & b)). The seed's word is a literal, so the expression takes no parameters."""

    def xor(a: str, b: str) -> str:
        return f"({a} # {b})" if vendor == "postgresql" else f"(({a} | {b}) - ({a} & {b}))"

    x = f"({xor(xor(column, f'({column} >> 32)'), str(seed_word(seed)))} & {_WORD})"
    x = f"(({x} * {_MULTIPLIERS[0]}) & {_WORD})"
    x = xor(x, f"({x} >> 15)")
    return f"(({x} * {_MULTIPLIERS[1]}) & {_WORD})"


def held_out_count(runs: int, *, held_out_share: float, at_least_one: bool = False) -> int:
    """How many of `runs` runs are held out: round(runs × share) (Python's rounding); with `at_least_one`, both
    sides keep at least one run when there are two or more."""
    count = round(runs * held_out_share)
    if at_least_one and runs >= 2:
        count = min(max(count, 1), runs - 1)
    return count


def split_ids(ids: Iterable[int], *, held_out_share: float, seed: int, at_least_one: bool = False) -> Split:
    """The seeded split of some run ids in Python: the ids ordered by `split_key` (then by id), the first
    `held_out_count` held out. procedures.versions.split computes the same split in the database (tests hold them
    equal); this is its statement for reading and testing.

    Same ids, share and seed: same split. With `at_least_one`, both sides get at least one id when n >= 2.
    """
    ordered = sorted(set(ids))
    count = held_out_count(len(ordered), held_out_share=held_out_share, at_least_one=at_least_one)
    held_out = set(sorted(ordered, key=lambda pk: (split_key(seed, pk), pk))[:count])
    return Split(
        training=tuple(pk for pk in ordered if pk not in held_out),
        held_out=tuple(pk for pk in ordered if pk in held_out),
    )


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
    return canonical_digest(document)


def trajectory_id(run_id: int) -> str:
    """The id a stored run has inside learn_procedure: zero-padded so string order is numeric order."""
    return f"{run_id:012d}"


def decode_arguments(text: Any) -> Any:
    """A step's arguments read as JSON text (trajectories.selectors.step_columns and run_columns), as the ORM would
    give them, with a null or empty value as {}: what a TrajectoryStep read through the ORM holds."""
    if isinstance(text, str | bytes):
        with contextlib.suppress(json.JSONDecodeError):  # the ORM hands undecodable text over as it is
            text = json.loads(text)
    return text or {}
