"""Which agent model a certificate covers, and whether an active artifact is now mostly run by another one.

A certificate was measured with the runs of some agent models (runs carry `metadata.model`; OTLP's
`gen_ai.request.model`). An artifact certified with one model may not help another. The rule: among the newest
production runs made under an active artifact that name their model, the most frequent model is *uncovered* when it
holds more than `MAJORITY` of them, there are at least `MIN_RUNS` such runs, and no passing certificate of the
artifact was measured with it. Only a model that carries most of the traffic raises the flag: a few runs of a model
under trial do not, and an artifact whose runs name no model is never flagged (nothing is known).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAJORITY = 0.5
MIN_RUNS = 5


@dataclass(frozen=True)
class Coverage:
    model: str  # the most frequent model among the recent runs ("" when none names one)
    share: float  # its share of the recent runs that name a model
    runs: int  # recent runs that name a model
    covered: bool  # False: flag "not certified for <model>"

    @property
    def flagged(self) -> bool:
        return not self.covered


def coverage(recent: Mapping[str, int], certified: Iterable[str], *, majority: float = MAJORITY,
             min_runs: int = MIN_RUNS) -> Coverage:  # fmt: skip
    """The coverage of an artifact whose recent runs came from the models counted in `recent`, given the models its
    passing certificates were measured with (`certified`). Ties between equally frequent models go to the first in
    name order, so the answer is the same on every process."""
    counts = {model: count for model, count in recent.items() if model and count > 0}
    runs = sum(counts.values())
    if not counts:
        return Coverage(model="", share=0.0, runs=0, covered=True)
    model = min(counts, key=lambda name: (-counts[name], name))
    share = counts[model] / runs
    dominant = runs >= min_runs and share > majority
    return Coverage(model=model, share=share, runs=runs, covered=not dominant or model in set(certified))
