"""A small deterministic evaluator for the certification tests, whose pairs can be checked by hand.

Eight validation tasks t0..t7. Under a graph, task t<i> passes exactly when the graph has a node `skill<i>`; with no
graph at all the agent gets t0 and t1 right by itself. A pass scores 0.9, a failure 0.2. Every evaluation is
counted in `Skills.calls` as (purpose, graph digest or None).
"""

from __future__ import annotations

import itertools

from graphs.core import Graph
from graphs.core.evaluation import Evaluation, TaskOutcome, Trace

TASKS = 8
UNGUIDED = frozenset({0, 1})
PASS_SCORE, FAIL_SCORE = 0.9, 0.2
EVALUATORS = {"skills": "tests.graphs.skills.Skills"}


class Skills:
    evaluates_without_graph = True
    calls: list[tuple[str, str | None]] = []

    def passes(self, graph: Graph | None) -> set[int]:
        if graph is None:
            return set(UNGUIDED)
        names = set(graph.nodes)
        return {i for i in range(TASKS) if f"skill{i}" in names}

    def evaluate(self, ref, graph, *, iteration, purpose):
        Skills.calls.append((purpose, graph.digest if graph is not None else None))
        passing = self.passes(graph)
        outcomes = [
            TaskOutcome(f"t{i}", PASS_SCORE if i in passing else FAIL_SCORE, i in passing) for i in range(TASKS)
        ]
        return Evaluation.from_outcomes(ref, outcomes, {"purpose": purpose, "iteration": iteration})

    def collect(self, graph, *, graph_ref, iteration):
        passing = self.passes(graph)
        return [
            Trace(
                id=f"it{iteration}-t{i}",
                outcome=TaskOutcome(f"t{i}", PASS_SCORE if i in passing else FAIL_SCORE, i in passing),
                text=f"task {i}",
                graph_ref=graph_ref,
            )
            for i in range(TASKS)
        ]


class Blind(Skills):
    """The same tasks, but it cannot run an agent without a graph."""

    evaluates_without_graph = False


def skills_graph(*skills: int) -> dict:
    """A hand-written refiner-shape graph: Start → skill<a> → skill<b> → … → End."""
    ids = [f"skill{i}" for i in skills]
    nodes = [{"id": "Start", "type": "STATUS", "description": "Task start"}]
    nodes += [{"id": "End", "type": "STATUS", "description": "Task end"}]
    nodes += [{"id": name, "type": "ACTION", "description": f"use {name}"} for name in ids]
    path = ["Start", *ids, "End"]
    edges = [
        {"source": a, "target": b, "relation": "LEADS_TO", "guidance": f"go on to {b}"}
        for a, b in itertools.pairwise(path)
    ]
    return {"nodes": nodes, "edges": edges}
