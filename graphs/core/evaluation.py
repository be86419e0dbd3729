"""Traces, task outcomes, evaluations and gate decisions (spec §2.3): the values the evolution loop passes around.

Every value has a JSON document form (`to_document` / `from_document`) so stores, checkpoints and pages can keep it;
optional fields added in 0.3 (`metrics`, `objective_context`) are left out of a document when absent, so older
documents keep their shape and digest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .guide import Step, as_step
from .serialize import render_step


def _score(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, not {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{what} must lie in [0, 1], not {value!r}")
    return float(value)


@dataclass(frozen=True)
class TaskOutcome:
    """How one task went: a score in [0, 1], passed, what was predicted and expected, optional named metrics."""

    task_id: str
    score: float
    passed: bool
    prediction: Any = None
    truth: Any = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float | None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id:
            raise ValueError("TaskOutcome.task_id must be a non-empty string")
        object.__setattr__(self, "score", _score(self.score, f"the score of task {self.task_id!r}"))
        object.__setattr__(self, "passed", bool(self.passed))
        object.__setattr__(self, "meta", dict(self.meta or {}))
        if self.metrics is not None:
            object.__setattr__(self, "metrics", dict(self.metrics))

    def to_document(self) -> dict[str, Any]:
        document = {
            "task_id": self.task_id,
            "score": self.score,
            "passed": self.passed,
            "prediction": self.prediction,
            "truth": self.truth,
            "meta": dict(self.meta),
        }
        if self.metrics is not None:
            document["metrics"] = dict(self.metrics)
        return document

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> TaskOutcome:
        return cls(
            task_id=value["task_id"],
            score=value["score"],
            passed=value["passed"],
            prediction=value.get("prediction"),
            truth=value.get("truth"),
            meta=value.get("meta") or {},
            metrics=value.get("metrics"),
        )


@dataclass(frozen=True)
class Trace:
    """One attempt: its outcome, its rendered text and steps, the revision it ran under and what guided it."""

    id: str
    outcome: TaskOutcome
    text: str = ""
    steps: tuple[Step, ...] = ()
    media: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    graph_ref: str | None = None
    nodes_visited: tuple[str, ...] = ()
    guidance: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("Trace.id must be a non-empty string")
        object.__setattr__(self, "steps", tuple(as_step(step) for step in self.steps))
        object.__setattr__(self, "media", tuple(self.media))
        object.__setattr__(self, "meta", dict(self.meta or {}))
        object.__setattr__(self, "nodes_visited", tuple(self.nodes_visited))
        object.__setattr__(self, "guidance", tuple(self.guidance))

    @property
    def task_id(self) -> str:
        return self.outcome.task_id

    @property
    def score(self) -> float:
        return self.outcome.score

    def rendered(self) -> str:
        """The trace's text, or its steps rendered one after another when it has no text."""
        if self.text:
            return self.text
        return "\n".join(render_step(step) for step in self.steps)

    def to_document(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome.to_document(),
            "text": self.text,
            "steps": [step.to_dict() for step in self.steps],
            "media": list(self.media),
            "meta": dict(self.meta),
            "graph_ref": self.graph_ref,
            "nodes_visited": list(self.nodes_visited),
            "guidance": list(self.guidance),
        }

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> Trace:
        return cls(
            id=value["id"],
            outcome=TaskOutcome.from_document(value["outcome"]),
            text=value.get("text") or "",
            steps=tuple(Step.from_dict(step) for step in value.get("steps") or ()),
            media=tuple(value.get("media") or ()),
            meta=value.get("meta") or {},
            graph_ref=value.get("graph_ref"),
            nodes_visited=tuple(value.get("nodes_visited") or ()),
            guidance=tuple(value.get("guidance") or ()),
        )


@dataclass(frozen=True)
class Evaluation:
    """A graph measured on a task set: `ref` names the graph (host-opaque), `score` is the mean (or None)."""

    ref: str | None
    score: float | None
    aggregate: Mapping[str, Any] = field(default_factory=dict)
    per_task: tuple[TaskOutcome, ...] = ()
    objective_context: Any = None  # an objectives.ObjectiveContext, or None outside objective mode

    def __post_init__(self) -> None:
        if self.score is not None:
            object.__setattr__(self, "score", _score(self.score, "Evaluation.score"))
        object.__setattr__(self, "aggregate", dict(self.aggregate or {}))
        object.__setattr__(self, "per_task", tuple(self.per_task))
        if isinstance(self.objective_context, Mapping):
            from .objectives import ObjectiveContext

            object.__setattr__(self, "objective_context", ObjectiveContext.from_document(self.objective_context))

    @classmethod
    def from_outcomes(
        cls, ref: str | None, outcomes: Sequence[TaskOutcome], aggregate: Mapping[str, Any] | None = None
    ) -> Evaluation:
        """The mean score of the outcomes (None when there are none)."""
        score = sum(outcome.score for outcome in outcomes) / len(outcomes) if outcomes else None
        return cls(ref=ref, score=score, aggregate=dict(aggregate or {}), per_task=tuple(outcomes))

    def short(self) -> dict[str, Any]:
        return {"ref": self.ref, "score": self.score, "aggregate": dict(self.aggregate), "tasks": len(self.per_task)}

    def to_document(self) -> dict[str, Any]:
        document = {
            "ref": self.ref,
            "score": self.score,
            "aggregate": dict(self.aggregate),
            "per_task": [outcome.to_document() for outcome in self.per_task],
        }
        if self.objective_context is not None:
            document["objective_context"] = self.objective_context.to_document()
        return document

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> Evaluation:
        context = value.get("objective_context")
        if context is not None:
            from .objectives import ObjectiveContext

            context = ObjectiveContext.from_document(context)
        return cls(
            ref=value.get("ref"),
            score=value.get("score"),
            aggregate=value.get("aggregate") or {},
            per_task=tuple(TaskOutcome.from_document(item) for item in value.get("per_task") or ()),
            objective_context=context,
        )


@dataclass(frozen=True)
class Decision:
    """A gate's answer: accepted or not, its feedback (a JSON dict) and whether the loop should stop."""

    accepted: bool
    feedback: Mapping[str, Any] = field(default_factory=dict)
    stop: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "feedback", dict(self.feedback or {}))

    @property
    def disposition(self) -> str | None:
        value = self.feedback.get("disposition")
        return value if isinstance(value, str) else None

    def to_document(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "stop": self.stop, "feedback": dict(self.feedback)}

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> Decision:
        return cls(accepted=bool(value["accepted"]), feedback=value.get("feedback") or {}, stop=bool(value.get("stop")))


class EvaluationPending(Exception):
    """An evaluator's answers are not all in yet (agents are still answering its jobs).

    The loop lets it propagate untouched: everything written so far (checkpoints) stays, and the host runs the loop
    again later, which resumes the round from its checkpoint and asks the evaluator again.
    """
