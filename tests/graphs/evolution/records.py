"""What an evolution run ended with, in a form two runs on two workspaces can be compared by: a run resumed after its
worker died must end with the record of the same run without the crash (issue 30, "Resume equals no crash")."""

from typing import Any

from graphs.core.rejections import RejectionMemory
from graphs.evolution.stores import memory_document
from graphs.models import EvolutionRun, GraphCertification, Revision
from uplift.models import Certificate, HeldOutSplit, SplitDecision

ROUND_FIELDS = (
    "iteration",
    "outcome",
    "disposition",
    "mode",
    "retained_score",
    "candidate_score",
    "decision",
    "candidate_digest",
    "base_digest",
    "duplicate_of",
    "edits",
    "diagnostics",
    "trace_ids",
)


def chain(workspace, kind: str) -> list[Revision]:
    return list(Revision.objects.filter(workspace=workspace, kind=kind).order_by("seq"))


def rejection_entries(workspace) -> list[dict[str, Any]]:
    """The entries of the workspace's rejection memory, without the time each was written."""
    revisions = chain(workspace, "rejections")
    if not revisions:
        return []
    memory = RejectionMemory.from_document(memory_document(revisions[-1]))
    documents = [entry.to_document() for entry in memory.entries]
    for document in documents:
        document.pop("created_at")
    return documents


def uplift_record(workspace) -> dict[str, Any]:
    """The workspace's validation splits with their decision counts and ledgers, its certifications and the
    certificates they issued (what the reuse ledger and the certificates say, without ids and times)."""
    splits = HeldOutSplit.objects.filter(kind="graph_revision", parent_key=workspace.slug).order_by("key")
    ledger = SplitDecision.objects.filter(split__in=splits).order_by("split__key", "number")
    certificates = Certificate.objects.filter(kind="graph_revision", parent_key=workspace.slug).order_by("id")
    certifications = GraphCertification.objects.filter(workspace=workspace).order_by("id")
    return {
        "splits": [(split.key, split.task_count, split.decisions) for split in splits],
        "ledger": [(row.number, row.what, row.passed) for row in ledger],
        "certifications": [(c.source, c.status, c.iteration, c.passed, c.control_id is None) for c in certifications],
        "certificates": [
            (c.passed, c.decision_number, c.totals["n"], c.totals["repairs"], c.totals["breakages"])
            for c in certificates
        ],
    }


def run_record(run: EvolutionRun) -> dict[str, Any]:
    """Everything a crash must not change: how the run ended, each round's decision and scores, the graph, rejection
    and trace chains, the baseline and retained evaluations, the evaluations the budget counted, and the decisions
    the rounds took on the validation split with the certificates they issued."""
    run.refresh_from_db()
    workspace = run.workspace
    return {
        "ended": (run.status, run.stopped_reason, run.error),
        "rounds": list(run.rounds.order_by("iteration").values(*ROUND_FIELDS)),
        "rounds_done": run.rounds_done,
        "first_iteration": run.first_iteration,
        "graph_chain": [
            (r.digest, r.meta.get("origin"), r.meta.get("validation_score")) for r in chain(workspace, "graph")
        ],
        "rejection_entries": rejection_entries(workspace),
        "trace_chain": [r.digest for r in chain(workspace, "traces")],
        "baseline": run.baseline,
        "best": run.best,
        "evaluations": (run.meter or {}).get("evaluations"),
        "uplift": uplift_record(workspace),
    }


def revised_edge(guidance: str) -> dict[str, Any]:
    """A refiner's reply that rewrites the search -> read edge with `guidance`: a new, valid candidate each time."""
    return {
        "add_nodes": [],
        "delete_nodes": [],
        "delete_edges": [{"source": "search", "target": "read"}],
        "add_edges": [
            {
                "source": "search",
                "target": "read",
                "relation": "LEADS_TO",
                "condition": "search returned at least one document",
                "guidance": guidance,
                "pitfalls": None,
            }
        ],
    }
