"""Objectives (spec §4, 0.3.2): named metrics with directions and margins, the context an evaluation is bound to,
paired Hoeffding intervals, and the decision lines an objective gate's feedback renders as (spec §5).

Nothing here decides; `gates.ObjectiveGate` does, with these values.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from .documents import sha256_digest

MAXIMIZE = "maximize"
MINIMIZE = "minimize"
DIRECTIONS = (MAXIMIZE, MINIMIZE)
OPTIMIZE = "optimize"
REPORT_ONLY = "report_only"
ROLES = (OPTIMIZE, REPORT_ONLY)
LEXICOGRAPHIC = "lexicographic"
PARETO = "pareto"
OBJECTIVE_MODES = (LEXICOGRAPHIC, PARETO)
PAIRED_HOEFFDING_V1 = "paired_hoeffding_v1"
OBJECTIVE_SCHEMA = 1


class ObjectiveError(ValueError):
    """An objective, metric, context or interval request that breaks the rules of spec §4."""


def is_number(value: Any) -> bool:
    """A real number that is not a bool (bool counts as non-numeric)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def _finite(value: Any, what: str) -> float:
    if not is_finite_number(value):
        raise ObjectiveError(f"{what} must be a finite number, not {value!r}")
    return float(value)


def _non_negative(value: Any, what: str) -> float:
    number = _finite(value, what)
    if number < 0:
        raise ObjectiveError(f"{what} must be ≥ 0, not {value!r}")
    return number


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ObjectiveError(f"{what} must be a non-empty string, not {value!r}")
    return value


def _field(document: Mapping[str, Any], key: str, what: str) -> Any:
    if not isinstance(document, Mapping):
        raise ObjectiveError(f"{what} document must be a mapping, not {type(document).__name__}")
    if key not in document:
        raise ObjectiveError(f"{what} document lacks {key!r}")
    return document[key]


# ---------------------------------------------------------------------------------------------------------------------
# Metrics and objectives


@dataclass(frozen=True)
class MetricSpec:
    """One named metric: its unit, direction, bounds, margins g/e/r, optional floor/ceiling on the candidate mean."""

    name: str
    unit: str
    direction: str
    lower_bound: float
    upper_bound: float
    min_improvement: float = 0.0
    equivalence_margin: float = 0.0
    non_regression_margin: float = 0.0
    floor: float | None = None
    ceiling: float | None = None
    role: str = OPTIMIZE

    def __post_init__(self) -> None:
        _text(self.name, "MetricSpec.name")
        if not isinstance(self.unit, str):
            raise ObjectiveError(f"the unit of metric {self.name!r} must be a string, not {self.unit!r}")
        if self.direction not in DIRECTIONS:
            raise ObjectiveError(f"the direction of metric {self.name!r} must be one of {DIRECTIONS}")
        if self.role not in ROLES:
            raise ObjectiveError(f"the role of metric {self.name!r} must be one of {ROLES}")
        lower = _finite(self.lower_bound, f"the lower bound of {self.name!r}")
        upper = _finite(self.upper_bound, f"the upper bound of {self.name!r}")
        if not upper > lower:
            raise ObjectiveError(f"metric {self.name!r} needs upper_bound > lower_bound, not [{lower}, {upper}]")
        object.__setattr__(self, "lower_bound", lower)
        object.__setattr__(self, "upper_bound", upper)
        for margin in ("min_improvement", "equivalence_margin", "non_regression_margin"):
            object.__setattr__(self, margin, _non_negative(getattr(self, margin), f"{margin} of {self.name!r}"))
        self._check_limits()

    def _check_limits(self) -> None:
        for limit in ("floor", "ceiling"):
            value = getattr(self, limit)
            if value is None:
                continue
            if self.role == REPORT_ONLY:
                raise ObjectiveError(f"report_only metric {self.name!r} may not carry a {limit}")
            number = _finite(value, f"the {limit} of {self.name!r}")
            if not self.lower_bound <= number <= self.upper_bound:
                raise ObjectiveError(f"the {limit} of {self.name!r} lies outside its bounds")
            object.__setattr__(self, limit, number)
        if self.floor is not None and self.ceiling is not None and self.floor > self.ceiling:
            raise ObjectiveError(f"metric {self.name!r} has floor {self.floor} above ceiling {self.ceiling}")

    @property
    def width(self) -> float:
        return self.upper_bound - self.lower_bound

    @property
    def optimized(self) -> bool:
        return self.role == OPTIMIZE

    @property
    def constrained(self) -> bool:
        return self.floor is not None or self.ceiling is not None

    def oriented(self, cand: float, base: float) -> float:
        """The difference with positive meaning better: cand − base to maximize, base − cand to minimize."""
        return cand - base if self.direction == MAXIMIZE else base - cand

    def in_bounds(self, value: Any) -> bool:
        """A finite non-bool number within [lower_bound, upper_bound] (never clipped)."""
        return is_finite_number(value) and self.lower_bound <= value <= self.upper_bound

    def thresholds(self) -> dict[str, float | None]:
        return {
            "min_improvement": self.min_improvement,
            "equivalence_margin": self.equivalence_margin,
            "non_regression_margin": self.non_regression_margin,
            "floor": self.floor,
            "ceiling": self.ceiling,
        }

    def to_document(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> MetricSpec:
        required = {key: _field(value, key, "MetricSpec") for key in ("name", "unit", "direction")}
        bounds = {key: _field(value, key, "MetricSpec") for key in ("lower_bound", "upper_bound")}
        optional = {f.name: value[f.name] for f in fields(cls) if f.name in value and f.name not in required}
        return cls(**{**required, **bounds, **optional})


@dataclass(frozen=True)
class ObjectiveSpec:
    """Ordered metrics judged in `lexicographic` or `pareto` mode with paired Hoeffding intervals at level alpha."""

    metrics: tuple[MetricSpec, ...]
    mode: str = LEXICOGRAPHIC
    uncertainty: str = PAIRED_HOEFFDING_V1
    alpha: float = 0.05
    min_units: int = 2
    schema: int = OBJECTIVE_SCHEMA

    def __post_init__(self) -> None:
        metrics = tuple(m if isinstance(m, MetricSpec) else MetricSpec.from_document(m) for m in self.metrics or ())
        object.__setattr__(self, "metrics", metrics)
        names = [metric.name for metric in metrics]
        if len(set(names)) != len(names):
            raise ObjectiveError(f"metric names must be unique, not {names}")
        if not any(metric.optimized for metric in metrics):
            raise ObjectiveError("an objective needs at least one metric with role 'optimize'")
        if self.mode not in OBJECTIVE_MODES:
            raise ObjectiveError(f"mode must be one of {OBJECTIVE_MODES}, not {self.mode!r}")
        if self.uncertainty != PAIRED_HOEFFDING_V1:
            raise ObjectiveError(f"uncertainty must be {PAIRED_HOEFFDING_V1!r}, not {self.uncertainty!r}")
        alpha = _finite(self.alpha, "alpha")
        if not 0.0 < alpha < 1.0:
            raise ObjectiveError(f"alpha must lie in (0, 1), not {self.alpha!r}")
        object.__setattr__(self, "alpha", alpha)
        if isinstance(self.min_units, bool) or not isinstance(self.min_units, int) or self.min_units < 2:
            raise ObjectiveError(f"min_units must be an integer ≥ 2, not {self.min_units!r}")
        if self.schema != OBJECTIVE_SCHEMA or isinstance(self.schema, bool):
            raise ObjectiveError(f"schema must be {OBJECTIVE_SCHEMA}, not {self.schema!r}")

    @property
    def optimized(self) -> tuple[MetricSpec, ...]:
        return tuple(metric for metric in self.metrics if metric.optimized)

    def metric(self, name: str) -> MetricSpec:
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(name)

    def interval_count(self) -> int:
        """M: one interval per optimized metric plus one per optimized metric with a floor or ceiling."""
        return sum(1 + int(metric.constrained) for metric in self.optimized)

    @property
    def alpha_interval(self) -> float:
        """alpha / M, fixed for the whole objective (even when a lexicographic decision returns early)."""
        return self.alpha / self.interval_count()

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical document; metric order is part of it."""
        return sha256_digest(self.to_document())

    def summary(self) -> str:
        """A few human-readable lines: the mode, each metric with its margins, the uncertainty budget."""
        lines = [_MODE_SUMMARY[self.mode]]
        lines.extend(f"{index}. {_metric_summary(m, self.mode)}" for index, m in enumerate(self.metrics, start=1))
        lines.append(
            f"Uncertainty: {self.uncertainty}, alpha {_fmt(self.alpha)} split over {self.interval_count()} "
            f"interval(s) ({_fmt(self.alpha_interval)} each); at least {self.min_units} paired units."
        )
        return "\n".join(lines)

    def to_document(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "mode": self.mode,
            "uncertainty": self.uncertainty,
            "alpha": self.alpha,
            "min_units": self.min_units,
            "metrics": [metric.to_document() for metric in self.metrics],
        }

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> ObjectiveSpec:
        metrics = _field(value, "metrics", "ObjectiveSpec")
        if not isinstance(metrics, Sequence) or isinstance(metrics, str):
            raise ObjectiveError("ObjectiveSpec.metrics must be a list of metric documents")
        return cls(
            metrics=tuple(MetricSpec.from_document(metric) for metric in metrics),
            mode=value.get("mode", LEXICOGRAPHIC),
            uncertainty=value.get("uncertainty", PAIRED_HOEFFDING_V1),
            alpha=value.get("alpha", 0.05),
            min_units=value.get("min_units", 2),
            schema=value.get("schema", OBJECTIVE_SCHEMA),
        )


_MODE_SUMMARY = {
    LEXICOGRAPHIC: "Mode: lexicographic. Metrics are judged in this order; the first one that improves or "
    "regresses decides, and a metric only passes to the next one when it is shown equivalent.",
    PARETO: "Mode: pareto. A candidate is accepted when some metric improves and no metric loses more than its "
    "tolerated loss; improving one metric at the cost of another is a rejected trade-off.",
}


def _metric_summary(metric: MetricSpec, mode: str) -> str:
    head = f"{metric.name} ({metric.unit or 'no unit'}, {metric.direction}, range [{_fmt(metric.lower_bound)}, "
    head += f"{_fmt(metric.upper_bound)}])"
    if not metric.optimized:
        return f"{head}: report only, never decides."
    parts = [
        f"an improvement must exceed {_fmt(metric.min_improvement)}",
        f"equivalent within ±{_fmt(metric.equivalence_margin)}",
    ]
    if mode == PARETO:
        parts.append(f"losses up to {_fmt(metric.non_regression_margin)} tolerated")
    if metric.floor is not None:
        parts.append(f"candidate mean must stay ≥ {_fmt(metric.floor)}")
    if metric.ceiling is not None:
        parts.append(f"candidate mean must stay ≤ {_fmt(metric.ceiling)}")
    return f"{head}: " + "; ".join(parts) + "."


# ---------------------------------------------------------------------------------------------------------------------
# Context


def _basis_pairs(value: Any) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else (value or ())
    pairs = []
    for item in items:
        if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 2:
            raise ObjectiveError(f"measurement_basis entries must be (metric, basis) pairs, not {item!r}")
        pairs.append((_text(item[0], "a measurement_basis metric"), _text(item[1], f"the basis of {item[0]!r}")))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise ObjectiveError(f"measurement_basis names a metric twice: {sorted(names)}")
    return tuple(sorted(pairs))


def _task_ids(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ObjectiveError("expected_task_ids must be a list of task ids")
    ids = [_text(task_id, "an expected task id") for task_id in value]
    if not ids:
        raise ObjectiveError("expected_task_ids must not be empty")
    if len(set(ids)) != len(ids):
        raise ObjectiveError("expected_task_ids must be unique")
    return tuple(sorted(ids))


@dataclass(frozen=True)
class ObjectiveContext:
    """What an evaluation was measured under; two evaluations are comparable only under equal contexts.

    `expected_task_ids` are stored sorted (one id is one independent unit, so their order carries no meaning) and
    `measurement_basis` as sorted (metric, basis) pairs, so the object hashes.
    """

    objective_digest: str
    evaluation_design: str
    evaluator_version: str
    cohort: str
    budget_profile: str
    evidence_partition: str
    expected_task_ids: tuple[str, ...]
    measurement_basis: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for name in _CONTEXT_TEXT_FIELDS:
            _text(getattr(self, name), f"ObjectiveContext.{name}")
        object.__setattr__(self, "expected_task_ids", _task_ids(self.expected_task_ids))
        object.__setattr__(self, "measurement_basis", _basis_pairs(self.measurement_basis))

    @property
    def units(self) -> int:
        return len(self.expected_task_ids)

    def mismatches(self, other: Any) -> list[str]:
        """The names of the fields that differ from `other`, or ["missing_context"] when there is none."""
        if other is None:
            return ["missing_context"]
        missing = object()
        return [f.name for f in fields(self) if getattr(other, f.name, missing) != getattr(self, f.name)]

    @property
    def digest(self) -> str:
        return sha256_digest(self.to_document())

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {name: getattr(self, name) for name in _CONTEXT_TEXT_FIELDS}
        document["expected_task_ids"] = list(self.expected_task_ids)
        document["measurement_basis"] = dict(self.measurement_basis)
        return document

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> ObjectiveContext:
        values = {
            name: _field(value, name, "ObjectiveContext") for name in (*_CONTEXT_TEXT_FIELDS, "expected_task_ids")
        }
        return cls(**values, measurement_basis=value.get("measurement_basis") or ())


_CONTEXT_TEXT_FIELDS = (
    "objective_digest",
    "evaluation_design",
    "evaluator_version",
    "cohort",
    "budget_profile",
    "evidence_partition",
)


# ---------------------------------------------------------------------------------------------------------------------
# Hoeffding intervals


@dataclass(frozen=True)
class Interval:
    """A mean with its Hoeffding radius: [mean − radius, mean + radius]."""

    mean: float
    radius: float

    @property
    def lower(self) -> float:
        return self.mean - self.radius

    @property
    def upper(self) -> float:
        return self.mean + self.radius

    def within(self, margin: float) -> bool:
        """Inside [−margin, margin]; never true for margin 0 (the radius of a finite sample is positive)."""
        return margin > 0 and -margin <= self.lower and self.upper <= margin


def hoeffding_radius(width: float, n: int, alpha_interval: float) -> float:
    """width · sqrt(ln(2 / alpha_interval) / (2n)): the two-sided radius at level alpha_interval for n units."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n <= 0:
        raise ObjectiveError(f"n must be a positive integer, not {n!r}")
    if not is_finite_number(alpha_interval) or not 0.0 < alpha_interval < 1.0:
        raise ObjectiveError(f"alpha_interval must lie in (0, 1), not {alpha_interval!r}")
    if not is_finite_number(width) or width <= 0:
        raise ObjectiveError(f"width must be a positive finite number, not {width!r}")
    return float(width) * math.sqrt(math.log(2.0 / alpha_interval) / (2.0 * n))


def _mean_interval(values: Sequence[float], width: float, alpha_interval: float) -> Interval:
    if not values:
        raise ObjectiveError("an interval needs at least one value")
    radius = hoeffding_radius(width, len(values), alpha_interval)
    return Interval(mean=math.fsum(values) / len(values), radius=radius)


def paired_delta_interval(deltas: Sequence[float], metric_width: float, alpha_interval: float) -> Interval:
    """The interval of the mean paired delta; a delta spans twice the metric's width, 2·(upper − lower)."""
    return _mean_interval(list(deltas), 2.0 * metric_width, alpha_interval)


def candidate_mean_interval(values: Sequence[float], metric_width: float, alpha_interval: float) -> Interval:
    """The interval of the candidate's mean, for a floor or ceiling; width upper − lower."""
    return _mean_interval(list(values), metric_width, alpha_interval)


# ---------------------------------------------------------------------------------------------------------------------
# Decision lines (spec §5)


def _fmt(value: Any) -> str:
    """A number for a reader: 4 significant digits; anything missing or non-numeric is `?`."""
    if not is_finite_number(value):
        return "?"
    return f"{value:.4g}"


def _fmt_interval(value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        return f"[{_fmt(value[0])}, {_fmt(value[1])}]"
    return "[?, ?]"


def _fmt_ids(ids: Any, limit: int = 5) -> str:
    ids = [str(task_id) for task_id in ids or ()]
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _headline(feedback: Mapping[str, Any]) -> str:
    reasons = [str(reason) for reason in feedback.get("reasons") or ()]
    disposition = feedback.get("disposition")
    return f"Decision: {disposition}" + (f" ({', '.join(reasons)})" if reasons else "")


def _metric_line(report: Mapping[str, Any]) -> str:
    name = report.get("name", "?")
    head = f"- {name} ({report.get('unit') or 'no unit'}, {report.get('direction', '?')})"
    if report.get("known") is False:
        tail = "unknown: the data has null values, no claim possible"
        return f"{head}: {tail}" + ("; report only" if report.get("informational") else "")
    parts = [
        f"baseline {_fmt(report.get('baseline_mean'))} → candidate {_fmt(report.get('candidate_mean'))}",
        f"oriented interval {_fmt_interval(report.get('oriented_interval'))} (positive = better)",
    ]
    if report.get("informational"):
        parts.append("report only")
    elif report.get("verdict"):
        parts.append(f"verdict {report['verdict']}")
    elif report.get("reached") is False:
        parts.append("not judged")
    return f"{head}: " + "; ".join(parts)


def _constraint_line(name: str, status: Mapping[str, Any]) -> str:
    line = f"Constraint on {name}: {status.get('status', '?')}"
    limits = [f"{limit} {_fmt(status.get(limit))}" for limit in ("floor", "ceiling") if status.get(limit) is not None]
    if "candidate_mean" in status:
        limits.append(f"candidate mean {_fmt(status.get('candidate_mean'))} in {_fmt_interval(status.get('interval'))}")
    return line + (f" ({'; '.join(limits)})" if limits else "")


def _constraint_lines(feedback: Mapping[str, Any]) -> list[str]:
    constraints = feedback.get("constraints") or {}
    if not isinstance(constraints, Mapping):
        return []
    order = [r.get("name") for r in _metric_reports(feedback)]
    names = [name for name in order if name in constraints] + sorted(n for n in constraints if n not in order)
    return [_constraint_line(str(name), constraints[name] or {}) for name in names]


def _pairing_lines(feedback: Mapping[str, Any]) -> list[str]:
    lines = []
    for side, problems in sorted((feedback.get("pairing") or {}).items()):
        labels = [label for label in ("duplicates", "missing", "unexpected") if (problems or {}).get(label)]
        parts = [f"{label} {_fmt_ids(problems[label])}" for label in labels]
        lines.append(f"Pairing, {side}: " + ("; ".join(parts) or "no problem listed"))
    return lines


def _context_lines(feedback: Mapping[str, Any]) -> list[str]:
    mismatch = feedback.get("context_mismatch") or {}
    return [f"Context mismatch, {side}: {', '.join(map(str, names))}" for side, names in sorted(mismatch.items())]


def _invalid_lines(feedback: Mapping[str, Any], limit: int = 5) -> list[str]:
    invalid = list(feedback.get("invalid_values") or ())
    if not invalid:
        return []
    shown = "; ".join(
        f"{item.get('side', '?')} {item.get('task_id', '?')} {item.get('metric', '?')}={item.get('value')!r}"
        for item in invalid[:limit]
    )
    more = f" and {len(invalid) - limit} more" if len(invalid) > limit else ""
    return [f"Invalid values ({len(invalid)}): {shown}{more}"]


def _metric_reports(feedback: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    reports = feedback.get("metrics") or ()
    return [report for report in reports if isinstance(report, Mapping)] if isinstance(reports, Sequence) else []


def render_decision(feedback: Mapping[str, Any]) -> list[str]:
    """The decision lines of an objective gate's feedback (spec §5); [] for scalar feedback (no disposition)."""
    if not isinstance(feedback, Mapping) or "disposition" not in feedback:
        return []
    lines = [_headline(feedback)]
    if feedback.get("decisive_metric"):
        lines.append(f"Decisive metric: {feedback['decisive_metric']}")
    lines.extend(_metric_line(report) for report in _metric_reports(feedback))
    lines.extend(_constraint_lines(feedback))
    lines.extend(_pairing_lines(feedback))
    lines.extend(_context_lines(feedback))
    lines.extend(_invalid_lines(feedback))
    if "baseline_ref" in feedback or "candidate_ref" in feedback:
        baseline, candidate = feedback.get("baseline_ref"), feedback.get("candidate_ref")
        lines.append(f"Compared baseline {baseline or '?'} with candidate {candidate or '?'}")
    return lines
