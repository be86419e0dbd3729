"""`evolve()` (spec §6): Algorithm 1's round loop with the reference's hardening.

Each round rolls the head graph out, asks the refiner for an edit set, classifies the result into one of five
outcomes (accepted, rejected, structural_failure, no_action, duplicate_candidate), records exactly one rejection-memory
entry and saves the memory once. Checkpoints written during the round (#1 after the refiner, #2 after the evaluation,
#3 after the gate, before the head moves) let a later call finish a round that crashed, ran out of budget or is
waiting for evaluation answers, without a second evaluation and without a second acceptance.

Everything here is synchronous. Exceptions the spec does not name (an evaluator that raises, EvaluationPending, a hook
that raises to cancel the run, HeadMoved) propagate untouched, leaving what was already written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .bootstrap import BootstrapResult
from .budget import Budget, BudgetExceeded, HookedModel, Hooks, Meter
from .diagnostics import Diagnostic, GraphError, errors_in, warnings_in
from .edits import EditSet, edit_set_from_dict
from .evaluation import Decision, Evaluation, Trace
from .gates import ObjectiveGate, TieAcceptingGate
from .graph import CYCLE_POLICIES, Graph, skeleton
from .objectives import ObjectiveContext, ObjectiveSpec
from .refiner import INCREMENTAL_MODES, ONETIME_MODES, Refiner, RefinerResult, auto_mode
from .rejections import (
    ACCEPTED,
    DUPLICATE_CANDIDATE,
    NO_ACTION,
    REJECTED,
    STRUCTURAL_FAILURE,
    RejectionEntry,
    RejectionMemory,
    utc_now,
)
from .stores import Candidate, CheckpointStore, GraphStore, NullCheckpointStore, NullTraceStore, RejectionStore
from .traces import STALE_POLICIES, StratifiedSampler, TraceSource, redact_trace, render_attempts_block, stale_split

__all__ = [
    "AUTO",
    "EVOLVE_MODES",
    "STOP_REASONS",
    "Evaluator",
    "EvolveConfig",
    "IterationReport",
    "RunReport",
    "evolve",
]

AUTO = "auto"
EVOLVE_MODES: tuple[str, ...] = (AUTO, *INCREMENTAL_MODES)
PERFECT, GATE_STOP, REJECTED_STREAK, MAX_ROUNDS, BUDGET_EXHAUSTED = (
    "perfect",
    "gate_stop",
    "rejected_streak",
    "max_rounds",
    "budget_exhausted",
)
STOP_REASONS: tuple[str, ...] = (PERFECT, GATE_STOP, REJECTED_STREAK, MAX_ROUNDS, BUDGET_EXHAUSTED)
BASELINE_FROM_CHECKPOINT = "baseline taken from the pending checkpoint"
SEED_ORIGINS = ("skeleton", "onboarded")


# -- configuration ---------------------------------------------------------------------------------------------------


def _integer(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"EvolveConfig.{name} must be an integer >= {minimum}, not {value!r}")
    return value


def _optional_integer(value: Any, name: str, minimum: int) -> int | None:
    return None if value is None else _integer(value, name, minimum)


def _one_of(value: Any, name: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"EvolveConfig.{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _check_mode(mode: Any) -> str:
    if mode in ONETIME_MODES:
        raise ValueError(
            f"mode {mode!r} is a one-time mode (one pass, no gate, no memory): use refine_once for it, "
            f"and evolve with one of {', '.join(EVOLVE_MODES)}"
        )
    return _one_of(mode, "mode", EVOLVE_MODES)


@dataclass(frozen=True)
class EvolveConfig:
    """Every knob of the loop (spec §6), validated at construction."""

    task_description: str = "tasks in this workspace"
    max_rounds: int = 10
    max_rejected_streak: int | None = None
    cycle_policy: str = "repair"
    mode: str = AUTO
    refiner_context_cap: int = 120_000
    token_counter: Callable[[str], int] | None = None
    rejections_full_entries: int = 5
    rejections_char_cap: int = 30_000
    refiner_max_tokens: int = 8192
    role_retries: int = 1
    failing_sample: int | None = None
    passing_sample: int | None = None
    stale_trace_policy: str = "warn"
    success_threshold: float = 0.5
    refiner_images: int = 0
    seed: int = 17
    workspace: str = "default"
    budget: Budget = field(default_factory=Budget)
    objective: ObjectiveSpec | None = None
    objective_context: ObjectiveContext | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.task_description, str) or not self.task_description.strip():
            raise ValueError("EvolveConfig.task_description must be a non-empty string")
        if not isinstance(self.workspace, str) or not self.workspace.strip():
            raise ValueError("EvolveConfig.workspace must be a non-empty string")
        _integer(self.max_rounds, "max_rounds", 0)
        _optional_integer(self.max_rejected_streak, "max_rejected_streak", 1)
        _one_of(self.cycle_policy, "cycle_policy", CYCLE_POLICIES)
        _check_mode(self.mode)
        _integer(self.refiner_context_cap, "refiner_context_cap", 1)
        if self.token_counter is not None and not callable(self.token_counter):
            raise ValueError("EvolveConfig.token_counter must be a callable text -> token count, or None")
        _integer(self.rejections_full_entries, "rejections_full_entries", 0)
        _integer(self.rejections_char_cap, "rejections_char_cap", 1)
        _integer(self.refiner_max_tokens, "refiner_max_tokens", 1)
        _integer(self.role_retries, "role_retries", 0)
        _optional_integer(self.failing_sample, "failing_sample", 0)
        _optional_integer(self.passing_sample, "passing_sample", 0)
        _one_of(self.stale_trace_policy, "stale_trace_policy", STALE_POLICIES)
        threshold = self.success_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"EvolveConfig.success_threshold must be a number in [0, 1], not {threshold!r}")
        _integer(self.refiner_images, "refiner_images", 0)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"EvolveConfig.seed must be an integer, not {self.seed!r}")
        if not isinstance(self.budget, Budget):
            raise ValueError(f"EvolveConfig.budget must be a Budget, not {type(self.budget).__name__}")
        self._check_objective()

    def _check_objective(self) -> None:
        if (self.objective is None) != (self.objective_context is None):
            raise ValueError("EvolveConfig.objective and objective_context must be set together")
        if self.objective is None:
            return
        if not isinstance(self.objective, ObjectiveSpec):
            raise ValueError(f"EvolveConfig.objective must be an ObjectiveSpec, not {type(self.objective).__name__}")
        if not isinstance(self.objective_context, ObjectiveContext):
            raise ValueError(
                "EvolveConfig.objective_context must be an ObjectiveContext, "
                f"not {type(self.objective_context).__name__}"
            )
        if self.objective_context.objective_digest != self.objective.digest:
            raise ValueError(
                "EvolveConfig.objective_context is bound to another objective: its objective_digest "
                f"{self.objective_context.objective_digest[:12]} is not {self.objective.digest[:12]}"
            )

    @property
    def objective_mode(self) -> bool:
        return self.objective is not None

    @property
    def samples(self) -> bool:
        return self.failing_sample is not None or self.passing_sample is not None

    def objective_binding(self) -> dict[str, Any] | None:
        """The objective and context digests plus both full documents, or None outside objective mode."""
        if self.objective is None or self.objective_context is None:
            return None
        return {
            "objective_digest": self.objective.digest,
            "context_digest": self.objective_context.digest,
            "objective": self.objective.to_document(),
            "objective_context": self.objective_context.to_document(),
        }


class Evaluator(Protocol):
    """Measures a graph on the validation set. `ref` is the host's name for the graph; the baseline is iteration 0."""

    def evaluate(self, ref: str | None, graph: Graph, *, iteration: int, purpose: str) -> Evaluation: ...


# -- reports ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IterationReport:
    """One round as the caller sees it."""

    iteration: int
    outcome: str
    trace_ids: tuple[str, ...] = ()
    stale_trace_ids: tuple[str, ...] = ()
    edits: Mapping[str, Any] | None = None
    candidate_digest: str | None = None
    evaluation: Mapping[str, Any] | None = None
    diagnostics: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    graph_ref: str | None = None
    rejections_ref: str | None = None
    resumed: bool = False
    decision: Mapping[str, Any] | None = None
    duplicate_of: int | None = None
    mode: str | None = None

    @property
    def disposition(self) -> str | None:
        value = (self.decision or {}).get("disposition")
        return value if isinstance(value, str) else None

    def to_dict(self) -> dict[str, Any]:
        value = {
            "iteration": self.iteration,
            "outcome": self.outcome,
            "trace_ids": list(self.trace_ids),
            "stale_trace_ids": list(self.stale_trace_ids),
            "edits": dict(self.edits) if self.edits is not None else None,
            "candidate_digest": self.candidate_digest,
            "evaluation": dict(self.evaluation) if self.evaluation is not None else None,
            "diagnostics": [dict(item) for item in self.diagnostics],
            "warnings": list(self.warnings),
            "graph_ref": self.graph_ref,
            "rejections_ref": self.rejections_ref,
            "resumed": self.resumed,
            "duplicate_of": self.duplicate_of,
            "mode": self.mode,
        }
        if self.decision is not None:
            value["decision"] = dict(self.decision)
        return value


@dataclass(frozen=True)
class RunReport:
    """What one `evolve` call did. `best` is None only when the baseline was never reached."""

    iterations: tuple[IterationReport, ...]
    graph_ref: str | None
    graph: Graph
    rejections_ref: str | None
    rejections: RejectionMemory
    best: Evaluation | None
    stopped_reason: str
    budget: Mapping[str, Any]
    warnings: tuple[str, ...] = ()
    model_calls: int = 0
    resumed_iteration: int | None = None

    @property
    def accepted(self) -> int:
        return sum(1 for report in self.iterations if report.outcome == ACCEPTED)

    def outcomes(self) -> list[str]:
        return [report.outcome for report in self.iterations]

    def to_dict(self) -> dict[str, Any]:
        return {
            "iterations": [report.to_dict() for report in self.iterations],
            "outcomes": self.outcomes(),
            "accepted": self.accepted,
            "graph_ref": self.graph_ref,
            "graph": {"nodes": len(self.graph.nodes), "edges": len(self.graph.edges), "digest": self.graph.digest},
            "rejections_ref": self.rejections_ref,
            "rejections": {"iteration": self.rejections.iteration, "counts": self.rejections.counts()},
            "best": self.best.short() if self.best is not None else None,
            "stopped_reason": self.stopped_reason,
            "budget": dict(self.budget),
            "warnings": list(self.warnings),
            "model_calls": self.model_calls,
            "resumed_iteration": self.resumed_iteration,
        }


# -- one round's working state ---------------------------------------------------------------------------------------


@dataclass
class _Proposal:
    """What the refiner produced for a round (checkpoint #1), fresh or read back from a pending checkpoint."""

    edits: EditSet | None
    candidate: Graph | None
    diagnostics: list[Diagnostic]
    trace_ids: list[str]
    trace_scores: dict[str, float]
    stale_ids: list[str]
    mode: str
    base_ref: str | None
    payload: dict[str, Any]


@dataclass
class _Verdict:
    """How a round ended, before it is recorded."""

    outcome: str
    candidate: Graph | None = None
    candidate_digest: str | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    evaluation: Evaluation | None = None
    retained_score: float | None = None
    decision: Decision | None = None
    duplicate_of: int | None = None
    baseline_ref: str | None = None
    candidate_ref: str | None = None


def _is_pending(payload: Mapping[str, Any] | None) -> bool:
    return isinstance(payload, Mapping) and not payload.get("completed") and "edits" in payload


def _accept_landed(payload: Mapping[str, Any] | None, head: Graph, head_ref: str | None) -> bool:
    """The pending round's candidate is already the head: the acceptance landed before the crash."""
    return (
        payload is not None
        and payload.get("evaluation") is not None
        and payload.get("host_candidate_digest") == head.digest
        and payload.get("graph_ref") != head_ref
    )


def _edits_document(edits: EditSet | None, graph: Graph) -> dict[str, Any] | None:
    return edits.to_dict(graph.attribute_fields) if edits is not None else None


# -- the loop --------------------------------------------------------------------------------------------------------


class _Evolution:
    """One `evolve` call: startup, then rounds until a stop rule fires."""

    def __init__(
        self,
        *,
        config: EvolveConfig,
        model: Any,
        graph_store: GraphStore,
        rejection_store: RejectionStore,
        trace_source: TraceSource,
        evaluator: Evaluator,
        gate: Any,
        trace_store: Any,
        checkpoint_store: CheckpointStore | None,
        hooks: Hooks | None,
        available_tools: Sequence[str] | None,
        redact: Callable[[str], str] | None,
    ) -> None:
        if not isinstance(config, EvolveConfig):
            raise ValueError(f"config must be an EvolveConfig, not {type(config).__name__}")
        self.config = config
        self.graph_store = graph_store
        self.rejection_store = rejection_store
        self.trace_source = trace_source
        self.evaluator = evaluator
        self.trace_store = trace_store if trace_store is not None else NullTraceStore()
        self.checkpoints = checkpoint_store if checkpoint_store is not None else NullCheckpointStore()
        self.hooks = hooks if hooks is not None else Hooks()
        self.redact = redact
        self.warnings: list[str] = []
        self.binding = config.objective_binding()
        self.gate = self._choose_gate(gate)
        self.model = self._choose_meter(model)
        self.meter: Meter = self.model.meter
        self.calls_before = self.meter.model_calls
        self.refiner = Refiner(
            self.model,
            max_tokens=config.refiner_max_tokens,
            role_retries=config.role_retries,
            cycle_policy=config.cycle_policy,
            available_tools=available_tools,
        )
        self.head_ref: str | None = None
        self.head: Graph = skeleton()
        self.rejections_ref: str | None = None
        self.memory = RejectionMemory()
        self.best: Evaluation | None = None
        self.pending: dict[str, Any] | None = None
        self.sampler: StratifiedSampler | None = None
        self.iterations: list[IterationReport] = []
        self.streak = 0

    # -- startup -----------------------------------------------------------------------------------------------------

    def _choose_meter(self, model: Any) -> HookedModel:
        """Step 1: a HookedModel keeps its meter (adopting the config's budget when it has none); others are wrapped."""
        if isinstance(model, HookedModel):
            model.meter.adopt(self.config.budget)
            return model
        return HookedModel(model, Meter(self.config.budget), self.hooks)

    def _choose_gate(self, gate: Any) -> Any:
        """Step 2: the gate, checked against the config's objective binding in objective mode."""
        config = self.config
        if gate is None:
            if config.objective is not None and config.objective_context is not None:
                return ObjectiveGate(config.objective, config.objective_context)
            return TieAcceptingGate()
        if self.binding is None:
            return gate
        gate_objective = getattr(gate, "objective", None)
        gate_context = getattr(gate, "context", None)
        if gate_objective is None and gate_context is None:
            self.warn("the gate is not an objective gate: its decisions are not bound to the run's objective")
            return gate
        if gate_objective is not None and gate_objective.digest != self.binding["objective_digest"]:
            raise ValueError("the gate's objective digest differs from EvolveConfig.objective's")
        if gate_context is not None and gate_context.digest != self.binding["context_digest"]:
            raise ValueError("the gate's objective context digest differs from EvolveConfig.objective_context's")
        return gate

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        self.hooks.on_warning(message)

    def load_or_seed(self, initial_graph: Any) -> None:
        """Step 3: the head graph; an empty workspace is seeded from `initial_graph` before any model call."""
        ref, graph = self.graph_store.load()
        if ref is not None:
            if initial_graph is not None:
                raise ValueError(
                    f"workspace {self.config.workspace!r} already has a graph; initial_graph only seeds an empty one"
                )
            self.head_ref, self.head = ref, graph
            return
        seed, meta, notes = self._seed_graph(initial_graph)
        for note in notes:
            self.warn(str(note))
        self.graph_store.seed(seed, meta=meta)
        self.head_ref, self.head = self.graph_store.load()

    def _seed_graph(self, initial_graph: Any) -> tuple[Graph, dict[str, Any], list[Diagnostic]]:
        if initial_graph is None:
            return skeleton(), {"origin": "skeleton"}, []
        if isinstance(initial_graph, BootstrapResult):
            if not initial_graph.ok or initial_graph.graph is None:
                raise GraphError(initial_graph.diagnostics, initial_graph.refusal())
            notes = self._validated(initial_graph.graph)
            return initial_graph.graph, initial_graph.seed_meta(), notes
        if isinstance(initial_graph, Graph):
            notes = self._validated(initial_graph)
            return initial_graph, {"origin": _origin_of(initial_graph)}, notes
        if isinstance(initial_graph, Mapping | str | os.PathLike):
            graph, notes = Graph.from_human(initial_graph)
            notes = [*notes, *self._validated(graph)]
            return graph, {"origin": _origin_of(graph)}, list(dict.fromkeys(notes))
        raise ValueError(
            "initial_graph must be None, a Graph, a BootstrapResult, a dict or a path to a JSON file, "
            f"not {type(initial_graph).__name__}"
        )

    def _validated(self, graph: Graph) -> list[Diagnostic]:
        found = graph.validate(self.config.cycle_policy)
        failures = errors_in(found)
        if failures:
            raise GraphError(
                failures, "the initial graph fails the structural checks: " + "; ".join(map(str, failures))
            )
        return warnings_in(found)

    def load_memory_and_pending(self) -> int:
        """Steps 4–5: the rejection memory, the first iteration of this run and a pending checkpoint for it."""
        self.rejections_ref, self.memory = self.rejection_store.load()
        start = self.memory.iteration + 1
        payload = self.checkpoints.load(start)
        if _is_pending(payload):
            self._check_pending_binding(dict(payload), start)
            self.pending = dict(payload)
        self.sampler = self._restore_sampler(start)
        return start

    def _check_pending_binding(self, payload: Mapping[str, Any], iteration: int) -> None:
        recorded = payload.get("objective_binding")
        workspace = self.config.workspace
        if recorded is None and self.binding is None:
            return
        if recorded is None:
            raise ValueError(
                f"workspace {workspace!r}: the pending round {iteration} is bound to no objective, but this run is "
                "configured with an objective; finish that round without an objective first"
            )
        if self.binding is None:
            raise ValueError(
                f"workspace {workspace!r}: the pending round {iteration} is bound to objective "
                f"{str(recorded.get('objective_digest'))[:12]}, but this run is configured with no objective; "
                "resume it with the same objective and context"
            )
        for key in ("objective_digest", "context_digest"):
            if recorded.get(key) != self.binding[key]:
                raise ValueError(
                    f"workspace {workspace!r}: the pending round {iteration} is bound to another objective "
                    f"({key} {str(recorded.get(key))[:12]} is not {self.binding[key][:12]}); resume it with the "
                    "objective and context it was started with"
                )

    def _restore_sampler(self, start: int) -> StratifiedSampler | None:
        """The sampler with the state an uninterrupted run would have: from the pending round or the round before."""
        config = self.config
        if not config.samples:
            return None
        state = (self.pending or {}).get("sampler")
        if state is None:
            previous = self.checkpoints.load(start - 1) if start > 1 else None
            state = (previous or {}).get("sampler")
        seen = StratifiedSampler.from_document(state).seen if state else {}
        return StratifiedSampler(
            config.failing_sample, config.passing_sample, config.seed, config.success_threshold, seen=seen
        )

    def take_baseline(self, baseline: Evaluation | None) -> bool:
        """Step 6: S_0. False when the budget ran out before or during the baseline evaluation."""
        if _accept_landed(self.pending, self.head, self.head_ref):
            self.best = Evaluation.from_document(self.pending["evaluation"])
            self.warn(f"{BASELINE_FROM_CHECKPOINT}: the acceptance of its round landed before the interruption")
            return True
        if baseline is None:
            try:
                self.meter.check_evaluation("baseline")
                with self.hooks.stage("baseline"):
                    baseline = self.evaluator.evaluate(self.head_ref, self.head, iteration=0, purpose="baseline")
                self.meter.count_evaluation()
            except BudgetExceeded as exhausted:
                self.warn(str(exhausted))
                return False
        if self.binding is not None and baseline.ref != self.head_ref:
            raise ValueError(
                f"baseline Evaluation.ref {baseline.ref!r} is not the head ref {self.head_ref!r}: in objective mode "
                "the evaluator must name the graph it was asked to measure"
            )
        self.best = baseline
        return True

    def perfect_already(self) -> bool:
        """Step 7: the perfect-score probe, when nothing is pending."""
        return self.pending is None and self._probe_stops()

    def _probe_stops(self) -> bool:
        return bool(self.best is not None and self.gate.decide(self.best, self.best).stop)

    # -- rounds ------------------------------------------------------------------------------------------------------

    def run_rounds(self, start: int) -> str:
        for iteration in range(start, start + self.config.max_rounds):
            pending = self.pending if iteration == start else None
            try:
                self.meter.check("iteration")
                report, decision = self.run_round(iteration, pending)
            except BudgetExceeded as exhausted:
                self.warn(f"round {iteration} abandoned: {exhausted}")
                return BUDGET_EXHAUSTED
            reason = self._stop_reason(report, decision)
            if reason is not None:
                return reason
        return MAX_ROUNDS

    def _stop_reason(self, report: IterationReport, decision: Decision | None) -> str | None:
        """Step 7, in order: perfect after an acceptance, the gate's stop, the rejected streak."""
        if report.outcome == ACCEPTED and self._probe_stops():
            return PERFECT
        if decision is not None and decision.stop:
            return GATE_STOP
        limit = self.config.max_rejected_streak
        if limit is not None and self.streak >= limit:
            return REJECTED_STREAK
        return None

    def run_round(self, iteration: int, pending: dict[str, Any] | None) -> tuple[IterationReport, Decision | None]:
        round_warnings: list[str] = []
        proposal = self._proposal_from(pending) if pending is not None else self._propose(iteration, round_warnings)
        verdict = self._classify(iteration, proposal, pending, round_warnings)
        self._persist(iteration, proposal, verdict)
        self.streak = 0 if verdict.outcome == ACCEPTED else self.streak + 1
        report = self._report(iteration, proposal, verdict, round_warnings, resumed=pending is not None)
        self.iterations.append(report)
        self.hooks.on_iteration(report)
        return report, verdict.decision

    def _round_warning(self, message: str, round_warnings: list[str]) -> None:
        round_warnings.append(message)
        self.warn(message)

    # -- step 2: rollout, sampling, refiner, checkpoint #1 ------------------------------------------------------------

    def _propose(self, iteration: int, round_warnings: list[str]) -> _Proposal:
        config = self.config
        with self.hooks.stage(f"rollout:{iteration}"):
            traces = list(self.trace_source.collect(self.head, graph_ref=self.head_ref, iteration=iteration))
        if self.redact is not None:
            traces = [redact_trace(trace, self.redact) for trace in traces]
        kept, stale_ids, stale_warnings = stale_split(traces, self.head_ref, config.stale_trace_policy)
        for message in stale_warnings:
            self._round_warning(message, round_warnings)
        self.trace_store.put(kept, iteration=iteration)
        shown = self.sampler.sample(kept, iteration) if self.sampler is not None else kept
        result = self._refine(iteration, shown, stale_ids)
        for message in result.warnings:
            self._round_warning(message, round_warnings)
        proposal = _Proposal(
            edits=result.edits,
            candidate=result.candidate,
            diagnostics=list(result.diagnostics),
            trace_ids=[trace.id for trace in shown],
            trace_scores={trace.id: trace.score for trace in shown},
            stale_ids=list(stale_ids),
            mode=result.mode,
            base_ref=self.head_ref,
            payload={},
        )
        proposal.payload = self._first_checkpoint(proposal)
        self.checkpoints.save(iteration, proposal.payload)
        return proposal

    def _refine(self, iteration: int, shown: Sequence[Trace], stale_ids: Sequence[str]) -> RefinerResult:
        config = self.config
        attempts_block = render_attempts_block(
            shown,
            success_threshold=config.success_threshold,
            char_cap=config.refiner_context_cap,
            token_counter=config.token_counter,
            stale_ids=stale_ids,
        )
        rejections_block = self.memory.render_for_refiner(
            full_entries=config.rejections_full_entries,
            char_cap=config.rejections_char_cap,
            objective_summary=config.objective.summary() if config.objective is not None else None,
        )
        mode = auto_mode(self.head) if config.mode == AUTO else config.mode
        with self.hooks.stage(f"refiner:{iteration}"):
            return self.refiner.propose(
                self.head,
                task_description=config.task_description,
                mode=mode,
                attempts_block=attempts_block,
                rejections_block=rejections_block,
            )

    def _first_checkpoint(self, proposal: _Proposal) -> dict[str, Any]:
        """Checkpoint #1: everything the refiner produced and what it was shown."""
        candidate = proposal.candidate
        payload: dict[str, Any] = {
            "edits": _edits_document(proposal.edits, self.head),
            "candidate": candidate.to_document() if candidate is not None else None,
            "candidate_digest": candidate.digest if candidate is not None else None,
            "diagnostics": [diagnostic.to_dict() for diagnostic in proposal.diagnostics],
            "rejections_ref": self.rejections_ref,
            "graph_ref": self.head_ref,
            "trace_ids": list(proposal.trace_ids),
            "trace_scores": dict(proposal.trace_scores),
            "stale_trace_ids": list(proposal.stale_ids),
            "mode": proposal.mode,
        }
        if self.binding is not None:
            payload["objective_binding"] = self.binding
        if self.sampler is not None:
            payload["sampler"] = self.sampler.to_document()
        return payload

    def _proposal_from(self, payload: dict[str, Any]) -> _Proposal:
        """A pending round's checkpoint read back: the refiner is not asked again."""
        edits = None
        if payload.get("edits") is not None:
            edits, problems = edit_set_from_dict(payload["edits"], self.head.attribute_fields)
            if edits is None:
                raise ValueError(f"the pending checkpoint's edits do not load: {'; '.join(map(str, problems))}")
        candidate = Graph.from_document(payload["candidate"]) if payload.get("candidate") is not None else None
        return _Proposal(
            edits=edits,
            candidate=candidate,
            diagnostics=[Diagnostic.from_dict(item) for item in payload.get("diagnostics") or ()],
            trace_ids=list(payload.get("trace_ids") or ()),
            trace_scores=dict(payload.get("trace_scores") or {}),
            stale_ids=list(payload.get("stale_trace_ids") or ()),
            mode=str(payload.get("mode") or auto_mode(self.head)),
            base_ref=payload.get("graph_ref"),
            payload=dict(payload),
        )

    # -- step 3: outcome classification ------------------------------------------------------------------------------

    def _classify(
        self, iteration: int, proposal: _Proposal, pending: dict[str, Any] | None, round_warnings: list[str]
    ) -> _Verdict:
        if proposal.edits is None:
            return _Verdict(STRUCTURAL_FAILURE, diagnostics=proposal.diagnostics)
        if proposal.edits.is_empty:
            return _Verdict(NO_ACTION, diagnostics=proposal.diagnostics)
        if proposal.candidate is None:
            return _Verdict(STRUCTURAL_FAILURE, diagnostics=proposal.diagnostics)
        hosted = self._host(iteration, proposal, round_warnings)
        digest = hosted.graph.digest
        host_errors = errors_in(hosted.graph.validate(self.config.cycle_policy))
        if host_errors:
            diagnostics = [*proposal.diagnostics, *host_errors]
            return _Verdict(STRUCTURAL_FAILURE, hosted.graph, digest, diagnostics)
        if pending is not None and digest == self.head.digest and _accept_landed(pending, self.head, self.head_ref):
            return self._accepted_before(hosted, proposal, pending)
        duplicate = self._duplicate(hosted, proposal, round_warnings)
        if duplicate is not None:
            return duplicate
        return self._measure_and_gate(iteration, hosted, proposal, pending)

    def _host(self, iteration: int, proposal: _Proposal, round_warnings: list[str]) -> Candidate:
        """Step 3.1: the host's materialised candidate is canonical; a difference is warned about once."""
        assert proposal.edits is not None and proposal.candidate is not None
        hosted = self.graph_store.propose(
            self.head_ref,
            self.head,
            proposal.edits,
            proposal.candidate,
            iteration=iteration,
            rejections_ref=self.rejections_ref,
        )
        module = proposal.candidate
        if hosted.graph.digest != module.digest:
            self._round_warning(
                "host materialised a candidate that differs from the module's "
                f"({len(hosted.graph.nodes)} nodes, {len(hosted.graph.edges)} edges against "
                f"{len(module.nodes)} nodes, {len(module.edges)} edges); continuing with the host's graph "
                f"{hosted.graph.digest[:12]}",
                round_warnings,
            )
        return hosted

    def _duplicate(self, hosted: Candidate, proposal: _Proposal, round_warnings: list[str]) -> _Verdict | None:
        """Step 3.4: refuse the head's digest, or that of an earlier measured rejection or structural failure."""
        digest = hosted.graph.digest
        if digest == self.head.digest:
            self._round_warning("duplicate candidate: identical to the current head graph", round_warnings)
            return _Verdict(DUPLICATE_CANDIDATE, hosted.graph, digest, proposal.diagnostics)
        earlier = self.memory.rejected_digests().get(digest)
        if earlier is None:
            return None
        self._round_warning(f"duplicate candidate: identical to the candidate of iteration {earlier}", round_warnings)
        return _Verdict(DUPLICATE_CANDIDATE, hosted.graph, digest, proposal.diagnostics, duplicate_of=earlier)

    def _accepted_before(self, hosted: Candidate, proposal: _Proposal, pending: Mapping[str, Any]) -> _Verdict:
        """Step 3.3: the acceptance landed before the crash; record it from the checkpoint, without accepting again."""
        baseline = pending.get("baseline_evaluation")
        retained = Evaluation.from_document(baseline).score if baseline is not None else None
        decision = Decision.from_document(pending["decision"]) if pending.get("decision") is not None else None
        return _Verdict(
            ACCEPTED,
            hosted.graph,
            hosted.graph.digest,
            proposal.diagnostics,
            evaluation=Evaluation.from_document(pending["evaluation"]),
            retained_score=retained,
            decision=decision,
            baseline_ref=pending.get("baseline_ref"),
            candidate_ref=pending.get("host_ref", hosted.ref),
        )

    def _measure_and_gate(
        self, iteration: int, hosted: Candidate, proposal: _Proposal, pending: Mapping[str, Any] | None
    ) -> _Verdict:
        """Steps 3.5–3.7: validate (or reuse the cached evaluation), gate (or reuse the decision), accept."""
        assert self.best is not None
        baseline = self.best
        baseline_ref = self.head_ref
        evaluation = self._evaluation(iteration, hosted, proposal, pending)
        decision = self._decision(iteration, evaluation, proposal, pending)
        verdict = _Verdict(
            ACCEPTED if decision.accepted else REJECTED,
            hosted.graph,
            hosted.graph.digest,
            proposal.diagnostics,
            evaluation=evaluation,
            retained_score=baseline.score,
            decision=decision,
            baseline_ref=baseline_ref,
            candidate_ref=hosted.ref,
        )
        if decision.accepted:
            self._accept(iteration, hosted, verdict)
        return verdict

    def _evaluation(
        self, iteration: int, hosted: Candidate, proposal: _Proposal, pending: Mapping[str, Any] | None
    ) -> Evaluation:
        cached = (pending or {}).get("evaluation")
        if cached is not None:
            evaluation = Evaluation.from_document(cached)
            if self.binding is not None and evaluation.ref != hosted.ref:
                raise ValueError(
                    f"REQ-004: the cached evaluation of round {iteration} measured {evaluation.ref!r}, but the host "
                    f"re-proposed the candidate as {hosted.ref!r}; a decision must compare the graph it names"
                )
            return evaluation
        assert self.best is not None
        self.meter.check_evaluation(f"validation:{iteration}")
        with self.hooks.stage(f"validation:{iteration}"):
            evaluation = self.evaluator.evaluate(hosted.ref, hosted.graph, iteration=iteration, purpose="candidate")
        self.meter.count_evaluation()
        if self.binding is not None and evaluation.ref != hosted.ref:
            raise ValueError(
                f"REQ-004: candidate Evaluation.ref {evaluation.ref!r} is not the host ref {hosted.ref!r}: in "
                "objective mode the evaluator must name the graph it was asked to measure"
            )
        proposal.payload = {
            **proposal.payload,
            "host_candidate_digest": hosted.graph.digest,
            "host_ref": hosted.ref,
            "evaluation": evaluation.to_document(),
            "baseline_evaluation": self.best.to_document(),
            "baseline_ref": self.head_ref,
        }
        self.checkpoints.save(iteration, proposal.payload)
        return evaluation

    def _decision(
        self, iteration: int, evaluation: Evaluation, proposal: _Proposal, pending: Mapping[str, Any] | None
    ) -> Decision:
        recorded = (pending or {}).get("decision")
        if recorded is not None:
            return Decision.from_document(recorded)
        assert self.best is not None
        decision = self.gate.decide(self.best, evaluation)
        proposal.payload = {**proposal.payload, "decision": decision.to_document()}
        self.checkpoints.save(iteration, proposal.payload)
        return decision

    def _accept(self, iteration: int, hosted: Candidate, verdict: _Verdict) -> None:
        """Step 3.7: the revision meta is set, the head moves, the candidate's evaluation becomes the best."""
        assert verdict.evaluation is not None and verdict.decision is not None
        meta = {
            **dict(hosted.meta),
            "validation_score": verdict.evaluation.score,
            "iteration": iteration,
            "baseline_ref": verdict.baseline_ref,
            "candidate_ref": verdict.candidate_ref,
        }
        if verdict.decision.feedback:
            meta["decision"] = dict(verdict.decision.feedback)
        self.head_ref = self.graph_store.accept(replace(hosted, meta=meta), expected_ref=self.head_ref)
        self.head = hosted.graph
        self.best = verdict.evaluation

    # -- step 5: persist -----------------------------------------------------------------------------------------------

    def _persist(self, iteration: int, proposal: _Proposal, verdict: _Verdict) -> None:
        """Exactly one memory entry and one save per round, then the checkpoint is marked completed."""
        decision = verdict.decision
        entry = RejectionEntry(
            iteration=iteration,
            kind=verdict.outcome,
            edits=proposal.payload.get("edits") or {},
            candidate=verdict.candidate.to_document() if verdict.candidate is not None else None,
            candidate_digest=verdict.candidate_digest,
            base_digest=proposal.base_ref,
            trace_ids=tuple(proposal.trace_ids),
            trace_scores=proposal.trace_scores,
            validation=verdict.evaluation,
            retained_score=verdict.retained_score,
            diagnostics=tuple(verdict.diagnostics),
            duplicate_of=verdict.duplicate_of,
            mode=proposal.mode,
            created_at=utc_now(),
            decision=dict(decision.feedback) if decision is not None else None,
            baseline_ref=verdict.baseline_ref,
            candidate_ref=verdict.candidate_ref,
        )
        self.memory = self.memory.append(entry)
        self.rejections_ref = self.rejection_store.save(
            self.memory, expected_ref=self.rejections_ref, iteration=iteration
        )
        completed: dict[str, Any] = {"completed": True}
        if self.sampler is not None:
            completed["sampler"] = self.sampler.to_document()
        self.checkpoints.save(iteration, completed)

    def _report(
        self,
        iteration: int,
        proposal: _Proposal,
        verdict: _Verdict,
        round_warnings: list[str],
        *,
        resumed: bool,
    ) -> IterationReport:
        decision = verdict.decision
        return IterationReport(
            iteration=iteration,
            outcome=verdict.outcome,
            trace_ids=tuple(proposal.trace_ids),
            stale_trace_ids=tuple(proposal.stale_ids),
            edits=proposal.payload.get("edits"),
            candidate_digest=verdict.candidate_digest,
            evaluation=verdict.evaluation.short() if verdict.evaluation is not None else None,
            diagnostics=tuple(diagnostic.to_dict() for diagnostic in verdict.diagnostics),
            warnings=tuple(round_warnings),
            graph_ref=self.head_ref,
            rejections_ref=self.rejections_ref,
            resumed=resumed,
            decision=dict(decision.feedback) if decision is not None else None,
            duplicate_of=verdict.duplicate_of,
            mode=proposal.mode,
        )

    # -- the report ----------------------------------------------------------------------------------------------------

    def report(self, stopped_reason: str, resumed_iteration: int | None) -> RunReport:
        return RunReport(
            iterations=tuple(self.iterations),
            graph_ref=self.head_ref,
            graph=self.head,
            rejections_ref=self.rejections_ref,
            rejections=self.memory,
            best=self.best,
            stopped_reason=stopped_reason,
            budget=self.meter.to_dict(),
            warnings=tuple(self.warnings),
            model_calls=self.meter.model_calls - self.calls_before,
            resumed_iteration=resumed_iteration,
        )


def _origin_of(graph: Graph) -> str:
    return "skeleton" if graph.is_skeleton else "onboarded"


def evolve(
    *,
    config: EvolveConfig,
    model: Any,
    graph_store: GraphStore,
    rejection_store: RejectionStore,
    trace_source: TraceSource,
    evaluator: Evaluator,
    gate: Any = None,
    trace_store: Any = None,
    checkpoint_store: CheckpointStore | None = None,
    hooks: Hooks | None = None,
    initial_graph: Any = None,
    baseline: Evaluation | None = None,
    available_tools: Sequence[str] | None = None,
    redact: Callable[[str], str] | None = None,
) -> RunReport:
    """Run up to `config.max_rounds` rounds of Algorithm 1 on the workspace's head graph (spec §6).

    `baseline`, when given, is S_0 and no baseline evaluation is made (the host measured it as its own step).
    `max_rounds=0` seeds or loads the graph, takes the baseline and returns.
    """
    run = _Evolution(
        config=config,
        model=model,
        graph_store=graph_store,
        rejection_store=rejection_store,
        trace_source=trace_source,
        evaluator=evaluator,
        gate=gate,
        trace_store=trace_store,
        checkpoint_store=checkpoint_store,
        hooks=hooks,
        available_tools=available_tools,
        redact=redact,
    )
    run.load_or_seed(initial_graph)
    start = run.load_memory_and_pending()
    resumed_iteration = start if run.pending is not None else None
    if not run.take_baseline(baseline):
        return run.report(BUDGET_EXHAUSTED, resumed_iteration)
    if run.perfect_already():
        return run.report(PERFECT, resumed_iteration)
    return run.report(run.run_rounds(start), resumed_iteration)
