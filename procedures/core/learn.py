"""`learn_procedure`: the stable tool subsequence of successful runs, with the arguments they all agree on (§2.1)."""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trajectories.core import TrajectoryStep

from .frozen import freeze, thaw
from .lcs import Tools, lcs

INTENT_OR_RUNS_MISSING = "intent and at least one trajectory are required"
SOURCES_INVALID = "source trajectories must be identified, non-empty, and successful"
NO_SHARED_STEPS = "successful trajectories share no procedure steps"


@dataclass(frozen=True, kw_only=True)
class ProcedureStep:
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool.strip():
            raise ValueError("procedure tool is required")
        object.__setattr__(self, "arguments", freeze(self.arguments))

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": thaw(self.arguments)}


@dataclass(frozen=True)
class ProcedureCandidate:
    procedure_id: str
    intent: str
    steps: tuple[ProcedureStep, ...]
    source_trajectory_ids: tuple[str, ...]
    revision: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "source_trajectory_ids", tuple(self.source_trajectory_ids))

    @property
    def tools(self) -> Tools:
        return tuple(step.tool for step in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "procedure_id": self.procedure_id,
            "intent": self.intent,
            "steps": [step.to_dict() for step in self.steps],
            "source_trajectory_ids": list(self.source_trajectory_ids),
            "revision": self.revision,
        }


def procedure_digest(intent: str, tools: Sequence[str]) -> str:
    """SHA-256 hex of the stripped intent and the tool names joined with NUL: arguments and sources play no part."""
    return hashlib.sha256("\0".join((intent.strip(), *tools)).encode("utf-8")).hexdigest()


def learn_procedure(trajectories: Mapping[str, Sequence[TrajectoryStep]], *, intent: str) -> ProcedureCandidate:
    """Reduce successful runs to their shared tool subsequence and the arguments every run agrees on."""
    if not isinstance(intent, str) or not intent.strip() or not trajectories:
        raise ValueError(INTENT_OR_RUNS_MISSING)
    runs = {trajectory_id: tuple(steps) for trajectory_id, steps in trajectories.items()}
    for trajectory_id, steps in runs.items():
        if not isinstance(trajectory_id, str) or not trajectory_id.strip() or not steps:
            raise ValueError(SOURCES_INVALID)
        if any(step.ok is not True for step in steps):
            raise ValueError(SOURCES_INVALID)
    ordered_ids = sorted(runs)
    ordered_runs = [runs[trajectory_id] for trajectory_id in ordered_ids]
    tools = shared_tools([tuple(step.tool for step in steps) for steps in ordered_runs])
    if not tools:
        raise ValueError(NO_SHARED_STEPS)
    arguments = retained_arguments(tools, ordered_runs)
    digest = procedure_digest(intent, tools)
    return ProcedureCandidate(
        procedure_id=f"procedure:{digest[:16]}",
        intent=intent.strip(),
        steps=tuple(ProcedureStep(tool=tool, arguments=args) for tool, args in zip(tools, arguments, strict=True)),
        source_trajectory_ids=tuple(ordered_ids),
        revision=f"sha256:{digest}",
    )


def shared_tools(sequences: Sequence[Tools]) -> Tools:
    """Fold `lcs` over the sequences in order. A sequence seen before is skipped: the current tuple is already a
    subsequence of it (it only shrinks after each fold), so folding it in again would return the current tuple."""
    current = sequences[0]
    seen = {current}
    for sequence in sequences[1:]:
        if not current:
            break
        if sequence in seen:
            continue
        seen.add(sequence)
        current = lcs(current, sequence)
    return current


def align_leftmost(tools: Tools, steps: Sequence[TrajectoryStep]) -> list[TrajectoryStep]:
    """Each tool matched to its leftmost occurrence after the previous match (as many as the run allows)."""
    matched: list[TrajectoryStep] = []
    wanted = len(tools)
    for step in steps:
        if len(matched) == wanted:
            break
        if step.tool == tools[len(matched)]:
            matched.append(step)
    return matched


def retained_arguments(tools: Tools, runs: Sequence[Sequence[TrajectoryStep]]) -> list[Mapping[str, Any]]:
    """Per position, the first run's arguments when every run's aligned step has equal ones (as dicts), else {}."""
    first = [step.arguments for step in align_leftmost(tools, runs[0])]
    first_as_dicts = [dict(arguments) for arguments in first]
    agreeing = set(range(len(tools)))
    for steps in runs[1:]:
        if not agreeing:
            break
        aligned = align_leftmost(tools, steps)
        agreeing = {position for position in agreeing if dict(aligned[position].arguments) == first_as_dicts[position]}
    return [first[position] if position in agreeing else {} for position in range(len(tools))]
