"""Demo evolution: seed_demo measures the refinement reviewers see in the queue by running a real one-round
evolution in process (the two-hop environment and a scripted refiner reply), so its gate evidence is the evaluation
that accepted it, not a number written by hand, and its certificate pairs that round's two evaluations (the retained
graph is the active one: graphs.certification_services)."""

from __future__ import annotations

import json

from accounts.services import Actor

from ..models import EvolutionRun, Workspace
from .services import evolution_start, evolution_step

# Revise the read→answer edge (delete the pair, add it again) with a pitfall about two-hop questions.
DEMO_REFINEMENT = json.dumps(
    {
        "add_nodes": [],
        "delete_nodes": [],
        "delete_edges": [{"source": "read", "target": "answer"}],
        "add_edges": [
            {
                "source": "read",
                "target": "answer",
                "relation": "LEADS_TO",
                "condition": "the document you read answers the question",
                "guidance": "Answer with the fact of the document you read last.",
                "pitfalls": "A first-hop fact does not answer a two-hop question: check the bridge was followed.",
            }
        ],
    },
    indent=1,
)


def run_inline(run: EvolutionRun, *, worker: str = "seed_demo", max_steps: int = 200) -> EvolutionRun:
    """Run every step of `run` in this process (seeding, commands with --wait, tests)."""
    for _ in range(max_steps):
        run.refresh_from_db()
        if run.is_finished:
            return run
        evolution_step(run_id=run.pk, worker=worker)
    run.refresh_from_db()
    return run


def demo_refinement(*, actor: Actor, workspace: Workspace) -> EvolutionRun:
    """One measured round on `workspace` that accepts DEMO_REFINEMENT (a tie at 1.0 is accepted)."""
    run = evolution_start(
        actor=actor,
        workspace=workspace,
        rounds=1,
        evaluator="two-hop",
        script=[DEMO_REFINEMENT],
        enqueue=False,
    )
    return run_inline(run)
