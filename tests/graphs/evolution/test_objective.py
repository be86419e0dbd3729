"""An evolution run under an ObjectiveGate, started from the page's documents: decisions are measured with paired
Hoeffding intervals per metric, recorded with their disposition, and shown as decision lines."""

import json

import pytest
from django.urls import reverse

from accounts.services import Actor
from graphs.core.objectives import ObjectiveSpec
from graphs.evolution.demo import run_inline
from graphs.evolution.forms import StartRunForm
from graphs.evolution.services import EvolutionRefused, evolution_start
from graphs.models import EvolutionRun
from graphs.services import workspace_create
from tests.conftest import logged_in

from .evaluators import Metrics

pytestmark = pytest.mark.django_db
OBJECTIVE = {
    "metrics": [
        {
            "name": "quality",
            "unit": "score",
            "direction": "maximize",
            "lower_bound": 0,
            "upper_bound": 1,
            "min_improvement": 0.02,
            "equivalence_margin": 0.1,
            "non_regression_margin": 0.1,
        },
        {
            "name": "transitions",
            "unit": "edges",
            "direction": "minimize",
            "lower_bound": 0,
            "upper_bound": 10,
            "min_improvement": 0.2,
            "equivalence_margin": 1,
            "non_regression_margin": 1,
        },
    ],
    "mode": "lexicographic",
}
CONTEXT = {
    "evaluation_design": "all units every round",
    "evaluator_version": "metrics-1",
    "cohort": "synthetic",
    "budget_profile": "default",
    "evidence_partition": "validation",
    "expected_task_ids": [f"u{i}" for i in range(Metrics.UNITS)],
    "measurement_basis": {"quality": "exact match", "transitions": "graph edges"},
}


@pytest.fixture
def lab(settings):
    settings.WAYMARK_GRAPH_EVALUATORS = {"metrics": "tests.graphs.evolution.evaluators.Metrics"}
    return workspace_create(actor=Actor.system(), slug="lab", task_description="two-hop").workspace


def gate() -> dict:
    digest = ObjectiveSpec.from_document(OBJECTIVE).digest
    return {"kind": "objective", "objective": OBJECTIVE, "context": {**CONTEXT, "objective_digest": digest}}


def test_an_objective_run_records_each_decision_with_its_disposition(lab, operator):
    from graphs.core.twohop import SCRIPTED_REPLIES

    run = evolution_start(
        actor=Actor(user=operator),
        workspace=lab,
        rounds=3,
        evaluator="metrics",
        gate=gate(),
        script=list(SCRIPTED_REPLIES),
        config={"cycle_policy": "allow"},
        enqueue=False,
    )
    run = run_inline(run)
    assert run.status == EvolutionRun.Status.SUCCEEDED, run.error
    rounds = list(run.rounds.order_by("iteration"))
    # Round 1 builds the graph: quality 0.7 → 0.9 is a decisive improvement.
    assert (rounds[0].outcome, rounds[0].disposition) == ("accepted", "accepted")
    assert rounds[0].decision["decisive_metric"] == "quality"
    assert rounds[1].outcome == "structural_failure"
    # Round 3 drops one transition: quality equivalent, then one edge fewer is an improvement (L ≈ 0.34 > g = 0.2).
    assert (rounds[2].outcome, rounds[2].disposition) == ("accepted", "accepted")
    assert rounds[2].decision["decisive_metric"] == "transitions"
    page = logged_in(operator).get(reverse("graphs:evolution_round", args=["lab", run.pk, 3])).content.decode()
    assert "transitions" in page and "positive = better" in page


def test_a_context_bound_to_another_objective_is_refused(lab, operator):
    bad = gate()
    bad["context"]["objective_digest"] = "0" * 64
    with pytest.raises(EvolutionRefused, match="objective"):
        evolution_start(actor=Actor(user=operator), workspace=lab, rounds=1, evaluator="metrics", gate=bad)
    assert EvolutionRun.objects.count() == 0


def test_the_start_form_fills_in_the_objective_digest_and_refuses_bad_documents(lab):
    form = StartRunForm(
        {
            "rounds": 2,
            "evaluator": "two-hop",
            "gate": "objective",
            "objective": json.dumps(OBJECTIVE),
            "context": json.dumps(CONTEXT),
        }
    )
    assert form.is_valid(), form.errors
    built = form.start_arguments()["gate"]
    assert built["context"]["objective_digest"] == ObjectiveSpec.from_document(OBJECTIVE).digest
    broken = StartRunForm({"rounds": 2, "evaluator": "two-hop", "gate": "objective", "objective": "{", "context": ""})
    assert not broken.is_valid()
    assert "not JSON" in str(broken.errors["objective"]) and "needs this document" in str(broken.errors["context"])
    stray = StartRunForm({"rounds": 2, "evaluator": "two-hop", "gate": "tie", "objective": json.dumps(OBJECTIVE)})
    assert not stray.is_valid() and "objective gate only" in str(stray.errors["objective"])
