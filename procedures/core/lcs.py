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

The DP itself stores (length, key tuple) pairs, where a tool's key is minus its rank in sorted string order. For
equal lengths, the larger key tuple is the lexicographically smaller tool tuple, so "longer, then lexicographically
smaller" is plain `max` on the pairs, compared in C.
"""

from collections.abc import Sequence

Tools = tuple[str, ...]


def is_subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    """True when `short` occurs in `long` in order (not necessarily contiguously)."""
    if len(short) > len(long):
        return False
    remaining = iter(long)
    return all(tool in remaining for tool in short)


def lcs(first: Tools, second: Tools) -> Tools:
    """The reference DP's bottom-right cell for `first` against `second` (symmetric in its arguments)."""
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
    middle = _table_lcs(first[head : len(first) - tail], second[head : len(second) - tail])
    return first[:head] + middle + first[len(first) - tail :]


def _table_lcs(first: Tools, second: Tools) -> Tools:
    if not first or not second:
        return ()
    symbols = sorted(set(first) | set(second))
    key = {symbol: -rank for rank, symbol in enumerate(symbols)}
    second_keys = [key[tool] for tool in second]
    empty: tuple[int, tuple[int, ...]] = (0, ())
    previous = [empty] * (len(second) + 1)
    for tool in first:
        row_key = key[tool]
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
    return tuple(symbols[-item] for item in previous[-1][1])
