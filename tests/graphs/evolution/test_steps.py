"""Evolution runs in process: the spec §10 scenario through the run's steps, on the project's revision chains."""

import pytest

from accounts.services import Actor
from graphs.core.rejections import RejectionMemory
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_start
from graphs.evolution.stores import memory_document
from graphs.models import EvolutionRun, Revision
from graphs.services import workspace_create
from llm.models import ModelCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lab():
    return workspace_create(
        actor=Actor.system(), slug="lab", task_description="two-hop question answering over a small corpus"
    ).workspace


def test_the_scripted_scenario_ends_as_the_spec_says(lab, operator, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    run = evolution_start(actor=Actor(user=operator), workspace=lab, rounds=4, evaluator="two-hop", enqueue=False)
    run = run_inline(run)

    assert run.status == EvolutionRun.Status.SUCCEEDED, run.error
    assert run.stopped_reason == "max_rounds"
    outcomes = list(run.rounds.order_by("iteration").values_list("outcome", flat=True))
    assert outcomes == ["accepted", "structural_failure", "rejected", "duplicate_candidate"]
    assert run.baseline_score == 0.5 and run.best_score == 1.0
    assert run.meter["evaluations"] == 3
    assert ModelCall.objects.filter(role="refiner").count() == 4
    graphs = list(Revision.objects.filter(workspace=lab, kind="graph").order_by("seq"))
    assert [g.meta["origin"] for g in graphs] == ["skeleton", "accepted"]
    assert graphs[1].meta["validation_score"] == 1.0 and graphs[1].meta["iteration"] == 1
    assert sorted(n["id"] for n in graphs[1].document["nodes"]) == ["End", "Start", "answer", "read", "search"]
    assert len(graphs[1].document["edges"]) == 5
    rejections = list(Revision.objects.filter(workspace=lab, kind="rejections").order_by("seq"))
    assert len(rejections) == 4
    memory = RejectionMemory.from_document(memory_document(rejections[-1]))
    assert memory.entries[3].duplicate_of == 3
    assert memory.entries[0].retained_score == 0.5
    round_ = run.rounds.get(iteration=1)
    assert round_.graph_revision_id == graphs[1].pk and round_.model_calls == 1
