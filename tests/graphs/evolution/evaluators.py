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


class EveryRoundANewCandidate:
    """Twenty tasks answered at once, the same scores for every graph (so the tie-accepting gate accepts every
    candidate), and twenty traces a round for the refiner: the shape of bench/evolve.py's rounds."""

    TASKS = 20
    available_tools = ("search", "read", "answer")

    def evaluate(self, ref, graph, *, iteration, purpose):
        outcomes = [TaskOutcome(f"t{i}", 1.0 if i % 5 else 0.0, bool(i % 5)) for i in range(self.TASKS)]
        return Evaluation.from_outcomes(ref, outcomes, {"purpose": purpose, "iteration": iteration})

    def collect(self, graph, *, graph_ref, iteration):
        from graphs.core.evaluation import Trace
        from graphs.core.guide import Step

        steps = (Step("search", {"q": "who"}, "2 hits"), Step("read", {"title": "A"}, "a fact"), Step("answer", "x"))
        return [
            Trace(
                f"it{iteration}-{i}",
                TaskOutcome(f"t{i}", 1.0 if i % 5 else 0.0, bool(i % 5)),
                steps=steps,
                graph_ref=graph_ref,
                nodes_visited=("Start", "search", "read", "answer"),
            )
            for i in range(self.TASKS)
        ]
