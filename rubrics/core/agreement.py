"""Inter-rater agreement on rubric scores, per dimension, over any mix of raters (people and model judges).

For each dimension: Krippendorff's alpha at the interval level (the `krippendorff` package), and for every pair of
raters the units both rated, the mean absolute difference of their scores and the share of those units where the
two scores are within a tolerance. No Django here; the input is plain tuples so any host can call it.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import krippendorff
import numpy as np

DEFAULT_TOLERANCE = 0.25
# Two scores count as "within tolerance" when |a - b| <= tolerance + this slack, so 0.8 vs 0.55 is within 0.25.
TOLERANCE_SLACK = 1e-9


@dataclass(frozen=True)
class Rating:
    rater_id: str
    unit_id: str
    dimension_id: str
    score: float


@dataclass(frozen=True)
class PairAgreement:
    rater_a: str
    rater_b: str
    shared_units: int
    mean_absolute_difference: float | None
    within_tolerance: float | None

    def to_document(self) -> dict[str, Any]:
        return {
            "rater_a": self.rater_a,
            "rater_b": self.rater_b,
            "shared_units": self.shared_units,
            "mean_absolute_difference": self.mean_absolute_difference,
            "within_tolerance": self.within_tolerance,
        }


@dataclass(frozen=True)
class DimensionAgreement:
    dimension_id: str
    raters: tuple[str, ...]
    units: tuple[str, ...]
    alpha: float | None
    note: str
    pairs: tuple[PairAgreement, ...]
    tolerance: float = DEFAULT_TOLERANCE

    def to_document(self) -> dict[str, Any]:
        return {
            "dimension_id": self.dimension_id,
            "raters": list(self.raters),
            "units": list(self.units),
            "alpha": self.alpha,
            "note": self.note,
            "tolerance": self.tolerance,
            "pairs": [pair.to_document() for pair in self.pairs],
        }


def _rating(value: Any) -> Rating:
    if isinstance(value, Rating):
        rater_id, unit_id, dimension_id, score = value.rater_id, value.unit_id, value.dimension_id, value.score
    else:
        try:
            rater_id, unit_id, dimension_id, score = value
        except (TypeError, ValueError):
            raise ValueError("a rating must be (rater_id, unit_id, dimension_id, score)") from None
    for name, text in (("rater_id", rater_id), ("unit_id", unit_id), ("dimension_id", dimension_id)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"a rating's {name} must be a non-blank string")
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise ValueError("a rating's score must be a finite number")
    return Rating(rater_id, unit_id, dimension_id, float(score))


def _alpha(
    table: dict[str, dict[str, float]], raters: tuple[str, ...], units: tuple[str, ...]
) -> tuple[float | None, str]:
    """Interval alpha over a raters × units table, or None and the reason it is undefined."""
    if len(raters) < 2:
        return None, "undefined: fewer than 2 raters"
    pairable = [[table[rater][unit] for rater in raters if unit in table[rater]] for unit in units]
    pairable = [values for values in pairable if len(values) >= 2]
    if not pairable:
        return None, "undefined: no unit was rated by 2 or more raters"
    if len({value for values in pairable for value in values}) < 2:
        return None, "undefined: no variance (every paired rating has the same value)"
    data = np.array(
        [[table[rater].get(unit, np.nan) for unit in units] for rater in raters],
        dtype=np.float64,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            value = float(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))
    except (ValueError, ZeroDivisionError, FloatingPointError) as error:
        return None, f"undefined: {error}"
    if not math.isfinite(value):
        return None, "undefined: the expected disagreement is zero"
    return value, ""


def _pair(table: dict[str, dict[str, float]], a: str, b: str, tolerance: float) -> PairAgreement:
    shared = sorted(set(table[a]) & set(table[b]))
    if not shared:
        return PairAgreement(a, b, 0, None, None)
    differences = [abs(table[a][unit] - table[b][unit]) for unit in shared]
    within = sum(1 for difference in differences if difference <= tolerance + TOLERANCE_SLACK)
    return PairAgreement(
        rater_a=a,
        rater_b=b,
        shared_units=len(shared),
        mean_absolute_difference=math.fsum(differences) / len(differences),
        within_tolerance=within / len(differences),
    )


def rubric_agreement(
    ratings: Iterable[Rating | tuple[str, str, str, float]], *, tolerance: float = DEFAULT_TOLERANCE
) -> tuple[DimensionAgreement, ...]:
    """Agreement per dimension (sorted by dimension id) from (rater_id, unit_id, dimension_id, score) ratings.

    A rater scores a unit on a dimension at most once (a repeat is a ValueError: average or pick upstream). Raters,
    units and pairs are sorted by id. `alpha` is None, with the reason in `note`, when it is undefined.
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not math.isfinite(tolerance):
        raise ValueError("tolerance must be a finite number >= 0")
    if tolerance < 0:
        raise ValueError("tolerance must be a finite number >= 0")
    tables: dict[str, dict[str, dict[str, float]]] = {}
    for raw in ratings:
        rating = _rating(raw)
        by_rater = tables.setdefault(rating.dimension_id, {}).setdefault(rating.rater_id, {})
        if rating.unit_id in by_rater:
            raise ValueError(
                f"rater {rating.rater_id!r} scored unit {rating.unit_id!r} on dimension {rating.dimension_id!r} twice"
            )
        by_rater[rating.unit_id] = rating.score

    results = []
    for dimension_id in sorted(tables):
        table = tables[dimension_id]
        raters = tuple(sorted(table))
        units = tuple(sorted({unit for scores in table.values() for unit in scores}))
        alpha, note = _alpha(table, raters, units)
        pairs = tuple(_pair(table, a, b, float(tolerance)) for a, b in itertools.combinations(raters, 2))
        results.append(
            DimensionAgreement(
                dimension_id=dimension_id,
                raters=raters,
                units=units,
                alpha=alpha,
                note=note,
                pairs=pairs,
                tolerance=float(tolerance),
            )
        )
    return tuple(results)


__all__ = ["DEFAULT_TOLERANCE", "DimensionAgreement", "PairAgreement", "Rating", "rubric_agreement"]
