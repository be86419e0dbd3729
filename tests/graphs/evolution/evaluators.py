"""Python evaluators the tests name in settings.WAYMARK_GRAPH_EVALUATORS."""

from graphs.core.evaluation import Evaluation, TaskOutcome
from graphs.core.twohop import TOOLS, TwoHopEnvironment


class Exploding:
    """Measures the baseline, then fails for good on the first candidate."""

    def evaluate(self, ref, graph, *, iteration, purpose):
        if purpose == "candidate":
            raise RuntimeError("the evaluation cluster is on fire")
        return Evaluation.from_outcomes(ref, [TaskOutcome("t1", 0.5, False)], {"purpose": purpose})


class CancelsDuringEvaluation(TwoHopEnvironment):
    """The two-hop environment, but an operator cancels the run while its first candidate is measured."""

    available_tools = TOOLS

    def evaluate(self, ref, graph, *, iteration, purpose):
        if purpose == "candidate":
            from accounts.services import Actor
            from graphs.evolution.services import evolution_cancel
            from graphs.models import EvolutionRun

            evolution_cancel(actor=Actor.system(), run=EvolutionRun.objects.get(status="running"))
        return super().evaluate(ref, graph, iteration=iteration, purpose=purpose)


class Metrics:
    """2,000 independent units with two metrics: quality (0.9 once the graph has actions, else 0.7) and the number
    of transitions (fewer is cheaper). Says nothing about its context: the run declares it."""

    UNITS = 2000
    available_tools = TOOLS

    def evaluate(self, ref, graph, *, iteration, purpose):
        quality = 0.9 if len(graph.nodes) > 2 else 0.7
        edges = float(len(graph.edges))
        outcomes = [
            TaskOutcome(f"u{i}", quality, quality > 0.8, metrics={"quality": quality, "transitions": edges})
            for i in range(self.UNITS)
        ]
        return Evaluation.from_outcomes(ref, outcomes, {"purpose": purpose, "iteration": iteration})
