"""The rejection memory a run writes is the document the reference store would write (spec §8: the digest is the
SHA-256 of the document's canonical JSON), though a step serializes only the entry it adds (issue 29)."""

import hashlib

import pytest

from accounts.services import Actor
from graphs.core import canonical_json
from graphs.core.diagnostics import Diagnostic
from graphs.core.evaluation import Evaluation, TaskOutcome
from graphs.core.rejections import RejectionEntry, RejectionMemory
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_start
from graphs.evolution.stores import memory_canonical
from graphs.services import workspace_create

from .records import chain


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
def test_every_rejection_revision_of_a_run_holds_the_whole_memory_under_its_digest():
    workspace = workspace_create(actor=Actor.system(), slug="lab").workspace
    run = run_inline(
        evolution_start(actor=Actor.system(), workspace=workspace, rounds=4, evaluator="two-hop", enqueue=False)
    )
    assert run.status == "succeeded"
    revisions = chain(workspace, "rejections")
    assert [len(revision.document["entries"]) for revision in revisions] == [1, 2, 3, 4]
    for revision in revisions:
        document = revision.document
        assert revision.digest == hashlib.sha256(canonical_json(document).encode()).hexdigest()
        assert RejectionMemory.from_document(document).to_document() == document
    assert [entry.kind for entry in RejectionMemory.from_document(revisions[-1].document).entries] == [
        "accepted",
        "structural_failure",
        "rejected",
        "duplicate_candidate",
    ]
