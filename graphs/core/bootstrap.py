"""The one-time construction modes (spec §6): `refine_once` and `bootstrap_graph`.

Both run the Refiner once (plus its retries) with no store, no gate and no rejection memory. `bootstrap_graph` builds
a first graph from a problem statement, worked solutions and/or a tool list, starting from the Start→End skeleton; the
result is a starting point that the first evolve run measures as its baseline, not a validated graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm.core import ChatModel

from .diagnostics import Diagnostic, errors_in
from .edits import EditSet, no_action
from .evaluation import TaskOutcome, Trace
from .graph import Graph
from .refiner import (
    DEFAULT_MAX_TOKENS,
    ONETIME_MODES,
    SCRATCH_ONETIME,
    Refiner,
    RefinerResult,
    auto_mode,
    check_mode,
    clean_tool_names,
)

ONETIME_REJECTIONS_PLACEHOLDER = "(none: one-time mode)"
NO_SOLUTIONS_SENTENCE = (
    "(no worked solutions are available) Design the procedure from the task context and the available tool "
    "actions: decide which tools to call in which order, where a decision or a check belongs, and how to finish."
)
BOOTSTRAPPED = "bootstrapped"
NETS_TO_SKELETON = "the edits leave only the Start→End skeleton"


def _attempts_block(
    traces: Sequence[Trace], attempts_block: str | None, *, success_threshold: float, char_cap: int
) -> str:
    """C_k: the given block, or the traces rendered by traces.render_attempts_block (imported when needed)."""
    if attempts_block is not None:
        return attempts_block
    from .traces import render_attempts_block

    return render_attempts_block(list(traces), success_threshold=success_threshold, char_cap=char_cap)


def run_onetime_refiner(
    *,
    task_description: str,
    model: ChatModel,
    graph: Graph,
    traces: Sequence[Trace] = (),
    available_tools: Sequence[str] | None = None,
    mode: str | None = None,
    attempts_block: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    role_retries: int = 1,
    cycle_policy: str = "repair",
    success_threshold: float = 0.5,
    char_cap: int = 120_000,
) -> RefinerResult:
    """`refine_once` with the whole RefinerResult (model calls, retries, replies)."""
    mode = check_mode(auto_mode(graph, incremental=False) if mode is None else mode, ONETIME_MODES)
    refiner = Refiner(
        model,
        max_tokens=max_tokens,
        role_retries=role_retries,
        cycle_policy=cycle_policy,
        available_tools=available_tools,
    )
    block = _attempts_block(traces, attempts_block, success_threshold=success_threshold, char_cap=char_cap)
    return refiner.propose(
        graph,
        task_description=task_description,
        mode=mode,
        attempts_block=block,
        rejections_block=ONETIME_REJECTIONS_PLACEHOLDER,
    )


def refine_once(
    *,
    config_task_description: str,
    model: ChatModel,
    graph: Graph,
    traces: Sequence[Trace] = (),
    available_tools: Sequence[str] | None = None,
    mode: str | None = None,
    attempts_block: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    role_retries: int = 1,
    cycle_policy: str = "repair",
    success_threshold: float = 0.5,
    char_cap: int = 120_000,
) -> tuple[Graph | None, EditSet | None, list[Diagnostic]]:
    """One refiner pass in a one-time mode → (candidate or None, edits or None, diagnostics). No store, no gate.

    The mode defaults to scratch_onetime on the skeleton and static_onetime otherwise; an incremental mode raises.
    """
    result = run_onetime_refiner(
        task_description=config_task_description,
        model=model,
        graph=graph,
        traces=traces,
        available_tools=available_tools,
        mode=mode,
        attempts_block=attempts_block,
        max_tokens=max_tokens,
        role_retries=role_retries,
        cycle_policy=cycle_policy,
        success_threshold=success_threshold,
        char_cap=char_cap,
    )
    return result.candidate, result.edits, result.diagnostics


# -- bootstrap ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BootstrapResult:
    """A bootstrapped first graph (None when refused), the edits behind it and how it was made."""

    graph: Graph | None
    edits: EditSet | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    solutions: int = 0
    mode: str = SCRATCH_ONETIME
    refiner_calls: int = 0

    @property
    def ok(self) -> bool:
        return self.graph is not None

    def refusal(self) -> str:
        """Why no graph was made: "bootstrap refused: " and the error diagnostics."""
        reasons = errors_in(self.diagnostics) or self.diagnostics
        detail = "; ".join(str(diagnostic) for diagnostic in reasons) or "the refiner produced no candidate"
        return f"bootstrap refused: {detail}"

    def seed_meta(self) -> dict[str, Any]:
        return {
            "origin": BOOTSTRAPPED,
            "solutions": self.solutions,
            "mode": self.mode,
            "refiner_calls": self.refiner_calls,
        }


def solution_traces(solutions: Sequence[str]) -> list[Trace]:
    """Each non-empty worked solution as a passing trace `solution-N` (score 1.0) whose text is the solution."""
    if isinstance(solutions, str):
        raise ValueError("solutions is a list of texts, not one string")
    texts = []
    for solution in solutions:
        if not isinstance(solution, str):
            raise ValueError(f"a worked solution must be text, not {type(solution).__name__}")
        if solution.strip():
            texts.append(solution)
    return [_solution_trace(number, text) for number, text in enumerate(texts, start=1)]


def _solution_trace(number: int, text: str) -> Trace:
    trace_id = f"solution-{number}"
    return Trace(id=trace_id, outcome=TaskOutcome(task_id=trace_id, score=1.0, passed=True), text=text)


def _refusal_diagnostics(result: RefinerResult) -> list[Diagnostic]:
    """The diagnostics plus `no_action` when the edits are empty or net back to the skeleton."""
    diagnostics = list(result.diagnostics)
    if result.no_action:
        diagnostics.append(no_action())
    elif result.candidate is not None and result.candidate.is_skeleton:
        diagnostics.append(no_action(NETS_TO_SKELETON))
    return diagnostics


def bootstrap_graph(
    problem_statement: str,
    model: ChatModel,
    *,
    solutions: Sequence[str] = (),
    tools: Sequence[str] | None = None,
    vocabulary: Mapping[str, Any] | None = None,
    cycle_policy: str = "repair",
    role_retries: int = 1,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> BootstrapResult:
    """A first graph built by the refiner in scratch_onetime from the skeleton; see BootstrapResult.ok/refusal()."""
    if not isinstance(problem_statement, str) or not problem_statement.strip():
        raise ValueError("bootstrap_graph needs a non-empty problem statement")
    traces = solution_traces(solutions)
    tool_names = clean_tool_names(tools)
    if not traces and tool_names is None:
        raise ValueError("bootstrap_graph needs the tool list when no worked solution is given")
    result = run_onetime_refiner(
        task_description=problem_statement.strip(),
        model=model,
        graph=Graph.skeleton(**dict(vocabulary or {})),
        traces=traces,
        available_tools=tool_names,
        mode=SCRATCH_ONETIME,
        attempts_block=None if traces else NO_SOLUTIONS_SENTENCE,
        max_tokens=max_tokens,
        role_retries=role_retries,
        cycle_policy=cycle_policy,
    )
    diagnostics = _refusal_diagnostics(result)
    graph = result.candidate if not errors_in(diagnostics) else None
    return BootstrapResult(
        graph=graph,
        edits=result.edits,
        diagnostics=diagnostics,
        solutions=len(traces),
        mode=result.mode,
        refiner_calls=result.model_calls,
    )
