"""The longest common subsequence of two tool sequences, with the reference's per-cell tie-break, computed cheaply.

The reference (trajectory-mining §2.1) fills a DP table whose every cell holds one concrete subsequence: on equal
elements the diagonal cell extended by that element, otherwise the longer of the up and left cells, and on equal
length the lexicographically smaller tuple. `lcs` returns exactly the bottom-right cell of that table, using three
shortcuts that provably give the same answer, and no table for the rest:

1. If one sequence is a subsequence of the other, it is the answer. Every cell's tuple is a common subsequence of
   the two prefixes with the true LCS length (induction over the recurrence), so the bottom-right cell has length
   len(shorter) and is a subsequence of the shorter sequence; the only such subsequence is the sequence itself.
2. A common first element is the first element of the answer, and the rest is the answer for the two tails: row 1
   and column 1 of the table all hold (x,), and every later cell is (x,) + the tail table's cell, because prefixing
   the same element preserves both length order and lexicographic order of the up/left comparison.
3. A common last element is the last element of the answer: the bottom-right cell is a diagonal extension.

The rest needs no table: the bottom-right cell is the lexicographically smallest LCS (proof in `_table_lcs`), built
greedily from the LCS lengths of the suffixes, which bit-parallel rows give in one big-int operation per element.

Sequences are handled as *code strings*: each tool name becomes one character, so hashing, slicing, concatenation
and subsequence tests run on compact strings (the subsequence test is a possessive regex: O(L), no backtracking).
The only place where order matters, the tie-break, ranks the codes by their tool names' sorted order, so it
compares exactly as the tuples of names would.
"""

import re
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any

Tools = tuple[str, ...]

_FIRST_CODE = 0x100  # clear of ASCII, so codes are never regex syntax
_SURROGATES = range(0xD800, 0xE000)


class _CodeTable(dict[str, str]):
    """Tool name -> code; a name seen for the first time gets the next free code (`dict` calls `__missing__` from C,
    so known names cost one plain dict lookup, with no try/except around each run)."""

    def __missing__(self, tool: str) -> str:
        code = self[tool] = _char(len(self))
        return code


class ToolCodes:
    """Tool name -> one-character code, assigned on first sight (so encoding is one C-level pass per run).

    Codes are compared for equality only, except in the DP's tie-break, which orders them by `ranks()`: each code's
    rank in the sorted order of the tool names."""

    def __init__(self) -> None:
        self._code = _CodeTable()
        self.lookup = self._code.__getitem__  # a tool name's code (assigned on first sight)

    def encode(self, items: Sequence[Any], key: Callable[[Any], str] | None = None) -> str:
        """The code string of `items` (tool names, or anything `key` turns into one)."""
        return "".join(map(self.lookup, items if key is None else map(key, items)))

    def decode(self, codes: str) -> Tools:
        names = {char: name for name, char in self._code.items()}
        return tuple(map(names.__getitem__, codes))

    def ranks(self) -> dict[str, int]:
        return {char: rank for rank, (_, char) in enumerate(sorted(self._code.items()))}


def _char(rank: int) -> str:
    point = _FIRST_CODE + rank
    return chr(point + len(_SURROGATES) if point >= _SURROGATES.start else point)


def is_subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    """True when `short` occurs in `long` in order (not necessarily contiguously)."""
    if len(short) > len(long):
        return False
    remaining = iter(long)
    return all(tool in remaining for tool in short)


def subsequence_pattern(codes: str, *, capture: bool | Set[int] = False) -> re.Pattern[str]:
    """A pattern whose `.match(run_codes)` succeeds iff `codes` is a subsequence of `run_codes`.

    With `capture=True` (or a set of positions), the group for position k is its leftmost occurrence after the
    previous position's match: the greedy leftmost alignment. Groups are numbered in position order."""
    parts = []
    for position, char in enumerate(codes):
        escaped = char if char >= "\x80" else re.escape(char)  # codes are clear of ASCII (`_char`)
        captured = capture is True or (capture is not False and position in capture)
        parts.append(f"[^{escaped}]*+({escaped})" if captured else f"[^{escaped}]*+{escaped}")
    return re.compile("".join(parts), re.DOTALL)


def lcs(first: Tools, second: Tools) -> Tools:
    """The reference DP's bottom-right cell for two tuples of tool names (symmetric in its arguments)."""
    codes = ToolCodes()
    first_codes, second_codes = codes.encode(first), codes.encode(second)
    return codes.decode(lcs_codes(first_codes, second_codes, codes.ranks()))


def lcs_codes(first: str, second: str, ranks: Mapping[str, int] | None = None) -> str:
    """`lcs` on code strings; `ranks` orders the codes for the tie-break (default: by code point)."""
    if is_subsequence(first, second):
        return first
    if is_subsequence(second, first):
        return second
    limit = min(len(first), len(second))
    head = 0
    while head < limit and first[head] == second[head]:
        head += 1
    tail = 0
    while tail < limit - head and first[-1 - tail] == second[-1 - tail]:
        tail += 1
    middle = _table_lcs(first[head : len(first) - tail], second[head : len(second) - tail], ranks)
    return first[:head] + middle + first[len(first) - tail :]


def _table_lcs(first: str, second: str, ranks: Mapping[str, int] | None) -> str:
    """The reference DP's bottom-right cell, which is the lexicographically smallest LCS (in the ranks' order).

    Why (induction over the table): where the two last elements differ, a common subsequence leaves out one of
    them, so the cell's LCSs are those of the up and left cells that have the full length, and the smaller of
    their cells is the smallest of them. Where both are x, the cell is diagonal + x; an LCS S smaller than that
    would be T + y with T no smaller than the diagonal (T is an LCS of the diagonal's prefixes), so T equal to it
    and y < x: but then T + y, y ≠ x, is common to the diagonal's prefixes, one longer than their LCS.

    So the cell is built greedily: from positions (i, j), the smallest symbol whose next occurrences in both leave
    a common subsequence of the remaining length (the earliest occurrences leave the most). The lengths of the
    suffixes' LCSs come from the bit-parallel LCS rows (Allison-Dix; Hyyrö), one big-int operation per element of
    `first`: O(len(first) + len(LCS) * alphabet) interpreter steps, not O(len(first) * len(second))."""
    if not first or not second:
        return ""
    length, width = len(first), len(second)
    masks: dict[str, int] = {}  # per symbol, the positions in reversed `second` that hold it
    for position, char in enumerate(reversed(second)):
        masks[char] = masks.get(char, 0) | (1 << position)
    full = (1 << width) - 1
    row = full
    rows = [row]  # rows[k]: the zero bits of its lowest t bits count the LCS of first[-k:] and second[-t:]
    for char in reversed(first):
        matched = row & masks.get(char, 0)
        row = ((row + matched) | (row - matched)) & full
        rows.append(row)

    # The LCS length of first[i:] and second[j:] is t - (rows[length - i] & low[t]).bit_count(), t = width - j.
    low = [(1 << t) - 1 for t in range(width + 1)]
    symbols = sorted(set(first).intersection(second), key=None if ranks is None else ranks.__getitem__)
    i = j = 0
    left = width - (rows[length] & full).bit_count()
    chosen = []
    while left:
        # The smallest symbol occurring early enough in both to leave room for the `left - 1` after it, whose
        # earliest occurrences leave exactly that (a `find` within those bounds: C speed).
        first_end, second_end = length - left + 1, width - left + 1
        for symbol in symbols:
            at_first = first.find(symbol, i, first_end)
            if at_first < 0:
                continue
            at_second = second.find(symbol, j, second_end)
            if at_second < 0:
                continue
            t = width - at_second - 1
            if t - (rows[length - at_first - 1] & low[t]).bit_count() == left - 1:
                chosen.append(symbol)
                i, j, left = at_first + 1, at_second + 1, left - 1
                break
    return "".join(chosen)
