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
