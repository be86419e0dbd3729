"""Traces on their way to the refiner (spec §6 step 2): sources, redaction, stale policy, sampling, the attempts block.

The attempts block is Algorithm 1's C_k = Tail_Lmax(ConcatTrajectories): high-scoring attempts first and low-scoring
ones last, so that cutting from the front (the tail keeps the *end*) sacrifices successes before failures.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from .documents import SCHEMA_VERSION
from .evaluation import Trace
from .graph import Graph

STALE_POLICIES = ("warn", "drop", "allow")
FAILING = "failing"
PASSING = "passing"
STRATA = (FAILING, PASSING)
NO_TRACES = "(no trajectories were collected this round)"
TAIL_MARKER = "[... the start of the trajectories was cut to fit the length cap ...]\n"

Redactor = Callable[[str], str]
TokenCounter = Callable[[str], int]


# -- sources ---------------------------------------------------------------------------------------------------------


@runtime_checkable
class TraceSource(Protocol):
    """Where a round's training traces come from: the rollout of the head graph on batch B_k, or recorded runs."""

    def collect(self, graph: Graph, *, graph_ref: str | None, iteration: int) -> list[Trace]: ...


class StaticTraceSource:
    """The same traces every round."""

    def __init__(self, traces: Iterable[Trace]) -> None:
        self.traces = tuple(traces)

    def collect(self, graph: Graph, *, graph_ref: str | None, iteration: int) -> list[Trace]:
        return list(self.traces)


class StridedTraceSource:
    """Round k takes the k-th window of `stride` traces (round 1 the first), wrapping around the end of the list.

    A stride at least as long as the list takes the whole list, in order, every round.
    """

    def __init__(self, traces: Iterable[Trace], stride: int) -> None:
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
            raise ValueError(f"stride must be an integer ≥ 1, not {stride!r}")
        self.traces = tuple(traces)
        self.stride = stride

    def window_indexes(self, iteration: int) -> list[int]:
        total = len(self.traces)
        if self.stride >= total:
            return list(range(total))
        start = (iteration - 1) * self.stride
        return [(start + offset) % total for offset in range(self.stride)]

    def collect(self, graph: Graph, *, graph_ref: str | None, iteration: int) -> list[Trace]:
        return [self.traces[index] for index in self.window_indexes(iteration)]


# -- redaction and stale traces --------------------------------------------------------------------------------------


def redact_trace(trace: Trace, redact: Redactor) -> Trace:
    """Redact the text, every step's observation and the guidance texts; args, prediction, truth and meta stay."""
    steps = tuple(replace(step, observation=_redacted(step.observation, redact)) for step in trace.steps)
    guidance = tuple(_redacted(text, redact) for text in trace.guidance)
    return replace(trace, text=_redacted(trace.text, redact), steps=steps, guidance=guidance)


def _redacted(text: str, redact: Redactor) -> str:
    return redact(text) if text else text


def is_stale(trace: Trace, head_ref: str | None) -> bool:
    """A trace is stale when it names the revision it ran under and that revision is not the head."""
    return trace.graph_ref is not None and trace.graph_ref != head_ref


def stale_split(traces: Sequence[Trace], head_ref: str | None, policy: str) -> tuple[list[Trace], list[str], list[str]]:
    """(kept traces, stale trace ids, warnings) under the stale-trace policy.

    `warn` keeps stale traces, lists them and warns; `drop` leaves them out, lists them and warns; `allow` keeps them
    and reports nothing.
    """
    if policy not in STALE_POLICIES:
        raise ValueError(f"stale_trace_policy must be one of {', '.join(STALE_POLICIES)}, not {policy!r}")
    if policy == "allow":
        return list(traces), [], []
    stale_ids = [trace.id for trace in traces if is_stale(trace, head_ref)]
    if not stale_ids:
        return list(traces), [], []
    if policy == "drop":
        kept = [trace for trace in traces if not is_stale(trace, head_ref)]
        return kept, stale_ids, [_stale_warning(stale_ids, "left out of this round")]
    return list(traces), stale_ids, [_stale_warning(stale_ids, "kept and marked STALE")]


def _stale_warning(stale_ids: Sequence[str], fate: str) -> str:
    return (
        f"{len(stale_ids)} trace(s) ran under a graph revision other than the head and were {fate}: "
        f"{', '.join(stale_ids)}"
    )


# -- stratified sampling ---------------------------------------------------------------------------------------------


def _sample_size(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be None or an integer ≥ 0, not {value!r}")
    return value


@dataclass
class StratifiedSampler:
    """Up to `failing_sample` failing and `passing_sample` passing traces a round, rotating through unseen ids.

    A trace passes when its score reaches `success_threshold`. None/None keeps every trace; None for one stratum
    alone keeps that whole stratum. Each stratum remembers the ids it has handed out and draws from the unseen ones
    with an RNG seeded from (seed, iteration, stratum); once every id of a stratum has been seen it starts over. Ids
    no longer offered are forgotten, so the state stays as small as the pool. `to_document` / `from_document` carry
    the state across invocations.
    """

    failing_sample: int | None
    passing_sample: int | None
    seed: int = 17
    success_threshold: float = 0.5
    seen: dict[str, set[str]] = field(default_factory=lambda: {stratum: set() for stratum in STRATA})

    def __post_init__(self) -> None:
        _sample_size(self.failing_sample, "failing_sample")
        _sample_size(self.passing_sample, "passing_sample")
        self.seen = {stratum: set(self.seen.get(stratum, ())) for stratum in STRATA}

    @property
    def keeps_everything(self) -> bool:
        return self.failing_sample is None and self.passing_sample is None

    def stratum_of(self, trace: Trace) -> str:
        return PASSING if trace.score >= self.success_threshold else FAILING

    def sample(self, traces: Sequence[Trace], iteration: int) -> list[Trace]:
        """This round's traces, in their given order."""
        if self.keeps_everything:
            return list(traces)
        chosen: set[str] = set()
        for stratum, size in ((FAILING, self.failing_sample), (PASSING, self.passing_sample)):
            pool = sorted({trace.id for trace in traces if self.stratum_of(trace) == stratum})
            chosen |= self._draw(stratum, pool, size, iteration)
        return [trace for trace in traces if trace.id in chosen]

    def _draw(self, stratum: str, pool: list[str], size: int | None, iteration: int) -> set[str]:
        seen = self.seen[stratum] & set(pool)
        if size is None or size >= len(pool):
            self.seen[stratum] = set(pool)
            return set(pool)
        rng = random.Random(f"{self.seed}:{iteration}:{stratum}")
        unseen = [trace_id for trace_id in pool if trace_id not in seen]
        if len(unseen) >= size:
            picked = rng.sample(unseen, size)
            self.seen[stratum] = seen | set(picked)
            return set(picked)
        picked = list(unseen)  # the stratum runs out: take what is left, then start a new rotation
        rest = [trace_id for trace_id in pool if trace_id not in unseen]
        picked += rng.sample(rest, size - len(picked))
        self.seen[stratum] = set(picked)
        return set(picked)

    def to_document(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "failing_sample": self.failing_sample,
            "passing_sample": self.passing_sample,
            "seed": self.seed,
            "success_threshold": self.success_threshold,
            "seen": {stratum: sorted(self.seen[stratum]) for stratum in STRATA},
        }

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> StratifiedSampler:
        seen = value.get("seen") or {}
        return cls(
            failing_sample=value.get("failing_sample"),
            passing_sample=value.get("passing_sample"),
            seed=value.get("seed", 17),
            success_threshold=value.get("success_threshold", 0.5),
            seen={stratum: set(seen.get(stratum) or ()) for stratum in STRATA},
        )


# -- the attempts block ----------------------------------------------------------------------------------------------


def order_attempts(traces: Iterable[Trace], success_threshold: float = 0.5) -> list[Trace]:
    """High scores (≥ threshold) first, then low scores; each group by descending score, then id."""
    traces = list(traces)
    high = [trace for trace in traces if trace.score >= success_threshold]
    low = [trace for trace in traces if trace.score < success_threshold]
    return sorted(high, key=_by_score_then_id) + sorted(low, key=_by_score_then_id)


def _by_score_then_id(trace: Trace) -> tuple[float, str]:
    return (-trace.score, trace.id)


def render_attempt(trace: Trace, *, stale: bool = False) -> str:
    """One attempt: a header line naming id, task, score and passed (and STALE), then its trajectory."""
    passed = "yes" if trace.outcome.passed else "no"
    mark = " | STALE (ran under another graph revision than the current one)" if stale else ""
    header = f"--- Attempt {trace.id} | task {trace.task_id} | score {trace.score:.4f} | passed {passed}{mark} ---"
    return f"{header}\n{trace.rendered() or '(no steps recorded)'}"


def node_usage(traces: Iterable[Trace]) -> list[tuple[str, int, int]]:
    """(node id, visits across all traces, traces that visited it), most visited first, then by id."""
    visits: Counter[str] = Counter()
    attempts: Counter[str] = Counter()
    for trace in traces:
        visits.update(trace.nodes_visited)
        attempts.update(set(trace.nodes_visited))
    return sorted(((node, visits[node], attempts[node]) for node in visits), key=lambda row: (-row[1], row[0]))


def render_node_usage(traces: Iterable[Trace]) -> str:
    """A markdown table of node visits; empty when no trace recorded the nodes it visited."""
    rows = node_usage(traces)
    if not rows:
        return ""
    lines = ["Node usage across these attempts:", "| node | visits | attempts |", "| --- | --- | --- |"]
    lines += [f"| {node} | {visits} | {attempts} |" for node, visits, attempts in rows]
    return "\n".join(lines)


def _group(title: str, traces: Sequence[Trace], stale: set[str]) -> str:
    attempts = [render_attempt(trace, stale=trace.id in stale) for trace in traces]
    return "\n\n".join([f"{title}, {len(traces)} attempt(s):", *attempts])


def render_attempts_block(
    traces: Sequence[Trace],
    *,
    success_threshold: float = 0.5,
    char_cap: int = 120_000,
    token_counter: TokenCounter | None = None,
    stale_ids: Iterable[str] = (),
) -> str:
    """C_k: high-scoring attempts, then low-scoring ones, then the node-usage table, tail-cut to the cap.

    The cap counts characters, or tokens when `token_counter` is given; the cut keeps the end and drops the front.
    """
    if not traces:
        return tail_cut(NO_TRACES, char_cap, token_counter)
    stale = set(stale_ids)
    ordered = order_attempts(traces, success_threshold)
    high = [trace for trace in ordered if trace.score >= success_threshold]
    low = [trace for trace in ordered if trace.score < success_threshold]
    sections = []
    if high:
        sections.append(_group(f"High-scoring attempts (score ≥ {success_threshold:g})", high, stale))
    if low:
        sections.append(_group(f"Low-scoring attempts (score < {success_threshold:g})", low, stale))
    usage = render_node_usage(traces)
    if usage:
        sections.append(usage)
    return tail_cut("\n\n".join(sections), char_cap, token_counter)


def tail_cut(text: str, cap: int, token_counter: TokenCounter | None = None) -> str:
    """Tail_Lmax: keep the end of `text` within `cap` characters (or tokens), marking the cut at the front."""
    if token_counter is None:
        return _tail_by_characters(text, cap)
    return _tail_by_tokens(text, cap, token_counter)


def _tail_by_characters(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    if cap <= len(TAIL_MARKER):
        return text[len(text) - max(cap, 0) :]
    return TAIL_MARKER + text[len(text) - (cap - len(TAIL_MARKER)) :]


def _tail_by_tokens(text: str, cap: int, count: TokenCounter) -> str:
    """The longest suffix that, behind the marker, counts at most `cap` tokens (binary search on its start)."""
    if count(text) <= cap:
        return text
    low, high = 1, len(text)  # the answer's start lies in [low, high]; high (the empty suffix) always fits
    while low < high:
        middle = (low + high) // 2
        if count(TAIL_MARKER + text[middle:]) <= cap:
            high = middle
        else:
            low = middle + 1
    if low == len(text) and count(TAIL_MARKER) > cap:
        return ""
    return TAIL_MARKER + text[low:]


# -- the trace store's document --------------------------------------------------------------------------------------


def traces_document(traces: Iterable[Trace], iteration: int) -> dict[str, Any]:
    """One TraceStore revision: `{schema: 1, iteration, traces: [...]}`."""
    return {"schema": SCHEMA_VERSION, "iteration": iteration, "traces": [trace.to_document() for trace in traces]}


def traces_from_document(document: Mapping[str, Any]) -> tuple[int, list[Trace]]:
    """The inverse of `traces_document`: (iteration, traces)."""
    schema = document.get("schema", SCHEMA_VERSION)
    if isinstance(schema, int) and schema > SCHEMA_VERSION:
        raise ValueError(f"trace document schema {schema} is newer than this code reads; upgrade the package")
    return document["iteration"], [Trace.from_document(item) for item in document.get("traces") or ()]
