"""The rejection memory a run writes is the document the reference store would write (spec §8: the digest is the
SHA-256 of the document's canonical JSON), though a step serializes and stores only the entry it adds (issue 29):
every reader gets the whole memory."""

import hashlib

import pytest

from accounts.services import Actor
from graphs.core import canonical_json
from graphs.core.diagnostics import Diagnostic
from graphs.core.evaluation import Evaluation, TaskOutcome
from graphs.core.rejections import RejectionEntry, RejectionMemory
from graphs.evolution import selectors
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_start, evolution_step
from graphs.evolution.stores import memory_canonical, memory_document
from graphs.services import workspace_create

from .records import chain, rejection_entries

OUTCOMES = ["accepted", "structural_failure", "rejected", "duplicate_candidate"]


def test_a_memorys_canonical_json_is_built_from_its_entries_canonical_json():
    validation = Evaluation.from_outcomes("c" * 64, [TaskOutcome("t1", 1 / 3, False), TaskOutcome("t2", 1.0, True)])
    memory = RejectionMemory.of(
        [
            RejectionEntry(
                iteration=2,
                kind="accepted",
                edits={"add_nodes": [{"id": "résumé ✓"}]},
                validation=validation,
                retained_score=0.25,
                candidate_digest="c" * 64,
                trace_ids=("a", "b"),
            ),
            RejectionEntry(iteration=5, kind="structural_failure", diagnostics=(Diagnostic("orphan", "nœud «x»"),)),
            RejectionEntry(iteration=7, kind="no_action", decision={"disposition": None, "z": [1e-9, 2.5]}),
        ]
    )
    texts = tuple(canonical_json(entry.to_document()) for entry in memory.entries)
    assert memory_canonical(memory, texts) == canonical_json(memory.to_document())
    assert memory_canonical(RejectionMemory(), ()) == canonical_json(RejectionMemory().to_document())


@pytest.mark.django_db
def test_every_rejection_revision_of_a_run_reads_as_the_whole_memory_under_its_digest():
    workspace = workspace_create(actor=Actor.system(), slug="lab").workspace
    run = run_inline(
        evolution_start(actor=Actor.system(), workspace=workspace, rounds=4, evaluator="two-hop", enqueue=False)
    )
    assert run.status == "succeeded"
    revisions = chain(workspace, "rejections")
    # The first revision is stored whole, each later one as the entry it appends.
    assert [revision.document is None for revision in revisions] == [False, True, True, True]
    assert [len(revision.appended["entries"]) for revision in revisions[1:]] == [1, 1, 1]
    documents = [memory_document(revision) for revision in revisions]
    assert [len(document["entries"]) for document in documents] == [1, 2, 3, 4]
    for revision, document in zip(revisions, documents, strict=True):
        assert revision.digest == hashlib.sha256(canonical_json(document).encode()).hexdigest()
        assert RejectionMemory.from_document(document).to_document() == document
        assert document["iteration"] == revision.meta["iteration"]
    memory = RejectionMemory.from_document(documents[-1])
    assert [entry.kind for entry in memory.entries] == OUTCOMES
    assert selectors.rejection_memory(workspace).to_document() == documents[-1]
    for round_ in run.rounds.all():
        found = selectors.candidate_graph(round_)
        entry = memory.entries[round_.iteration - 1]
        assert (found.to_document() if found else None) == entry.candidate


@pytest.mark.django_db
def test_a_step_in_a_fresh_process_reads_the_memory_back_and_appends_to_it(monkeypatch):
    """A step that did not write the memory it extends (another worker process: nothing parsed yet) reads it from
    the chain and still stores only its own entry; the memory is the same as without the change of process."""
    from graphs.evolution import stores

    workspace = workspace_create(actor=Actor.system(), slug="lab").workspace
    run = evolution_start(actor=Actor.system(), workspace=workspace, rounds=4, evaluator="two-hop", enqueue=False)
    for _ in range(3):
        evolution_step(run_id=run.pk, worker="w")
        stores._MEMORIES.clear()  # the next step runs in a process that parsed nothing
    run = run_inline(run)
    reference = workspace_create(actor=Actor.system(), slug="reference").workspace
    run_inline(evolution_start(actor=Actor.system(), workspace=reference, rounds=4, evaluator="two-hop", enqueue=False))
    assert [r.document is None for r in chain(workspace, "rejections")] == [False, True, True, True]
    assert rejection_entries(workspace) == rejection_entries(reference)
    assert [r.digest for r in chain(workspace, "traces")] == [r.digest for r in chain(reference, "traces")]
