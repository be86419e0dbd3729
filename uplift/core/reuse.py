"""The price of reusing a held-out split: every decision taken on the same held-out tasks spends part of one error
budget, so a split reused across many proposals cannot certify one by luck.

The rule (a Bonferroni-type alpha spending over an unbounded sequence of decisions): the k-th decision on a split
(k = 1 for the first) is taken at level alpha_k = alpha * 6 / (pi^2 k^2). The alpha_k sum to alpha, so the chance
that any decision ever taken on the split rests on an interval that misses its true value is at most alpha,
however many there are and whatever was decided before (the union bound needs no independence). Each new decision
is taken at a smaller alpha_k, so its interval is wider. After `max_decisions` the split is exhausted: a new
certificate needs fresh held-out tasks (runs received after the split was drawn).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SPENDING = 6 / math.pi**2


def alpha_for(decision: int, alpha: float) -> float:
    """The level of the `decision`-th decision (1-based) on a split whose budget is `alpha`."""
    if decision < 1:
        raise ValueError("decisions are counted from 1")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    return alpha * SPENDING / decision**2


@dataclass(frozen=True)
class SplitBudget:
    alpha: float  # the split's whole error budget (family-wise)
    max_decisions: int
    decisions_taken: int

    @property
    def exhausted(self) -> bool:
        return self.decisions_taken >= self.max_decisions

    @property
    def next_decision(self) -> int:
        return self.decisions_taken + 1

    @property
    def next_alpha(self) -> float:
        """The level the next decision on the split is taken at (ValueError when the split is exhausted)."""
        if self.exhausted:
            raise ValueError(
                f"the split has had {self.decisions_taken} decisions, its limit: certify on fresh held-out runs"
            )
        return alpha_for(self.next_decision, self.alpha)

    @property
    def spent(self) -> float:
        return sum(alpha_for(k, self.alpha) for k in range(1, self.decisions_taken + 1))
