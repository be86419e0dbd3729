"""Stores (spec §8): the RevisionStore contract on MemoryRevisionStore and the layer stores over revisions."""

import pytest

from graphs.core import Graph, skeleton
from graphs.core.edits import parse_edit_set
from graphs.core.evaluation import TaskOutcome, Trace
from graphs.core.rejections import RejectionEntry, RejectionMemory
from graphs.core.stores import (
    Candidate,
    HeadMoved,
    MemoryRevisionStore,
    NullCheckpointStore,
    NullTraceStore,
    RevisionCheckpointStore,
    RevisionGraphStore,
    RevisionRejectionStore,
    RevisionStore,
    RevisionTraceStore,
)

from .builders import five_node_graph
from .store_contract import revision_store_contract


def test_memory_store_meets_the_revision_store_contract():
    store = MemoryRevisionStore()
    assert isinstance(store, RevisionStore)
    revision_store_contract(store)


def test_memory_store_documents_cannot_be_altered_from_outside():
    store = MemoryRevisionStore()
    document = {"items": [1]}
    revision = store.append("ws", "graph", document, expected_head=None)
    document["items"].append(2)
    revision.document["items"].append(3)
    assert store.head("ws", "graph").document == {"items": [1]}


def test_head_moved_names_the_chain_and_both_heads():
    error = HeadMoved("ws", "graph", None, "a" * 64)
    assert (error.workspace, error.kind, error.expected, error.actual) == ("ws", "graph", None, "a" * 64)
    assert "ws" in str(error) and "aaaaaaaaaaaa" in str(error)


# -- graphs ----------------------------------------------------------------------------------------------------------


def test_an_empty_graph_chain_loads_as_the_skeleton_with_no_ref():
    store = RevisionGraphStore(MemoryRevisionStore(), "ws")
    ref, graph = store.load()
    assert ref is None
    assert graph.is_skeleton


def test_seed_writes_revision_zero_with_iteration_zero_and_refuses_a_second_seed():
    revisions = MemoryRevisionStore()
    store = RevisionGraphStore(revisions, "ws")
    ref = store.seed(five_node_graph(), meta={"origin": "onboarded"})
    assert ref == five_node_graph().digest
    head = revisions.head("ws", "graph")
    assert head.seq == 0 and dict(head.meta) == {"iteration": 0, "origin": "onboarded"}
    assert store.load() == (ref, five_node_graph())
    with pytest.raises(HeadMoved):
        store.seed(skeleton(), meta={"origin": "skeleton"})


def test_load_refuses_a_document_that_no_longer_matches_its_digest():
    revisions = MemoryRevisionStore()
    store = RevisionGraphStore(revisions, "ws")
    store.seed(skeleton(), meta={})
    revisions._chains[("ws", "graph")][0].document["meta"] = {"tampered": True}
    with pytest.raises(ValueError, match="does not match its digest"):
        store.load()


def _round_one_candidate():
    edits, _ = parse_edit_set(
        '{"add_nodes":[{"id":"search","type":"ACTION"}],"delete_edges":[["Start","End"]],'
        '"add_edges":[{"source":"Start","target":"search","relation":"LEADS_TO","guidance":"go"},'
        '{"source":"search","target":"End","relation":"LEADS_TO","guidance":"stop"}]}'
    )
    from graphs.core import prepare_candidate

    candidate, _ = prepare_candidate(skeleton(), edits)
    return edits, candidate


def test_propose_is_idempotent_and_names_the_candidate_by_its_digest():
    store = RevisionGraphStore(MemoryRevisionStore(), "ws")
    base_ref = store.seed(skeleton(), meta={})
    edits, candidate = _round_one_candidate()
    first = store.propose(base_ref, skeleton(), edits, candidate, iteration=3, rejections_ref="r" * 64)
    again = store.propose(base_ref, skeleton(), edits, candidate, iteration=3, rejections_ref="r" * 64)
    assert first == again
    assert first.ref == candidate.digest
    assert first.graph == candidate and first.edits == edits
    assert dict(first.meta) == {"iteration": 3, "rejections_ref": "r" * 64, "base_ref": base_ref}


def test_accept_appends_the_candidate_with_its_meta_edits_and_origin():
    revisions = MemoryRevisionStore()
    store = RevisionGraphStore(revisions, "ws")
    base_ref = store.seed(skeleton(), meta={"origin": "skeleton"})
    edits, candidate = _round_one_candidate()
    proposed = store.propose(base_ref, skeleton(), edits, candidate, iteration=1, rejections_ref=None)
    accepted = Candidate(proposed.ref, proposed.graph, proposed.edits, {**proposed.meta, "validation_score": 0.75})
    ref = store.accept(accepted, expected_ref=base_ref)
    assert ref == candidate.digest
    head = revisions.head("ws", "graph")
    assert head.seq == 1 and head.parent_digest == base_ref
    assert head.meta["origin"] == "accepted"
    assert head.meta["validation_score"] == 0.75
    assert head.meta["iteration"] == 1 and head.meta["base_ref"] == base_ref
    assert head.meta["edits"] == edits.to_dict(candidate.attribute_fields)
    assert store.load() == (ref, candidate)
    assert [revision.seq for revision in store.history()] == [1, 0]
    with pytest.raises(HeadMoved):
        store.accept(accepted, expected_ref=base_ref)


# -- rejection memory ------------------------------------------------------------------------------------------------


def test_rejection_store_round_trips_memory_with_iteration_meta():
    revisions = MemoryRevisionStore()
    store = RevisionRejectionStore(revisions, "ws")
    ref, memory = store.load()
    assert ref is None and memory.iteration == 0 and len(memory) == 0
    memory = memory.append(RejectionEntry(iteration=1, kind="no_action", created_at="2026-01-01T00:00:00+00:00"))
    saved = store.save(memory, expected_ref=None, iteration=1)
    assert store.load() == (saved, memory)
    assert dict(revisions.head("ws", "rejections").meta) == {"iteration": 1}
    with pytest.raises(HeadMoved):
        store.save(memory, expected_ref=None, iteration=1)
    assert isinstance(store.load()[1], RejectionMemory)


# -- traces ----------------------------------------------------------------------------------------------------------


def _trace(trace_id, score=1.0):
    return Trace(trace_id, TaskOutcome(f"task-{trace_id}", score, score >= 0.5), text=f"ran {trace_id}")


def test_trace_store_writes_one_revision_per_iteration_and_finds_traces_by_id():
    revisions = MemoryRevisionStore()
    store = RevisionTraceStore(revisions, "ws")
    store.put([_trace("a"), _trace("b", 0.0)], iteration=1)
    store.put([_trace("a", 0.0)], iteration=2)
    chain = revisions.list("ws", "traces")
    assert [revision.document["iteration"] for revision in chain] == [2, 1]
    assert chain[0].document["schema"] == 1 and dict(chain[0].meta) == {"iteration": 2}
    assert store.get("a").score == 0.0, "the newest trace with the id"
    assert store.get("b") == _trace("b", 0.0)
    assert store.get("missing") is None


def test_trace_store_does_not_store_the_same_rollout_twice():
    revisions = MemoryRevisionStore()
    store = RevisionTraceStore(revisions, "ws")
    store.put([_trace("a")], iteration=1)
    store.put([_trace("a")], iteration=1)
    assert len(revisions.list("ws", "traces")) == 1


def test_null_stores_keep_nothing():
    assert NullTraceStore().put([_trace("a")], iteration=1) is None
    assert NullTraceStore().get("a") is None
    NullCheckpointStore().save(1, {"edits": None})
    assert NullCheckpointStore().load(1) is None


# -- checkpoints -----------------------------------------------------------------------------------------------------


def test_checkpoint_store_returns_the_newest_payload_of_an_iteration():
    revisions = MemoryRevisionStore()
    store = RevisionCheckpointStore(revisions, "ws")
    assert store.load(1) is None
    store.save(1, {"edits": None, "step": 1})
    store.save(2, {"edits": None, "step": 2})
    store.save(1, {"completed": True})
    assert store.load(1) == {"completed": True}
    assert store.load(2) == {"edits": None, "step": 2}
    assert store.load(3) is None
    head = revisions.head("ws", "checkpoints")
    assert head.document == {"schema": 1, "iteration": 1, "payload": {"completed": True}}


def test_checkpoint_store_looks_only_at_the_last_200_revisions():
    store = RevisionCheckpointStore(MemoryRevisionStore(), "ws")
    store.save(1, {"old": True})
    for number in range(200):
        store.save(2, {"n": number})
    assert store.load(1) is None
    assert store.load(2) == {"n": 199}


def test_layer_stores_only_use_the_protocol(monkeypatch):
    """The wrappers work over any RevisionStore: here one that exposes nothing but the four methods."""

    class Minimal:
        def __init__(self):
            self.inner = MemoryRevisionStore()

        def head(self, workspace, kind):
            return self.inner.head(workspace, kind)

        def append(self, workspace, kind, document, *, expected_head, meta=None):
            return self.inner.append(workspace, kind, document, expected_head=expected_head, meta=meta)

        def get(self, workspace, kind, digest):
            return self.inner.get(workspace, kind, digest)

        def list(self, workspace, kind, limit=50):
            return self.inner.list(workspace, kind, limit)

    minimal = Minimal()
    revision_store_contract(minimal)
    graphs = RevisionGraphStore(minimal, "ws")
    ref = graphs.seed(Graph.skeleton(), meta={})
    assert graphs.load()[0] == ref
    checkpoints = RevisionCheckpointStore(minimal, "ws")
    checkpoints.save(1, {"edits": None})
    assert checkpoints.load(1) == {"edits": None}
