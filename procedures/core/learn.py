"""`learn_procedure`: the stable tool subsequence of successful runs, with the arguments they all agree on (§2.1)."""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter, is_, itemgetter
from types import MappingProxyType
from typing import Any

from trajectories.core import TrajectoryStep

from .frozen import freeze, thaw
from .lcs import ToolCodes, Tools, lcs_codes, subsequence_pattern

INTENT_OR_RUNS_MISSING = "intent and at least one trajectory are required"
SOURCES_INVALID = "source trajectories must be identified, non-empty, and successful"
NO_SHARED_STEPS = "successful trajectories share no procedure steps"

_ok = attrgetter("ok")
_tool = attrgetter("tool")
_arguments = attrgetter("arguments")
_start = itemgetter(0)
_COMPARES_AS_DICT = frozenset({dict, MappingProxyType})


@dataclass(frozen=True, kw_only=True)
class ProcedureStep:
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool.strip():
            raise ValueError("procedure tool is required")
        if not isinstance(self.arguments, Mapping):
            raise ValueError("procedure arguments must be a mapping")
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
    runs = {
        trajectory_id: steps if isinstance(steps, list | tuple) else tuple(steps)
        for trajectory_id, steps in trajectories.items()
    }
    for trajectory_id, steps in runs.items():
        if not isinstance(trajectory_id, str) or not trajectory_id.strip() or not steps:
            raise ValueError(SOURCES_INVALID)
    if not all(map(is_, map(_ok, chain.from_iterable(runs.values())), repeat(True))):
        raise ValueError(SOURCES_INVALID)
    ordered_ids = sorted(runs)
    ordered_runs = [runs[trajectory_id] for trajectory_id in ordered_ids]
    codes = ToolCodes()
    run_codes = [codes.encode(steps, _tool) for steps in ordered_runs]
    shared = shared_codes(run_codes, codes.ranks())
    if not shared:
        raise ValueError(NO_SHARED_STEPS)
    tools = codes.decode(shared)
    arguments = retained_arguments(shared, ordered_runs, run_codes)
    digest = procedure_digest(intent, tools)
    return ProcedureCandidate(
        procedure_id=f"procedure:{digest[:16]}",
        intent=intent.strip(),
        steps=tuple(ProcedureStep(tool=tool, arguments=args) for tool, args in zip(tools, arguments, strict=True)),
        source_trajectory_ids=tuple(ordered_ids),
        revision=f"sha256:{digest}",
    )


def shared_codes(sequences: Sequence[str], ranks: Mapping[str, int]) -> str:
    """Fold `lcs_codes` over the runs' code strings in order.

    A run seen before is skipped, and so is a run that contains the current sequence (tested by a compiled regex):
    in both cases the fold would return the current sequence unchanged, since it is a subsequence of that run (the
    current sequence only shrinks, so it stays a subsequence of every run already folded in). Any other run makes
    the LCS strictly shorter than the current sequence, so at most len(first run) folds need the DP: the whole fold
    costs O(N·L) for the checks plus at most L tables of L×L cells, whatever the number of runs."""
    current = sequences[0]
    contained_in = subsequence_pattern(current).match
    seen = {current}
    for sequence in sequences[1:]:
        if not current:
            break
        if sequence in seen:
            continue
        seen.add(sequence)
        if contained_in(sequence):
            continue
        current = lcs_codes(current, sequence, ranks)
        contained_in = subsequence_pattern(current).match
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


def retained_arguments(
    shared: str, runs: Sequence[Sequence[TrajectoryStep]], run_codes: Sequence[str]
) -> list[Mapping[str, Any]]:
    """Per position, the first run's arguments when every run's aligned step has equal ones (as dicts), else {}.

    The greedy leftmost alignment is one regex match per run, capturing only the positions still agreeing and
    stopping after the last of them; the pattern is rebuilt only when a position stops agreeing. A run whose
    captured arguments are all plain or read-only dicts equal to the expected ones is settled in one comparison."""
    first_spans = subsequence_pattern(shared, capture=True).match(run_codes[0]).regs
    first = [runs[0][first_spans[position + 1][0]].arguments for position in range(len(shared))]
    agreeing = list(range(len(shared)))
    expected = tuple(dict(arguments) for arguments in first)
    align = subsequence_pattern(shared, capture=True).match
    for steps, codes in zip(runs[1:], run_codes[1:], strict=True):
        found = tuple(map(_arguments, map(steps.__getitem__, map(_start, align(codes).regs[1:]))))
        if found == expected and set(map(type, found)) <= _COMPARES_AS_DICT:
            continue
        pairs = [
            (k, wanted)
            for k, arguments, wanted in zip(agreeing, found, expected, strict=True)
            if _as_dict(arguments) == wanted
        ]
        if len(pairs) == len(agreeing):
            continue
        if not pairs:
            agreeing = []
            break
        agreeing = [k for k, _ in pairs]
        expected = tuple(wanted for _, wanted in pairs)
        align = subsequence_pattern(shared[: agreeing[-1] + 1], capture=frozenset(agreeing)).match
    kept = set(agreeing)
    return [first[position] if position in kept else {} for position in range(len(shared))]


def _as_dict(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """A dict or read-only dict compares as a dict already; anything else is copied into one."""
    return arguments if type(arguments) in _COMPARES_AS_DICT else dict(arguments)
