"""`learn_procedure`: the stable tool subsequence of successful runs, with the arguments they all agree on (§2.1)."""

import hashlib
import marshal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain, compress, count, islice, repeat
from operator import add, and_, attrgetter, eq, is_, itemgetter, mod, mul, not_, sub
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
    """Reduce successful runs to their shared tool subsequence and the arguments every run agrees on.

    The fold (§2.1 step 2) needs every run's tools before the alignment (step 4) can start, which would mean two
    passes over the steps, the second one reading cold memory. Instead the fold is first run over a sorted prefix of
    the runs (`_GUESS_RUNS`), giving a guess; then one pass over all runs, in the mapping's own order (usually the
    order the steps were built in, so memory is read sequentially), in batches of about `_BATCH_STEPS` steps: it
    checks the batch's steps (`all_true`), encodes their tools and aligns the guess in them while those steps are in
    cache (`ArgumentAgreement.add_batch`). If every run contains the guess, the guess *is* the fold's result: the fold
    continues from it over the remaining sorted runs, and a current sequence contained in the next run is its LCS
    with that run (see lcs.py, shortcut 1), so it never changes. If a run does not contain it, the pass goes on
    checking and encoding, the fold goes on from the guess over the runs after the prefix, and the alignment is
    redone from the codes (a second pass over the aligned steps only).

    Errors keep the order of §2.1: an unsuccessful run raises SOURCES_INVALID before NO_SHARED_STEPS (every run is
    checked in the pass), and if anything else fails on the way (say, arguments that are no mapping), every run is
    checked first, so that a failed step is what gets reported."""
    if not isinstance(intent, str) or not intent.strip() or not trajectories:
        raise ValueError(INTENT_OR_RUNS_MISSING)
    runs = identified_runs(trajectories)
    try:
        ordered_ids = sorted(runs)
        tools, arguments = _fold_and_retain(runs, ordered_ids)
    except Exception:
        _require_successful(runs.values())
        raise
    if not tools:
        raise ValueError(NO_SHARED_STEPS)
    digest = procedure_digest(intent, tools)
    return ProcedureCandidate(
        procedure_id=f"procedure:{digest[:16]}",
        intent=intent.strip(),
        steps=tuple(ProcedureStep(tool=tool, arguments=args) for tool, args in zip(tools, arguments, strict=True)),
        source_trajectory_ids=tuple(ordered_ids),
        revision=f"sha256:{digest}",
    )


_GUESS_RUNS = 64  # at least this many sorted runs (and 1/16 of all) are folded for the guess
_BATCH_RUNS = 256  # at most this many runs checked, encoded, then aligned together,
_BATCH_STEPS = 2_048  # and about this many steps: a few MB of step objects and their fields, still in cache
_NAMES_FROM = 16  # a known alignment prefix of at least this many tools is found by names (`_Batch.encode`)
_WHOLE_STEPS = 16_384  # at most this many steps, and runs a guess would fold a quarter of: handled whole


def _fold_and_retain(
    runs: Mapping[str, Sequence[TrajectoryStep]], ordered_ids: Sequence[str]
) -> tuple[Tools, list[Mapping[str, Any]]]:
    """The shared tools and their retained arguments, after checking every step; see `learn_procedure`."""
    codes = ToolCodes()
    every_run = list(runs.values())
    if len(every_run) <= 4 * _GUESS_RUNS and sum(map(len, every_run)) <= _WHOLE_STEPS:
        return _fold_and_retain_whole(runs, every_run, ordered_ids, codes)
    lookup = codes.lookup
    prefix = _Batch([runs[trajectory_id] for trajectory_id in ordered_ids[: max(_GUESS_RUNS, len(ordered_ids) // 16)]])
    prefix.encode(lookup)
    first_codes, first_steps = prefix.sequences[0], prefix.runs[0]
    guess = shared_codes(prefix.sequences, codes.ranks())
    agreement: ArgumentAgreement | None = ArgumentAgreement(guess, first_codes, first_steps)
    bounds = _batch_bounds(every_run)
    batches: list[_Batch] = []  # kept for a second pass if the guess fails: their codes, not their steps
    by_names = True  # whether runs starting with the known alignment prefix were common in the last batch that looked
    for number, batch_runs in enumerate(every_run[start:stop] for start, stop in bounds):
        batch = _Batch(batch_runs)
        if not all_true(list(map(_ok, chain.from_iterable(batch_runs)))):
            raise ValueError(SOURCES_INVALID)
        known = None if agreement is None or not (by_names or number % 16 == 0) else agreement.known
        if known is None or len(known[3]) < _NAMES_FROM:
            batch.encode(lookup)
        else:
            by_names = batch.encode(lookup, known)
        if agreement is not None and not agreement.add_batch(batch):
            agreement = None  # the guess is not in some run: it was too long
        batches.append(batch)
    if agreement is None:
        run_codes = dict(zip(runs, chain.from_iterable(batch.sequences for batch in batches), strict=True))
        # The fold over the prefix gave the guess: it goes on from there over the other sorted runs.
        rest = [run_codes[trajectory_id] for trajectory_id in ordered_ids[len(prefix.runs) :]]
        shared = shared_codes(rest, codes.ranks(), current=guess)
        agreement = ArgumentAgreement(shared, first_codes, first_steps)
        for batch in batches:
            agreement.add_batch(batch)
    return codes.decode(agreement.shared), agreement.arguments()


def _fold_and_retain_whole(
    runs: Mapping[str, Sequence[TrajectoryStep]],
    every_run: list[Sequence[TrajectoryStep]],
    ordered_ids: Sequence[str],
    codes: ToolCodes,
) -> tuple[Tools, list[Mapping[str, Any]]]:
    """`_fold_and_retain` for an input small enough to stay in cache whole: one batch, checked, encoded once (not
    the guess's prefix a second time), folded in full in sorted order and aligned."""
    batch = _Batch(every_run)  # the runs in the mapping's order (every_run is runs.values())
    if not all_true(list(map(_ok, chain.from_iterable(every_run)))):
        raise ValueError(SOURCES_INVALID)
    batch.encode(codes.lookup)
    sequences = batch.sequences
    run_codes = dict(zip(runs, sequences, strict=True))
    shared = shared_codes(list(map(run_codes.__getitem__, ordered_ids)), codes.ranks())
    first = ordered_ids[0]
    agreement = ArgumentAgreement(shared, run_codes[first], runs[first])
    for start, stop in _batch_bounds(every_run):
        agreement.add_batch(_Batch(every_run[start:stop], sequences[start:stop]))
    return codes.decode(agreement.shared), agreement.arguments()


def _batch_bounds(runs: Sequence[Sequence[TrajectoryStep]]) -> list[tuple[int, int]]:
    """The runs' batches, as (start, stop): 1 run, then 2, 4, ... up to about `_BATCH_STEPS` steps (at most
    `_BATCH_RUNS` runs) each. The first batches are small because positions whose arguments vary from run to run
    are found in the first runs compared, and every later run then fetches only the positions still agreeing."""
    size = max(1, min(_BATCH_RUNS, _BATCH_STEPS * len(runs) // max(1, sum(map(len, runs)))))
    bounds, start, width = [], 0, 1
    while start < len(runs):
        bounds.append((start, min(start + width, len(runs))))
        start, width = start + width, min(2 * width, size)
    return bounds


def identified_runs(trajectories: Mapping[str, Sequence[TrajectoryStep]]) -> dict[str, Sequence[TrajectoryStep]]:
    """The runs as lists or tuples, after checking that every id is a non-blank string and every run has steps
    (each check one C-level pass over the runs)."""
    runs = dict(trajectories)
    if not all(map(isinstance, runs, repeat(str))) or not all(map(str.strip, runs)):
        raise ValueError(SOURCES_INVALID)
    if not all(map(isinstance, runs.values(), repeat(list | tuple))):
        runs = {key: steps if isinstance(steps, list | tuple) else tuple(steps) for key, steps in runs.items()}
    if not all(runs.values()):
        raise ValueError(SOURCES_INVALID)
    return runs


def all_true(values: list[Any]) -> bool:
    """Whether every value *is* True, at C speed and with no call per value: marshal writes True as the single byte
    b"T" (it tests identity, `v == Py_True`, before anything else), writes every other value as some other byte
    or as more than one byte, or refuses it. So the list's body, after its 5-byte header, is b"T" * n exactly when
    all n values are True (1, 1.0 and other values equal to True are not)."""
    try:
        body = marshal.dumps(values)[5:]
    except (ValueError, TypeError, RecursionError):  # a value marshal cannot write is not True
        return False
    return body == b"T" * len(values)


def _require_successful(runs: Iterable[Sequence[TrajectoryStep]]) -> None:
    if not all(map(is_, map(_ok, chain.from_iterable(runs)), repeat(True))):
        raise ValueError(SOURCES_INVALID)


def shared_codes(sequences: Sequence[str], ranks: Mapping[str, int], *, current: str | None = None) -> str:
    """Fold `lcs_codes` over the runs' code strings in order (from `current`, the fold of earlier runs, if given).

    Two kinds of run leave the fold unchanged, so they are skipped: a repeat of a sequence folded before, and a run
    that contains the current sequence. Both follow from one fact: the current sequence only shrinks and is a
    subsequence of every run folded in so far (an LCS is a subsequence of both its inputs), and a sequence contained
    in the next run is its LCS with that run (lcs.py, shortcut 1). So only the distinct sequences are folded, in
    order of first appearance, and the scan for the next one that does not contain the current sequence runs at C
    speed (a compiled regex per sequence, `map` and `compress`: no interpreter work per run). Any run found that
    way makes the LCS strictly shorter than the current sequence, so at most len(first run) folds need the DP: the
    whole fold costs O(N·L) for the checks plus at most L tables of L×L cells, whatever the number of runs."""
    distinct = list(dict.fromkeys(sequences))
    current, start = (distinct[0], 1) if current is None else (current, 0)
    while current and start < len(distinct):
        contained_in = subsequence_pattern(current).match
        not_contained = map(not_, map(contained_in, islice(distinct, start, None)))
        position = next(compress(count(start), not_contained), None)
        if position is None:
            break
        current = lcs_codes(current, distinct[position], ranks)
        start = position + 1
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


ALIGNMENTS_REMEMBERED = 65_536  # distinct tool sequences whose alignment an agreement keeps


class ArgumentAgreement:
    """Which positions of `shared` all runs added so far agree on with the first run (the smallest id), as dicts.

    Every run is compared with the first run, never with its neighbour, so runs can be added in any order. Only
    positions still agreeing are examined: one regex match per distinct code string finds the greedy leftmost
    alignment, capturing only those positions (`add` keeps one match per distinct code string, as runs with the
    same tool sequence are common in practice); it is rebuilt only when a position stops agreeing. A run whose
    aligned arguments are all plain or read-only dicts equal to the expected ones is settled in one list comparison
    (list equality is elementwise `==`, the per-position test), and so is a whole batch of such runs in `add_runs`.
    `add` returns False, and changes nothing, for a run that does not contain `shared` at all. (The streamed
    variant, columns.StreamedAgreement, reuses the alignment: `_align` and `_indexes`.)"""

    def __init__(self, shared: str, first_codes: str, first_steps: Sequence[TrajectoryStep]) -> None:
        self.shared = shared
        self._agreeing = list(range(len(shared)))
        self._align()
        self._first = [first_steps[index].arguments for index in self._indexes(first_codes) or ()]
        self._expected = [dict(arguments) for arguments in self._first]

    def _align(self) -> None:
        """At the start, and whenever positions stop agreeing: the pattern captures the agreeing positions, or a
        superset of them from which they are picked. It is compiled again only once they are fewer than half of
        the captured ones: compiling a pattern of L positions costs far more than a match, so recompiling at every
        disagreement cost up to L compiles per call (a run with one noisy step per position), halving at most log L."""
        agreeing = self._agreeing
        if not hasattr(self, "_captured") or 2 * len(agreeing) < len(self._captured):
            self._captured = tuple(agreeing)
            self._match = subsequence_pattern(self.shared, capture=frozenset(agreeing)).match
            # Per distinct code string, the step indexes of the captured positions in its leftmost alignment.
            self._cache: dict[str, tuple[int, ...]] = {}
        place = {position: group for group, position in enumerate(self._captured)}
        # None when every captured position agrees; else a getter of the agreeing ones among the captured ones.
        self._pick = None if len(agreeing) == len(self._captured) else _getter(tuple(map(place.__getitem__, agreeing)))
        # A run's leftmost alignment depends only on its codes up to the last aligned step: (those codes, the
        # alignment's agreeing indexes, an itemgetter of them) for the last run aligned by a match (see add_batch).
        # Also that run's tool names up to there: `_Batch.encode` finds such runs by their names (when long enough).
        self._known: tuple[str, tuple[int, ...], Callable[[Sequence[TrajectoryStep]], Any], list[str]] | None = None

    @property
    def known(self) -> tuple[str, tuple[int, ...], Callable[[Sequence[TrajectoryStep]], Any], list[str]] | None:
        return self._known

    def _indexes(self, codes: str) -> tuple[int, ...] | None:
        """The step indexes of the agreeing positions in the run's leftmost alignment (None: `shared` is not in it)."""
        indexes = self._cache.get(codes)
        if indexes is None:
            match = self._match(codes)
            if match is None:
                return None
            indexes = self._cache[codes] = tuple(map(_start, match.regs[1:]))
            if len(self._cache) > ALIGNMENTS_REMEMBERED:  # a bound, so memory stays flat in the number of runs
                self._cache.clear()
        return indexes if self._pick is None else self._pick(indexes)

    def add(self, codes: str, steps: Sequence[TrajectoryStep]) -> bool:
        indexes = self._indexes(codes)
        if indexes is None:
            return False
        found = [steps[index].arguments for index in indexes]
        if found == self._expected and _COMPARES_AS_DICT.issuperset(map(type, found)):
            return True
        pairs = [
            (k, wanted)
            for k, arguments, wanted in zip(self._agreeing, found, self._expected, strict=True)
            if _as_dict(arguments) == wanted
        ]
        if len(pairs) < len(self._agreeing):
            self._agreeing = [k for k, _ in pairs]
            self._expected = [wanted for _, wanted in pairs]
            self._align()
        return True

    def add_runs(self, sequences: Sequence[str], runs: Sequence[Sequence[TrajectoryStep]]) -> bool:
        """`add` for each of several runs (their code strings and steps, in the same order); see `add_batch`."""
        return self.add_batch(_Batch(runs, sequences))

    def add_batch(self, batch: "_Batch") -> bool:
        """`add` for each run of an encoded batch, settled in one list comparison when every run's aligned arguments
        are plain or read-only dicts equal to the expected ones (the common case). A run whose codes start with
        those of the last run aligned by a match, up to that run's last aligned step, has the same alignment (the
        greedy leftmost alignment reads no further): one `startswith` on the batch's joined codes finds it, and its
        arguments are fetched by one cached `itemgetter`, with no regex and no interpreter work per step. The other
        runs are matched. Returns False, and changes nothing, if some run does not contain `shared`."""
        joined, starts, ends, runs = batch.joined, batch.starts, batch.ends, batch.runs
        if not self._agreeing:
            return not any(map(is_, map(self._match, repeat(joined), starts, ends), repeat(None)))
        known = self._known
        if known is not None:
            hits = list(map(joined.startswith, repeat(known[0]), starts, ends))
            if all(hits):
                return self._settle(list(map(_arguments, chain.from_iterable(map(known[2], runs)))), batch)
            found = list(map(_arguments, chain.from_iterable(map(known[2], compress(runs, hits)))))
            misses = list(map(not_, hits))
            starts, ends, runs = (
                list(compress(starts, misses)),
                list(compress(ends, misses)),
                list(compress(runs, misses)),
            )
        else:
            found = []
        # A miss's codes are sliced out, so its match's spans are indexes in its own steps (a slice per run costs
        # less than an offset per aligned step).
        sequences = list(map(joined.__getitem__, map(slice, starts, ends)))
        matches = list(map(self._match, sequences))
        if any(map(is_, matches, repeat(None))):
            return False
        pick = self._pick
        found += [
            steps[begin].arguments
            for match, steps in zip(matches, runs, strict=True)
            for begin, _ in (match.regs[1:] if pick is None else pick(match.regs[1:]))
        ]
        last = matches[-1]
        indexes = tuple(map(_start, last.regs[1:] if pick is None else pick(last.regs[1:])))
        prefix = sequences[-1][: last.end()]
        self._known = (prefix, indexes, _getter(indexes), list(map(_tool, runs[-1][: len(prefix)])))
        return self._settle(found, batch)

    def _settle(self, found: list[Any], batch: "_Batch") -> bool:
        """`found`: every run's arguments at the agreeing positions, run after run (in any run order), so the one
        at index i is at agreeing position i % width. Positions are independent (the alignment is the whole of
        `shared`'s, whichever positions agree), so a position stops agreeing when any run's arguments there differ:
        the batch's are compared at once, and only the differing ones or those of other types by the interpreter."""
        expected = self._expected * len(batch.runs)
        if found == expected and _COMPARES_AS_DICT.issuperset(map(type, found)):
            return True
        width = len(self._expected)
        plain = list(map(_COMPARES_AS_DICT.__contains__, map(type, found)))
        unequal = map(not_, map(eq, found, expected))  # a plain or read-only dict compares as a dict already
        differing = set(map(mod, compress(count(), map(and_, plain, unequal)), repeat(width)))
        # Any other mapping is compared as a dict (`==` is the per-position test, §2.1: so `not ==`, not `!=`).
        odd = compress(count(), map(not_, plain))
        differing.update(index % width for index in odd if not _as_dict(found[index]) == expected[index])  # noqa: SIM201
        if differing:
            kept = [k for k in range(width) if k not in differing]
            self._agreeing = [self._agreeing[k] for k in kept]
            self._expected = [self._expected[k] for k in kept]
            self._align()
        return True

    def arguments(self) -> list[Mapping[str, Any]]:
        """Per position of `shared`: the first run's arguments where every run agreed, else {}."""
        kept = set(self._agreeing)
        return [self._first[position] if position in kept else {} for position in range(len(self.shared))]


class _Batch:
    """Runs handled together: once encoded, every run's code string in one joined string, each run's at
    `joined[start:end]`. Runs' code strings are sliced only when asked for (`sequences`): the common paths read
    them in place."""

    __slots__ = ("_sequences", "ends", "joined", "runs", "starts")

    def __init__(self, runs: Sequence[Sequence[TrajectoryStep]], sequences: Sequence[str] | None = None) -> None:
        self.runs = runs
        self.ends = list(accumulate(map(len, runs)))
        self.starts = [0, *self.ends[:-1]]
        self.joined = "" if sequences is None else "".join(sequences)
        self._sequences = None if sequences is None else list(sequences)

    def encode(self, lookup: Callable[[str], str], known=None) -> bool:
        """All the runs' codes in one join: no interpreter work per step or per run. With `known` (an agreement's
        known alignment prefix: its codes and tool names), a run whose first tools are those names is not looked up
        there: its codes are the known ones plus its encoded rest (comparing names costs less than looking each up,
        once the names are many: a few C calls per run more). Returns whether such runs were at least half."""
        if known is None:
            self.joined = "".join(map(lookup, map(_tool, chain.from_iterable(self.runs))))
            return False
        prefix, names = known[0], known[3]
        tools = list(map(_tool, chain.from_iterable(self.runs)))
        starts, ends, width = self.starts, self.ends, len(names)
        heads = map(tools.__getitem__, map(slice, starts, map(min, map(add, starts, repeat(width)), ends)))
        hits = list(map(eq, heads, repeat(names)))
        if not any(hits):
            self.joined = "".join(map(lookup, tools))
            return False
        cuts = list(map(add, starts, map(mul, hits, repeat(width))))  # a hit's rest starts after the known names
        rest = "".join(map(lookup, chain.from_iterable(map(tools.__getitem__, map(slice, cuts, ends)))))
        rest_ends = list(accumulate(map(sub, ends, cuts)))
        rests = map(rest.__getitem__, map(slice, [0, *rest_ends[:-1]], rest_ends))
        self._sequences = list(map(add, map(mul, repeat(prefix), hits), rests))
        self.joined = "".join(self._sequences)
        return 2 * sum(hits) >= len(hits)

    @property
    def sequences(self) -> list[str]:
        if self._sequences is None:
            self._sequences = list(map(self.joined.__getitem__, map(slice, self.starts, self.ends)))
        return self._sequences


def _getter(indexes: tuple[int, ...]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """An itemgetter that always returns a tuple (a plain itemgetter of one index returns the item)."""
    if not indexes:
        return lambda items: ()
    if len(indexes) == 1:
        single = itemgetter(indexes[0])
        return lambda items: (single(items),)
    return itemgetter(*indexes)


def _as_dict(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """A dict or read-only dict compares as a dict already; anything else is copied into one."""
    return arguments if type(arguments) in _COMPARES_AS_DICT else dict(arguments)
