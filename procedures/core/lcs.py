"""The longest common subsequence of two tool sequences, with the reference's per-cell tie-break, computed cheaply.

The reference (trajectory-mining §2.1) fills a DP table whose every cell holds one concrete subsequence: on equal
elements the diagonal cell extended by that element, otherwise the longer of the up and left cells, and on equal
length the lexicographically smaller tuple. `lcs` returns exactly the bottom-right cell of that table, using three
shortcuts that provably give the same answer, and a leaner DP for the rest:

1. If one sequence is a subsequence of the other, it is the answer. Every cell's tuple is a common subsequence of
   the two prefixes with the true LCS length (induction over the recurrence), so the bottom-right cell has length
   len(shorter) and is a subsequence of the shorter sequence; the only such subsequence is the sequence itself.
2. A common first element is the first element of the answer, and the rest is the answer for the two tails: row 1
   and column 1 of the table all hold (x,), and every later cell is (x,) + the tail table's cell, because prefixing
   the same element preserves both length order and lexicographic order of the up/left comparison.
3. A common last element is the last element of the answer: the bottom-right cell is a diagonal extension.

The DP itself stores (length, key tuple) pairs, where a symbol's key is minus its rank in sorted order. For equal
lengths, the larger key tuple is the lexicographically smaller sequence, so "longer, then lexicographically
smaller" is plain `max` on the pairs, compared in C.

Sequences are handled as *code strings*: each tool name becomes one character, so hashing, slicing, concatenation
and subsequence tests run on compact strings (the subsequence test is a possessive regex: O(L), no backtracking).
The only place where order matters, the DP's tie-break, ranks the codes by their tool names' sorted order, so it
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
        escaped = re.escape(char)
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
    if not first or not second:
        return ""
    symbols = sorted(set(first) | set(second), key=None if ranks is None else ranks.__getitem__)
    key = {symbol: -rank for rank, symbol in enumerate(symbols)}
    second_keys = [key[char] for char in second]
    empty: tuple[int, tuple[int, ...]] = (0, ())
    previous = [empty] * (len(second) + 1)
    for char in first:
        row_key = key[char]
        row = [empty]
        cell = empty
        for column, column_key in enumerate(second_keys):
            if column_key == row_key:
                diagonal = previous[column]
                cell = (diagonal[0] + 1, (*diagonal[1], row_key))
            else:
                up = previous[column + 1]
                if up > cell:
                    cell = up
            row.append(cell)
        previous = row
    return "".join(symbols[-item] for item in previous[-1][1])
