"""Aligning two tool sequences (two runs side by side, a run against a procedure): difflib's longest matching
blocks, so the steps both sides share line up and what differs shows as a replacement, a deletion or an insertion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import zip_longest
from typing import Literal

Kind = Literal["equal", "replace", "delete", "insert"]


@dataclass(frozen=True)
class Aligned:
    """One row: `a` and `b` are indexes into the two sequences (None where that side has no step).

    equal: the same tool on both sides; replace: different tools at the same place; delete: only in `a`;
    insert: only in `b`."""

    kind: Kind
    a: int | None
    b: int | None


def align_tools(first: Sequence[str], second: Sequence[str]) -> list[Aligned]:
    """Rows covering every item of both sequences once, in order (no junk heuristic: short sequences, exact)."""
    rows: list[Aligned] = []
    matcher = SequenceMatcher(None, list(first), list(second), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(Aligned("equal", i, j) for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
        elif tag == "delete":
            rows.extend(Aligned("delete", i, None) for i in range(i1, i2))
        elif tag == "insert":
            rows.extend(Aligned("insert", None, j) for j in range(j1, j2))
        else:
            for i, j in zip_longest(range(i1, i2), range(j1, j2)):
                kind: Kind = "replace" if i is not None and j is not None else ("delete" if j is None else "insert")
                rows.append(Aligned(kind, i, j))
    return rows
