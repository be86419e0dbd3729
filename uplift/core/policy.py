"""The promotion policy on a certificate's bound: non-inferiority by default (the lower bound of the uplift above
-margin) or superiority (above 0), a minimum n, no critical breakage, and no net regression (the measured mean
paired difference is not below zero: a candidate worse on every task is never certified, however narrow its
interval)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .certificate import Certificate

MODES = ("non_inferiority", "superiority")
METRICS = ("success", "score")


@dataclass(frozen=True)
class Policy:
    mode: str = "non_inferiority"
    margin: float = 0.02  # on the [0, 1] scale: 0.02 is two points of success rate (or of score)
    min_n: int = 10
    metric: str = "success"
    alpha: float = 0.05  # the split's family-wise error budget
    max_decisions: int = 20  # decisions on one split before it is exhausted

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}")
        if not 0 <= self.margin <= 1:
            raise ValueError("margin must be between 0 and 1 (1 switches the bound off)")
        if self.min_n < 1:
            raise ValueError("min_n must be at least 1")
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be between 0 and 1")
        if self.max_decisions < 1:
            raise ValueError("max_decisions must be at least 1")

    @property
    def bounded(self) -> bool:
        """A non-inferiority margin of 1 (the whole scale) asks nothing of the bound: only n, the critical tasks and
        a net regression decide."""
        return self.mode == "superiority" or self.margin < 1

    @property
    def threshold(self) -> float:
        """The lower bound must be above this."""
        return -self.margin if self.mode == "non_inferiority" else 0.0

    def to_document(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "margin": self.margin,
            "min_n": self.min_n,
            "metric": self.metric,
            "alpha": self.alpha,
            "max_decisions": self.max_decisions,
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Policy:
        return cls(**{key: document[key] for key in cls().to_document() if key in document})


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]  # why it fails (empty when it passes)
    sentence: str  # the plain sentence shown beside the certificate


def _points(value: float) -> str:
    return f"{value * 100:+.1f} points"


def judge(policy: Policy, certificate: Certificate, *, against: str = "the version it replaces") -> Verdict:
    difference = certificate.difference(policy.metric)
    what = "success rate" if policy.metric == "success" else "score"
    confidence = f"{certificate.confidence:.1%}".replace(".0%", "%")
    if policy.mode == "non_inferiority":
        claim = f"no worse than {against} by more than {policy.margin * 100:g} points of {what}"
    else:
        claim = f"better than {against} in {what}"
    reasons = []
    if certificate.n < policy.min_n:
        reasons.append(f"{certificate.n} paired tasks, the policy needs at least {policy.min_n}")
    if certificate.critical_breakages:
        names = ", ".join(certificate.critical_breakages[:5])
        reasons.append(f"{len(certificate.critical_breakages)} critical task(s) broken: {names}")
    if policy.bounded and not difference.low > policy.threshold:
        reasons.append(f"the lower bound {_points(difference.low)} does not clear {_points(policy.threshold)}")
    if difference.mean is not None and difference.mean < 0:
        reasons.append(f"the candidate is worse on average ({_points(difference.mean)})")
    passed = not reasons
    mean = "none" if difference.mean is None else _points(difference.mean)
    bound = f"lower bound {_points(difference.low)}, mean {mean}, n = {certificate.n}"
    if passed:
        sentence = f"With {confidence} confidence the candidate is {claim} ({bound})."
    else:
        sentence = (
            f"Not certified: with {confidence} confidence it cannot be said that the candidate is {claim} ({bound})."
        )
    return Verdict(passed=passed, reasons=tuple(reasons), sentence=sentence)
