"""Spec §10: the scripted two-hop scenario end to end, on MemoryRevisionStore with every layer store in use."""

import pytest

from graphs.core.evolve import EvolveConfig, evolve
from graphs.core.stores import (
    MemoryRevisionStore,
    RevisionCheckpointStore,
    RevisionGraphStore,
    RevisionRejectionStore,
    RevisionTraceStore,
)
from graphs.core.twohop import SCRIPTED_REPLIES, TASK_DESCRIPTION, TOOLS, TwoHopEnvironment
from llm.core import ScriptedChatModel

WORKSPACE = "toy"


@pytest.fixture(scope="module")
def scenario():
    revisions = MemoryRevisionStore()
    environment = TwoHopEnvironment()
    model = ScriptedChatModel(SCRIPTED_REPLIES)
    config = EvolveConfig(
        task_description=TASK_DESCRIPTION, max_rounds=4, role_retries=0, cycle_policy="allow", workspace=WORKSPACE
    )
    report = evolve(
        config=config,
        model=model,
        graph_store=RevisionGraphStore(revisions, WORKSPACE),
        rejection_store=RevisionRejectionStore(revisions, WORKSPACE),
        trace_source=environment,
        evaluator=environment,
        trace_store=RevisionTraceStore(revisions, WORKSPACE),
        checkpoint_store=RevisionCheckpointStore(revisions, WORKSPACE),
        available_tools=TOOLS,
    )
    return report, revisions, environment, model


def test_the_four_rounds_end_as_the_reference_says(scenario):
    report, _, _, _ = scenario
    assert report.outcomes() == ["accepted", "structural_failure", "rejected", "duplicate_candidate"]
    assert report.stopped_reason == "max_rounds"
    assert [it.mode for it in report.iterations] == ["scratch_incremental", *["static_incremental"] * 3]
    assert report.accepted == 1


def test_four_refiner_calls_and_three_evaluations(scenario):
    report, _, environment, model = scenario
    assert len(model.requests) == 4
    assert all(request.role == "refiner" for request in model.requests)
    assert report.model_calls == 4
    assert environment.evaluations == 3, "baseline, round 1 and round 3"
    assert report.budget["evaluations"] == 3


def test_the_best_score_and_the_retained_baseline(scenario):
    report, _, _, _ = scenario
    assert report.best.score == 1.0
    first = report.rejections.entries[0]
    assert first.retained_score == 0.5
    assert f"validation: baseline {first.retained_score} -> retained {report.best.score}" == (
        "validation: baseline 0.5 -> retained 1.0"
    )


def test_the_final_graph(scenario):
    report, _, _, _ = scenario
    assert list(report.graph.nodes) == ["End", "Start", "answer", "read", "search"]
    assert len(report.graph.edges) == 5
    read_search = report.graph.edges_between("read", "search")
    assert [edge.relation for edge in read_search] == ["PROVIDES_INPUT_FOR"]
    assert report.to_dict()["graph"] == {"nodes": 5, "edges": 5, "digest": report.graph.digest}


def test_the_graph_chain_holds_the_skeleton_and_the_accepted_graph(scenario):
    report, revisions, _, _ = scenario
    newest, oldest = revisions.list(WORKSPACE, "graph")
    assert (oldest.seq, oldest.meta["origin"], oldest.meta["iteration"]) == (0, "skeleton", 0)
    assert (newest.seq, newest.meta["origin"]) == (1, "accepted")
    assert newest.meta["validation_score"] == 1.0 and newest.meta["iteration"] == 1
    assert newest.meta["decision"] == {"best_score": 0.5, "candidate_score": 1.0, "accepted": True}
    assert newest.digest == report.graph_ref == report.graph.digest


def test_the_rejection_chain_has_one_revision_per_round(scenario):
    report, revisions, _, _ = scenario
    chain = revisions.list(WORKSPACE, "rejections")
    assert [revision.meta["iteration"] for revision in chain] == [4, 3, 2, 1]
    assert chain[0].digest == report.rejections_ref
    assert report.rejections.counts() == {
        "accepted": 1,
        "rejected": 1,
        "structural_failure": 1,
        "no_action": 0,
        "duplicate_candidate": 1,
    }


def test_each_round_is_recorded_as_expected(scenario):
    report, _, _, _ = scenario
    accepted, broken, rejected, duplicate = report.rejections.entries
    assert accepted.validation.score == 1.0 and accepted.decision["accepted"] is True
    assert [d.code for d in broken.diagnostics if d.is_error] == ["missing_endpoint"]
    assert broken.validation is None and broken.candidate is None
    assert rejected.validation.score == 0.5 and rejected.retained_score == 1.0
    assert rejected.candidate_digest is not None
    assert duplicate.duplicate_of == 3
    assert duplicate.candidate_digest == rejected.candidate_digest
    assert duplicate.validation is None
    assert report.iterations[3].duplicate_of == 3


def test_every_round_stored_its_traces_and_completed_its_checkpoint(scenario):
    _, revisions, _, _ = scenario
    traces = revisions.list(WORKSPACE, "traces")
    assert [revision.document["iteration"] for revision in traces] == [4, 3, 2, 1]
    assert [trace["id"] for trace in traces[-1].document["traces"]] == [f"it1-train{i}" for i in range(4)]
    checkpoints = RevisionCheckpointStore(revisions, WORKSPACE)
    assert all(checkpoints.load(k) == {"completed": True} for k in range(1, 5))
