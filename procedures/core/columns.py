"""`learn_procedure` and offline judging over runs streamed as columns, in memory flat in the number of runs (pure).

A stored intent's runs arrive one at a time, in ascending trajectory id order, each as columns: its id, its tool
names in step order and, in the same order, each step's arguments in whatever raw form the reader has (JSON text
from the database; `decode` turns one into the mapping it stands for, and is called only where a value is needed).
Tool names are encoded once into one-character codes (lcs.ToolCodes: an int per distinct tool), and everything
after that works on the code strings.

`learn_streamed` gives exactly the candidate of `learn_procedure` on the same runs (same steps, arguments, source
ids and revision; the property tests hold it to both `learn_procedure` and the literal reference):

* the fold (§2.1 step 2) is incremental over runs in sorted order: the current sequence only changes on a run
  that does not contain it (lcs.py, shortcut 1), so it is kept and updated as the runs stream by;
* the argument alignment (steps 4 and 5) needs the *final* sequence. The first `GUESS_RUNS` runs are kept (a
  constant number), and the fold over them is the guess; every later run that leaves the fold unchanged contains
  the guess, so its arguments are compared on the spot and then dropped. If a later run shrinks the fold, the
  guess was too long: the first pass finishes the fold on tools only, and `open_runs` is called a second time to
  align the final sequence (at most two reads, whatever the input).

Only the candidate's source ids (one string per run, part of the result; left out with `keep_source_ids=False`)
and a bounded set of distinct tool sequences seen are kept across runs.
"""

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .lcs import ToolCodes, lcs_codes, subsequence_pattern
from .learn import (
    INTENT_OR_RUNS_MISSING,
    NO_SHARED_STEPS,
    SOURCES_INVALID,
    ArgumentAgreement,
    ProcedureCandidate,
    ProcedureStep,
    _as_dict,
    procedure_digest,
)
from .replay import LIVE, OFFLINE, OUTCOMES, ArmResult, CaseResult, Judge, _checked_procedure, observed_in

StreamedRun = tuple[str, Sequence[str], Sequence[Any]]
GUESS_RUNS = 256
SEEN_LIMIT = 65_536  # distinct tool sequences remembered by the fold (a bound, so memory stays flat)
NOT_ASCENDING = "streamed runs must come in ascending trajectory id order, each once"
CHANGED_BETWEEN_PASSES = "the runs changed between the two passes"


def _same_value(value: Any) -> Any:
    return value


class Fold:
    """§2.1 step 2, one run at a time: `add` folds a run's code string in and says whether the sequence shrank."""

    def __init__(self, codes: ToolCodes) -> None:
        self._codes = codes
        self.current: str | None = None
        self._seen: set[str] = set()

    def add(self, sequence: str) -> bool:
        current = self.current
        if current is None:
            self._start(sequence)
            return False
        if not current or sequence in self._seen:
            return False
        if len(self._seen) < SEEN_LIMIT:
            self._seen.add(sequence)
        if self._contained_in(sequence):
            return False
        self._start(lcs_codes(current, sequence, self._codes.ranks()))
        return True

    def _start(self, current: str) -> None:
        self.current = current
        self._contained_in = subsequence_pattern(current).match
        self._seen.add(current)


class StreamedAgreement(ArgumentAgreement):
    """`learn.ArgumentAgreement` for raw argument values: which positions of `shared` every run added so far agrees
    on with the first run, compared as dicts after `decode`. A raw value equal to the first run's (say, the same
    JSON text) decodes to an equal value, so it agrees without being decoded."""

    _RAW_FAST = frozenset({str, bytes, dict, MappingProxyType})

    def __init__(
        self, shared: str, first_codes: str, first_arguments: Sequence[Any], decode: Callable[[Any], Any]
    ) -> None:
        self.shared = shared
        self._decode = decode
        self._agreeing = list(range(len(shared)))
        self._align()
        indexes = self._indexes(first_codes)
        if indexes is None:
            raise ValueError(CHANGED_BETWEEN_PASSES)
        raw = tuple(first_arguments[index] for index in indexes)
        self._first = [decode(value) for value in raw]
        self._expected = tuple(dict(arguments) for arguments in self._first)
        fast = all(type(value) in self._RAW_FAST for value in raw)
        self._raw = raw if fast and all(type(value) is dict for value in self._first) else None

    def add(self, codes: str, arguments: Sequence[Any]) -> bool:
        indexes = self._indexes(codes)
        if indexes is None:
            return False
        if not indexes:
            return True
        found = tuple(map(arguments.__getitem__, indexes))
        if self._raw is not None and found == self._raw:
            return True
        decode = self._decode
        pairs = [
            (k, raw, wanted)
            for k, value, raw, wanted in zip(self._agreeing, found, self._raw or found, self._expected, strict=True)
            if _as_dict(decode(value)) == wanted
        ]
        if len(pairs) < len(self._agreeing):
            self._agreeing = [k for k, _, _ in pairs]
            self._expected = tuple(wanted for _, _, wanted in pairs)
            if self._raw is not None:
                self._raw = tuple(raw for _, raw, _ in pairs)
            self._align()
        return True

    def arguments(self) -> list[Mapping[str, Any]]:
        kept = set(self._agreeing)
        return [self._first[position] if position in kept else {} for position in range(len(self.shared))]


def learn_streamed(
    open_runs: Callable[[], Iterable[StreamedRun]],
    *,
    intent: str,
    decode: Callable[[Any], Any] = _same_value,
    keep_source_ids: bool = True,
) -> ProcedureCandidate:
    """`learn_procedure` over `open_runs()`: runs as (trajectory id, tool names, raw arguments), in ascending id
    order (see the module docstring). The runs' steps must all be successful (the reader selects `ok is True`);
    the rest is checked as `learn_procedure` checks it, with the same errors, plus NOT_ASCENDING.

    With `keep_source_ids` False the candidate's `source_trajectory_ids` is empty and nothing per run is kept: for
    a caller that knows which runs it streamed (mining stores them from the database)."""
    if not isinstance(intent, str) or not intent.strip():
        raise ValueError(INTENT_OR_RUNS_MISSING)
    codes = ToolCodes()
    fold = Fold(codes)
    runs = 0
    ids: list[str] = []
    prefix: list[tuple[str, Sequence[Any]]] | None = []
    agreement: StreamedAgreement | None = None
    guessing = True  # False once a run after the prefix shrank the fold: the guess was too long
    previous: str | None = None
    for trajectory_id, tools, arguments in open_runs():
        if not isinstance(trajectory_id, str) or not trajectory_id.strip() or not tools:
            raise ValueError(SOURCES_INVALID)
        if previous is not None and trajectory_id <= previous:
            raise ValueError(NOT_ASCENDING)
        previous = trajectory_id
        runs += 1
        if keep_source_ids:
            ids.append(trajectory_id)
        sequence = codes.encode(tools)
        shrank = fold.add(sequence)
        if prefix is not None:
            prefix.append((sequence, arguments))
            if len(prefix) == GUESS_RUNS:
                agreement = _agreement(fold.current, prefix, decode)
                prefix = None
        elif guessing:
            if shrank:
                guessing, agreement = False, None
            elif not agreement.add(sequence, arguments):
                raise ValueError(CHANGED_BETWEEN_PASSES)  # cannot happen: an unchanged fold is contained
    if not runs:
        raise ValueError(INTENT_OR_RUNS_MISSING)
    shared = fold.current
    if not shared:
        raise ValueError(NO_SHARED_STEPS)
    if prefix is not None:
        agreement = _agreement(shared, prefix, decode)
    elif agreement is None:
        agreement = _second_pass(open_runs(), shared, codes, decode)
    tools = codes.decode(shared)
    digest = procedure_digest(intent, tools)
    return ProcedureCandidate(
        procedure_id=f"procedure:{digest[:16]}",
        intent=intent.strip(),
        steps=tuple(
            ProcedureStep(tool=tool, arguments=args) for tool, args in zip(tools, agreement.arguments(), strict=True)
        ),
        source_trajectory_ids=tuple(ids),
        revision=f"sha256:{digest}",
    )


def _agreement(
    shared: str, runs: Sequence[tuple[str, Sequence[Any]]], decode: Callable[[Any], Any]
) -> StreamedAgreement:
    agreement = StreamedAgreement(shared, runs[0][0], runs[0][1], decode)
    for sequence, arguments in runs[1:]:
        if not agreement.add(sequence, arguments):
            raise ValueError(CHANGED_BETWEEN_PASSES)
    return agreement


def _second_pass(
    runs: Iterable[StreamedRun], shared: str, codes: ToolCodes, decode: Callable[[Any], Any]
) -> StreamedAgreement:
    agreement = None
    for _, tools, arguments in runs:
        sequence = codes.encode(tools)
        if agreement is None:
            agreement = StreamedAgreement(shared, sequence, arguments, decode)
        elif not agreement.add(sequence, arguments):
            raise ValueError(CHANGED_BETWEEN_PASSES)
    if agreement is None:
        raise ValueError(CHANGED_BETWEEN_PASSES)
    return agreement


# --- offline replay over columns -------------------------------------------------------------------------------------
class StreamedJudge:
    """`replay.Judge` on one run given as columns: its outcome, tool names, raw arguments (decoded only at the
    aligned steps, and only when the procedure retains arguments), token and cost totals. Gives exactly the
    ArmResult `Judge` gives on the same run as a `CaseRun`."""

    def __init__(self, judge: Judge, decode: Callable[[Any], Any] = _same_value) -> None:
        if judge.mode == LIVE:
            raise ValueError("only offline replay judges recorded runs as columns")
        self._judge = judge
        self._decode = decode
        self._wanted = judge.codes.encode(judge.tools)
        self._alignments: dict[str, tuple[bool, tuple[int, ...]]] = {}
        # Per procedure position with retained arguments: raw (text) arguments -> how many it observes.
        self._counts = {k: {} for k, step in enumerate(judge.procedure) if step.arguments}

    def _alignment(self, sequence: str) -> tuple[bool, tuple[int, ...]]:
        """(follows, the step indexes of the greedy leftmost alignment), once per distinct tool sequence."""
        found = self._alignments.get(sequence)
        if found is None:
            match = self._judge.aligned_match(sequence)
            if match is not None:
                found = (True, tuple(start for start, _ in match.regs[1:]))
            else:
                found = (False, tuple(_leftmost(self._wanted, sequence)))
            if len(self._alignments) >= SEEN_LIMIT:
                self._alignments.clear()
            self._alignments[sequence] = found
        return found

    def _observed(self, arguments: Sequence[Any], indexes: Sequence[int]) -> int:
        procedure = self._judge.procedure
        observed = 0
        for k, counts in self._counts.items():
            if k >= len(indexes):
                break
            raw = arguments[indexes[k]]
            count = counts.get(raw) if type(raw) is str else None
            if count is None:
                count = observed_in((procedure[k],), (self._decode(raw),))
                if type(raw) is str and len(counts) < SEEN_LIMIT:
                    counts[raw] = count
            observed += count
        return observed

    def __call__(
        self, outcome: str, tools: Sequence[str], arguments: Sequence[Any], *, tokens: int, cost: float
    ) -> ArmResult:
        if outcome not in OUTCOMES:
            raise ValueError(f"run outcome must be one of {', '.join(OUTCOMES)}")
        judge = self._judge
        sequence = judge.codes.encode(tools)
        follows, indexes = self._alignment(sequence)
        return ArmResult(
            answered=True,
            passed=outcome == "success" and follows,
            outcome=outcome,
            follows=follows,
            observed_arguments=self._observed(arguments, indexes) if judge.retained else 0,
            retained_arguments=judge.retained,
            steps=len(sequence),
            tokens=tokens,
            cost=cost,
        )


def _leftmost(wanted: str, sequence: str) -> list[int]:
    """The step indexes of `wanted`'s greedy leftmost alignment in `sequence` (as many as it allows)."""
    indexes: list[int] = []
    for index, code in enumerate(sequence):
        if len(indexes) == len(wanted):
            break
        if code == wanted[len(indexes)]:
            indexes.append(index)
    return indexes


@dataclass(frozen=True, kw_only=True)
class StreamedReport:
    """What `ReplayReport` tells about a replay, without its cases: the metrics and the ids of the notable cases."""

    mode: str
    metrics: Mapping[str, float | int | None]
    active_metrics: Mapping[str, float | int | None] | None
    regressions: tuple[str, ...]
    improvements: tuple[str, ...]
    counterexamples: tuple[str, ...]
    unanswered: tuple[str, ...]
    active_unanswered: tuple[str, ...]


class _ArmTally:
    """`replay.summarize` kept as running totals (the costs are kept as doubles, 8 bytes a case, so their mean is
    summed by `sum` in case order: bit for bit the figure `summarize` gives)."""

    def __init__(self) -> None:
        self.cases = self.answered = self.passed = self.succeeded = self.follows = 0
        self.observed = self.retained = self.steps = self.tokens = self.counterexamples = 0
        self.costs = array("d")

    def add(self, arm: ArmResult) -> None:
        self.cases += 1
        if not arm.answered:
            return
        self.answered += 1
        self.passed += arm.passed
        self.succeeded += arm.outcome == "success"
        self.follows += bool(arm.follows)
        self.observed += arm.observed_arguments
        self.retained += arm.retained_arguments
        self.steps += arm.steps
        self.tokens += arm.tokens
        self.costs.append(arm.cost)
        self.counterexamples += arm.counterexample

    def metrics(self) -> dict[str, float | int | None]:
        count = self.answered

        def share(total: int) -> float | None:
            return total / count if count else None

        return {
            "cases": self.cases,
            "answered": count,
            "answered_rate": count / self.cases if self.cases else None,
            "task_success": share(self.passed),
            "outcome_success": share(self.succeeded),
            "tool_correctness": share(self.follows),
            "grounding": self.observed / self.retained if self.retained else None,
            "mean_steps": share(self.steps),
            "mean_tokens": share(self.tokens),
            "mean_cost": sum(self.costs) / count if count else None,
            "counterexamples": self.counterexamples,
        }


class OfflineReplay:
    """`replay_procedure(..., mode="offline")` one case at a time, over runs given as columns: `case` judges one
    recorded run (or None: the run is gone, an unanswered case) for the candidate and the active version and
    returns the CaseResult `replay_procedure` would; `report` sums up the cases seen. Nothing per case is kept but
    its cost and the ids of regressions, improvements, counterexamples and unanswered cases. Case ids must not
    repeat (the caller checks: this keeps no set of them)."""

    def __init__(
        self,
        procedure: Sequence[ProcedureStep],
        *,
        active: Sequence[ProcedureStep] | None = None,
        decode: Callable[[Any], Any] = _same_value,
    ) -> None:
        procedure = _checked_procedure(procedure, "candidate")
        active = None if active is None else _checked_procedure(active, "active")
        codes = ToolCodes()
        self._candidate = StreamedJudge(Judge(procedure, codes, mode=OFFLINE), decode)
        self._active = None if active is None else StreamedJudge(Judge(active, codes, mode=OFFLINE), decode)
        self._candidate_tally = _ArmTally()
        self._active_tally = None if active is None else _ArmTally()
        self._notable: dict[str, list[str]] = {
            "regressions": [],
            "improvements": [],
            "counterexamples": [],
            "unanswered": [],
            "active_unanswered": [],
        }

    def case(self, case_id: str, run: tuple[str, Sequence[str], Sequence[Any], int, float] | None) -> CaseResult:
        """`run` is (outcome, tool names, raw arguments, tokens, cost)."""
        if not isinstance(case_id, str) or not case_id.strip():
            raise ValueError("replay case id is required")
        if run is None:
            candidate = ArmResult(answered=False, passed=False)
            active = None if self._active is None else candidate
        else:
            outcome, tools, arguments, tokens, cost = run
            candidate = self._candidate(outcome, tools, arguments, tokens=tokens, cost=cost)
            active = None if self._active is None else self._active(outcome, tools, arguments, tokens=tokens, cost=cost)
        result = CaseResult(case_id=case_id, candidate=candidate, active=active)
        self._candidate_tally.add(candidate)
        notable = self._notable
        if active is not None:
            self._active_tally.add(active)
            if not active.answered:
                notable["active_unanswered"].append(case_id)
        if result.regression:
            notable["regressions"].append(case_id)
        if result.improvement:
            notable["improvements"].append(case_id)
        if candidate.counterexample:
            notable["counterexamples"].append(case_id)
        if not candidate.answered:
            notable["unanswered"].append(case_id)
        return result

    def report(self) -> StreamedReport:
        metrics = self._candidate_tally.metrics()
        notable = {name: tuple(ids) for name, ids in self._notable.items()}
        metrics["regressions"] = len(notable["regressions"])
        metrics["improvements"] = len(notable["improvements"])
        return StreamedReport(
            mode=OFFLINE,
            metrics=metrics,
            active_metrics=None if self._active_tally is None else self._active_tally.metrics(),
            **notable,
        )
