"""What an evolution run ended with, in a form two runs on two workspaces can be compared by: a run resumed after its
worker died must end with the record of the same run without the crash (issue 30, "Resume equals no crash")."""

from typing import Any

from graphs.core.rejections import RejectionMemory
from graphs.models import EvolutionRun, Revision

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
    documents = [entry.to_document() for entry in RejectionMemory.from_document(revisions[-1].document).entries]
    for document in documents:
        document.pop("created_at")
    return documents


def run_record(run: EvolutionRun) -> dict[str, Any]:
    """Everything a crash must not change: how the run ended, each round's decision and scores, the graph, rejection
    and trace chains, the baseline and retained evaluations, and the evaluations the budget counted."""
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
    }
