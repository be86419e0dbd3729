"""Budgets, the meter that enforces them, the metered model wrapper and the loop's hooks (spec §6 Budget, Hooks).

A `Meter` counts model calls, output tokens, evaluations and seconds against a `Budget`. It is resumable: `used`
carries the counts (and the seconds already spent) of earlier invocations, so one budget can span a whole run that
the host executes one round at a time in separate processes. Model calls, output tokens and seconds are checked before
every model call and at the start of each round; evaluations only before an evaluation.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from llm.core import ModelRequest, ModelResponse

__all__ = ["Budget", "BudgetExceeded", "HookedModel", "Hooks", "Meter", "output_tokens_of"]

_COUNT_CEILINGS: tuple[str, ...] = ("max_model_calls", "max_output_tokens", "max_evaluations")
CEILINGS: tuple[str, ...] = (*_COUNT_CEILINGS, "max_seconds")
_USED_KEYS: tuple[str, ...] = ("model_calls", "output_tokens", "evaluations")


def _count_ceiling(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Budget.{name} must be a non-negative integer or None, not {value!r}")
    return value


def _seconds_ceiling(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"Budget.max_seconds must be a non-negative finite number or None, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class Budget:
    """Ceilings for one run; None means unlimited. `Budget()` is unlimited."""

    max_model_calls: int | None = None
    max_output_tokens: int | None = None
    max_evaluations: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in _COUNT_CEILINGS:
            object.__setattr__(self, name, _count_ceiling(name, getattr(self, name)))
        object.__setattr__(self, "max_seconds", _seconds_ceiling(self.max_seconds))

    @property
    def unlimited(self) -> bool:
        return all(getattr(self, name) is None for name in CEILINGS)

    def to_document(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in CEILINGS}

    @classmethod
    def from_document(cls, value: Mapping[str, Any] | None) -> Budget:
        value = dict(value or {})
        unknown = sorted(set(value) - set(CEILINGS))
        if unknown:
            raise ValueError(f"unknown budget keys: {', '.join(unknown)}")
        return cls(**value)


class BudgetExceeded(Exception):
    """A ceiling was reached: `ceiling` names it (e.g. "max_model_calls"), with its `limit`, the `used` amount and the
    `stage` that was about to spend more."""

    def __init__(self, ceiling: str, limit: float, used: float, stage: str) -> None:
        self.ceiling = ceiling
        self.limit = limit
        self.used = used
        self.stage = stage
        super().__init__(f"budget exhausted: {ceiling}={limit} reached ({used} used) at {stage}")


def output_tokens_of(response: Any) -> int:
    """The output tokens a response reports: `usage.output_tokens`, else `usage.completion_tokens`, else 0."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0
    for name in ("output_tokens", "completion_tokens"):
        value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0


def _used_count(used: Mapping[str, Any], name: str) -> int:
    value = used.get(name, 0) or 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"used {name} must be a non-negative integer, not {value!r}")
    return value


def _used_seconds(used: Mapping[str, Any]) -> float:
    value = used.get("seconds", 0.0) or 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"used seconds must be a non-negative finite number, not {value!r}")
    return float(value)


class Meter:
    """Counts what a run spends and raises BudgetExceeded before a ceiling would be passed.

    `used` is what earlier invocations of the same run already spent (the `to_dict()` of their meter works as is);
    `clock` measures the seconds spent by this invocation, added to `used["seconds"]`.
    """

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        used: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if budget is not None and not isinstance(budget, Budget):
            raise ValueError(f"budget must be a Budget, not {type(budget).__name__}")
        self.budget = budget or Budget()
        used = dict(used or {})
        self.model_calls = _used_count(used, "model_calls")
        self.output_tokens = _used_count(used, "output_tokens")
        self.evaluations = _used_count(used, "evaluations")
        self._earlier_seconds = _used_seconds(used)
        self._clock = clock
        self._started = clock()

    @property
    def seconds(self) -> float:
        return self._earlier_seconds + max(0.0, self._clock() - self._started)

    def adopt(self, budget: Budget) -> None:
        """Take `budget` as the ceilings when this meter has none of its own."""
        if self.budget.unlimited:
            self.budget = budget

    def check(self, stage: str) -> None:
        """Before a model call or a round: model calls, output tokens and seconds."""
        self._refuse_at("max_model_calls", self.model_calls, stage)
        self._refuse_at("max_output_tokens", self.output_tokens, stage)
        self._refuse_at("max_seconds", self.seconds, stage)

    def check_evaluation(self, stage: str = "evaluation") -> None:
        """Before an evaluation: evaluations only."""
        self._refuse_at("max_evaluations", self.evaluations, stage)

    def _refuse_at(self, ceiling: str, used: float, stage: str) -> None:
        limit = getattr(self.budget, ceiling)
        if limit is not None and used >= limit:
            raise BudgetExceeded(ceiling, limit, used, stage)

    def count_model_call(self, response: Any) -> None:
        self.model_calls += 1
        self.output_tokens += output_tokens_of(response)

    def count_evaluation(self) -> None:
        self.evaluations += 1

    def to_dict(self) -> dict[str, Any]:
        """The spend so far (pass it back as `used` to resume) and the ceilings."""
        return {
            "model_calls": self.model_calls,
            "output_tokens": self.output_tokens,
            "evaluations": self.evaluations,
            "seconds": round(self.seconds, 6),
            "ceilings": self.budget.to_document(),
        }


class Hooks:
    """The loop's observation points. Every method does nothing; subclass and override what you need.

    An exception raised from a hook propagates out of the loop untouched (a host cancels a run that way); everything
    written before it stays, and a later run resumes from the checkpoints.
    """

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Wraps "baseline", "rollout:k", "refiner:k" and "validation:k"."""
        yield

    def on_model_call(self, role: str, request: ModelRequest, response: ModelResponse) -> None:
        return None

    def on_iteration(self, report: Any) -> None:
        return None

    def on_warning(self, message: str) -> None:
        return None


class HookedModel:
    """A ChatModel that checks the budget before every call, counts the call and its output tokens, and tells the
    hooks. The loop wraps any plain model in one; a host that passes its own keeps its meter (and its spend)."""

    def __init__(self, model: Any, meter: Meter | None = None, hooks: Hooks | None = None) -> None:
        if isinstance(model, HookedModel):
            raise ValueError("the model is already a HookedModel")
        self.model = model
        self.meter = meter if meter is not None else Meter()
        self.hooks = hooks if hooks is not None else Hooks()

    @property
    def model_id(self) -> str:
        return getattr(self.model, "model_id", "")

    @property
    def provider(self) -> str:
        return getattr(self.model, "provider", "")

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.meter.check(f"model:{request.role}")
        response = self.model.complete(request)
        self.meter.count_model_call(response)
        self.hooks.on_model_call(request.role, request, response)
        return response
