"""Where an evolution run's traces and scores come from (spec §6 host TraceSource and Evaluator).

Evaluators, chosen per run by key:
* "two-hop" — the built-in two-hop question-answering environment of spec §10 (graphs.core.twohop): it rolls out the
  training set for traces and scores the validation set, so the demo evolves a graph with no agent and no key;
* "agents" — evaluation jobs that agents claim and answer over the API (graphs.evolution.jobs);
* any name in settings.WAYMARK_GRAPH_EVALUATORS — a dotted path to a class or factory whose instance has
  `evaluate(ref, graph, *, iteration, purpose) -> Evaluation` (and optionally `collect(...)` to supply traces).
Traces otherwise come from the stored runs the workspace guided (`Run.graph_workspace`), by stride.

A certification (graphs.certification_services) measures a revision and its control with the same evaluators
(`certification_evaluator`). Its control may be no graph at all: only an evaluator whose `evaluates_without_graph`
is true is asked `evaluate(None, None, …)` (the two-hop environment runs its solver unguided, agents get jobs with
`"graph": null`); a Python evaluator that does not say so cannot certify a workspace's first graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from graphs.core import Graph
from graphs.core.evaluation import TaskOutcome, Trace
from graphs.core.guide import Step
from graphs.core.twohop import TwoHopEnvironment
from trajectories.selectors import runs_guided_by

from ..models import Revision, Workspace

TWO_HOP = "two-hop"
AGENTS = "agents"
DEFAULT_STRIDE = 20


class UnknownEvaluator(ValueError):
    pass


def configured_evaluators() -> Mapping[str, str]:
    return dict(getattr(settings, "WAYMARK_GRAPH_EVALUATORS", {}) or {})


def evaluator_choices() -> list[tuple[str, str]]:
    """(key, label) of every evaluator an operator may pick."""
    choices = [
        (TWO_HOP, "built-in two-hop question answering (spec §10)"),
        (AGENTS, "evaluation jobs answered by agents"),
    ]
    choices += [(name, f"Python evaluator {path}") for name, path in sorted(configured_evaluators().items())]
    return choices


def check_evaluator(key: str) -> str:
    if key not in {choice for choice, _ in evaluator_choices()}:
        known = ", ".join(choice for choice, _ in evaluator_choices())
        raise UnknownEvaluator(f"unknown evaluator {key!r}; choose one of {known}")
    return key


def _score_of(run) -> float:
    if run.score is not None and 0.0 <= run.score <= 1.0:
        return float(run.score)
    return 1.0 if run.outcome == "success" else 0.0


def trace_of_run(run, digests: Mapping[str, str]) -> Trace:
    """The core Trace of a stored run (steps prefetched); its graph_ref is the digest of the revision it names."""
    ref = (run.graph_revision or "").strip().lower()
    return Trace(
        id=f"run-{run.pk}",
        outcome=TaskOutcome(
            task_id=run.external_id or f"run-{run.pk}",
            score=_score_of(run),
            passed=run.outcome == "success",
            prediction=None,
            truth=None,
            meta={"outcome": run.outcome},
        ),
        text=run.task or "",
        steps=tuple(Step(step.tool, step.arguments, step.observation) for step in run.steps.all()),
        meta={"run_id": run.pk, "source": run.source},
        graph_ref=digests.get(ref) if ref else None,
    )


@dataclass
class StoredRunsTraceSource:
    """Round k reads the k-th window of `stride` runs the workspace guided (oldest first, wrapping around)."""

    workspace: Workspace
    stride: int = DEFAULT_STRIDE

    def _digests(self) -> dict[str, str]:
        rows = Revision.objects.filter(workspace=self.workspace, kind=Revision.Kind.GRAPH).values_list("seq", "digest")
        found: dict[str, str] = {}
        for seq, digest in rows:
            found[str(seq)] = digest
            found[digest] = digest
        return found

    def collect(self, graph: Graph, *, graph_ref: str | None, iteration: int) -> list[Trace]:
        _, total = runs_guided_by(self.workspace.slug, offset=0, limit=0)
        if total == 0:
            return []
        offset = ((max(iteration, 1) - 1) * self.stride) % total
        runs, _ = runs_guided_by(self.workspace.slug, offset=offset, limit=self.stride)
        if len(runs) < min(self.stride, total):
            more, _ = runs_guided_by(self.workspace.slug, offset=0, limit=min(self.stride, total) - len(runs))
            runs += more
        digests = self._digests()
        return [trace_of_run(run, digests) for run in runs]


@dataclass(frozen=True)
class Sources:
    trace_source: Any
    evaluator: Any
    available_tools: tuple[str, ...] | None = None


def build_sources(*, workspace: Workspace, evaluator: str, run_id: int, config: Mapping[str, Any]) -> Sources:
    """The trace source and evaluator a run uses (UnknownEvaluator for a key no longer configured)."""
    stride = int(config.get("stride") or DEFAULT_STRIDE)
    if evaluator == TWO_HOP:
        from graphs.core.twohop import TOOLS

        environment = TwoHopEnvironment()
        return Sources(environment, environment, TOOLS)
    if evaluator == AGENTS:
        from .jobs import AgentJobsEvaluator

        return Sources(StoredRunsTraceSource(workspace, stride), AgentJobsEvaluator(workspace=workspace, run_id=run_id))
    path = configured_evaluators().get(evaluator)
    if path is None:
        raise UnknownEvaluator(f"evaluator {evaluator!r} is not configured (settings.WAYMARK_GRAPH_EVALUATORS)")
    instance = import_string(path)()
    source = instance if callable(getattr(instance, "collect", None)) else StoredRunsTraceSource(workspace, stride)
    tools = getattr(instance, "available_tools", None)
    return Sources(source, instance, tuple(tools) if tools else None)


def evaluates_without_graph(evaluator: Any) -> bool:
    return getattr(evaluator, "evaluates_without_graph", False) is True


def certification_evaluator(
    *, workspace: Workspace, evaluator: str, config: Mapping[str, Any], subject_prefix: str
) -> Any:
    """The evaluator a certification measures both arms with (UnknownEvaluator for a key no longer configured):
    agents answer jobs under `subject_prefix` on the certification's own validation tasks."""
    if evaluator == TWO_HOP:
        return TwoHopEnvironment()
    if evaluator == AGENTS:
        from .jobs import AgentJobsEvaluator

        tasks = list(config.get("validation_tasks") or [])
        return AgentJobsEvaluator(workspace=workspace, tasks=tasks, subject_prefix=subject_prefix)
    path = configured_evaluators().get(evaluator)
    if path is None:
        raise UnknownEvaluator(f"evaluator {evaluator!r} is not configured (settings.WAYMARK_GRAPH_EVALUATORS)")
    return import_string(path)()


class DeclaredContext:
    """Objective mode: an evaluator that says nothing about the context it measured under is taken to follow the
    one the operator declared for the run (its evaluations get it stamped); an evaluator that names its own context
    keeps it, so the ObjectiveGate still refuses a mismatch."""

    def __init__(self, evaluator: Any, context: Any) -> None:
        self.evaluator = evaluator
        self.context = context

    def evaluate(self, ref, graph, *, iteration: int, purpose: str):
        from dataclasses import replace

        evaluation = self.evaluator.evaluate(ref, graph, iteration=iteration, purpose=purpose)
        if evaluation.objective_context is None:
            evaluation = replace(evaluation, objective_context=self.context)
        return evaluation
