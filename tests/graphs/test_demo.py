"""seed_demo adds the two-hop question-answering workspace once (skeleton #0, the five-node graph #1, active, and a
refinement #2 accepted by a real one-round evolution for the review demo) and the two-hop lab (the skeleton, ready to
evolve as spec §10 says)."""

import io

import pytest
from django.core.management import call_command

from accounts.services import Actor
from graphs.demo import LAB_SLUG
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_start
from graphs.models import EvolutionRun, Revision, Workspace
from reviews.models import PromotionRequest
from reviews.registry import get_kind

pytestmark = pytest.mark.django_db


def seed(settings, tmp_path) -> str:
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_demo_adds_the_two_hop_workspace_once(settings, tmp_path):
    text = seed(settings, tmp_path)
    assert "graphs: workspace two-hop-qa created, active revision #1" in text
    assert "graphs: workspace two-hop-qa already there, active revision #1" in text
    workspace = Workspace.objects.get(slug="two-hop-qa")
    assert workspace.task_description == "two-hop question answering over a small corpus"
    seqs = list(
        Revision.objects.filter(workspace=workspace, kind="graph").values_list("seq", flat=True).order_by("seq")
    )
    # #0 and #1 are the graphs demo; the reviews demo then measures a refinement (#2) for its open request.
    assert seqs == [0, 1, 2]
    assert Revision.objects.get(workspace=workspace, kind="graph", seq=1).meta["origin"] == "accepted"
    assert workspace.active_revision.seq == 1


def test_the_review_demo_candidate_carries_the_evaluation_that_accepted_it(settings, tmp_path):
    seed(settings, tmp_path)
    (run,) = EvolutionRun.objects.filter(workspace__slug="two-hop-qa")
    assert (run.status, run.rounds_done, run.evaluator) == ("succeeded", 1, "two-hop")
    (round_,) = run.rounds.all()
    assert round_.outcome == "accepted" and (round_.retained_score, round_.candidate_score) == (1.0, 1.0)
    request = PromotionRequest.objects.get(kind="graph_revision")
    assert request.candidate_id == str(round_.graph_revision_id)
    evidence = get_kind("graph_revision").gate_evidence(request.candidate_id)
    assert evidence.passing is True
    assert evidence.details["evolution_run"] == run.pk and evidence.details["validation_score"] == 1.0
    hand_written = Revision.objects.get(workspace__slug="two-hop-qa", kind="graph", seq=1)
    assert get_kind("graph_revision").gate_evidence(str(hand_written.pk)).passing is None


def test_the_lab_workspace_evolves_as_the_spec_says(settings, tmp_path, operator):
    text = seed(settings, tmp_path)
    assert f"workspace {LAB_SLUG} created (skeleton, ready to evolve)" in text
    lab = Workspace.objects.get(slug=LAB_SLUG)
    assert lab.active_revision.seq == 0 and lab.active_revision.origin == "skeleton"
    run = run_inline(
        evolution_start(actor=Actor(user=operator), workspace=lab, rounds=4, evaluator="two-hop", enqueue=False)
    )
    assert list(run.rounds.values_list("outcome", flat=True)) == [
        "accepted",
        "structural_failure",
        "rejected",
        "duplicate_candidate",
    ]
