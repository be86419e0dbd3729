"""Demo-like refund runs pushed through the real ingest service, and versions/replays for gate scenarios."""

from __future__ import annotations

from typing import Any

from procedures.mining import content_revision
from procedures.models import Procedure, ProcedureVersion, ReplayRun, VersionStatus
from tests.trajectories.factories import ingest, run_item, step_item

REFUND = "refund_request"


def refund_run(*tools: str, outcome: str = "success", failed: tuple[str, ...] = (), **overrides: Any) -> dict:
    """A run item whose steps are `tools` (ok unless listed in `failed`); default lookup_policy → issue_refund."""
    tools = tools or ("lookup_policy", "issue_refund")
    steps = [step_item(tool, ok=tool not in failed) for tool in tools]
    return run_item(intent=REFUND, outcome=outcome, steps=steps, **overrides)


def refund_runs(successes: int = 10, failures: int = 4, tools: tuple[str, ...] = ()) -> list[int]:
    items = [refund_run(*tools) for _ in range(successes)]
    items += [refund_run("issue_refund", outcome="failure") for _ in range(failures)]
    return ingest(*items).created_ids


def stored_version(
    procedure: Procedure, *tools: str, number: int, status: str = VersionStatus.READY, held_out: list[int] = ()
) -> ProcedureVersion:
    """A version row written directly (test set-up only), for replay scenarios mining would not produce."""
    steps = [{"tool": tool, "arguments": {}} for tool in tools]
    return ProcedureVersion.objects.create(
        procedure=procedure,
        number=number,
        steps=steps,
        candidate_revision=f"sha256:{number:064d}",
        content_revision=content_revision(intent=procedure.intent, steps=steps),
        held_out_run_ids=list(held_out),
        status=status,
    )


def queued_replay(version: ProcedureVersion, *, compared_with: ProcedureVersion | None, held_out: list[int]):
    return ReplayRun.objects.create(version=version, compared_with=compared_with, held_out_run_ids=list(held_out))
