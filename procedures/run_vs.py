"""A run drawn against the active procedure of its intent: where it followed the procedure's steps and where it
left it. Reads only (a fixed number of queries); the alignment is trajectories.core.align over the tool sequences."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trajectories.core.align import align_tools
from trajectories.selectors import run_with_steps

from . import selectors
from .models import Procedure


@dataclass(frozen=True)
class VsRow:
    """One row: `status` is followed (the procedure's step, same tool), instead (another tool where the procedure
    had this step), skipped (the procedure's step, not in the run) or extra (a run step outside the procedure)."""

    status: str
    expected: dict[str, Any] | None
    expected_index: int | None
    step: Any | None  # a trajectories step row
    argument_mismatches: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunVs:
    run: Any  # a trajectories run row (trajectories.selectors.run_with_steps)
    steps: list[Any]
    procedure: Procedure | None
    rows: list[VsRow]

    @property
    def followed(self) -> int:
        return sum(row.status == "followed" and not row.argument_mismatches for row in self.rows)

    @property
    def expected_count(self) -> int:
        return sum(row.expected is not None for row in self.rows)

    @property
    def first_departure(self) -> VsRow | None:
        return next((row for row in self.rows if row.status != "followed" or row.argument_mismatches), None)


_STATUS = {"equal": "followed", "replace": "instead", "delete": "skipped", "insert": "extra"}


def _mismatches(expected: dict[str, Any], step: Any) -> list[str]:
    """The procedure's retained arguments (constants every training run agreed on) the step gave otherwise."""
    retained = expected.get("arguments") or {}
    return sorted(key for key, value in retained.items() if step.arguments.get(key) != value)


def run_against_active_procedure(run_id: int) -> RunVs:
    """The run with its steps and the active procedure of its declared intent (None when there is none), aligned:
    three queries. Http404 for an unknown run."""
    run = run_with_steps(run_id)
    steps = list(run.steps.all())
    procedure = None
    if run.intent.strip():
        found = selectors.active_procedures(intent=run.intent)
        procedure = found[0] if found else None
    if procedure is None:
        return RunVs(run=run, steps=steps, procedure=None, rows=[])
    expected = list(procedure.active_version.steps)
    rows = []
    for aligned in align_tools([str(item.get("tool", "")) for item in expected], [step.tool for step in steps]):
        want = expected[aligned.a] if aligned.a is not None else None
        step = steps[aligned.b] if aligned.b is not None else None
        rows.append(
            VsRow(
                status=_STATUS[aligned.kind],
                expected=want,
                expected_index=aligned.a,
                step=step,
                argument_mismatches=_mismatches(want, step) if aligned.kind == "equal" else [],
            )
        )
    return RunVs(run=run, steps=steps, procedure=procedure, rows=rows)
