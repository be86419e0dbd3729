"""Rejection memory (spec §5): one entry per evolution round, append-only, rendered for the refiner and for people.

Despite its name the memory holds **every** round's outcome, accepted ones included (a recorded departure from the
paper's rejection-only memory). `render_for_refiner` is Algorithm 1's SerializeRejections: the refiner sees each
round's edit set plus its score, decision or diagnostics, never whole candidate graphs.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .diagnostics import Diagnostic
from .documents import SCHEMA_VERSION
from .edits import EDIT_KEYS, EditSet
from .evaluation import Evaluation

ACCEPTED = "accepted"
REJECTED = "rejected"
STRUCTURAL_FAILURE = "structural_failure"
NO_ACTION = "no_action"
DUPLICATE_CANDIDATE = "duplicate_candidate"
ENTRY_KINDS = (ACCEPTED, REJECTED, STRUCTURAL_FAILURE, NO_ACTION, DUPLICATE_CANDIDATE)
GATED_KINDS = (ACCEPTED, REJECTED)

OBJECTIVE_HEADER = "Objective for this run (every decision below is measured against it):"
NOTHING_YET = "(none yet)"
DIGEST_PREFIX = 12
TRACE_IDS_SHOWN = 8
CUT_MARKER = "\n[... cut here to fit the length cap ...]"
OPTIONAL_FIELDS = ("decision", "baseline_ref", "candidate_ref")


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string (seconds precision)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _number(value: float | None) -> str:
    return "?" if value is None else f"{value:.4f}"


def _digest_prefix(digest: str | None) -> str:
    return digest[:DIGEST_PREFIX] if digest else "none"


def _kind_label(kind: str, count: int) -> str:
    return f"{count} {kind.replace('_', ' ')}"


def _disposition_of(decision: Mapping[str, Any] | None) -> str | None:
    value = (decision or {}).get("disposition")
    return value if isinstance(value, str) else None


def _decision_lines(decision: Mapping[str, Any] | None) -> list[str]:
    """render_decision's lines for objective feedback; nothing for scalar feedback (no disposition)."""
    if _disposition_of(decision) is None:
        return []
    from .objectives import render_decision  # written alongside this module; imported only when needed

    return list(render_decision(decision))


def _edits_as_dict(edits: EditSet | Mapping[str, Any] | None) -> dict[str, Any]:
    if edits is None:
        return {}
    if isinstance(edits, EditSet):
        return edits.to_dict()
    return copy.deepcopy(dict(edits))


def _plain_candidate(candidate: Any) -> dict[str, Any] | None:
    if candidate is None:
        return None
    if hasattr(candidate, "to_document"):
        return candidate.to_document()
    return copy.deepcopy(dict(candidate))


def _check_iteration(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be an integer ≥ 1, not {value!r}")
    return value


# -- entries ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RejectionEntry:
    """What happened in one round: the edit set, the candidate, the traces it learned from and the verdict."""

    iteration: int
    kind: str
    edits: Mapping[str, Any] = field(default_factory=dict)
    candidate: Mapping[str, Any] | None = None
    candidate_digest: str | None = None
    base_digest: str | None = None
    trace_ids: tuple[str, ...] = ()
    trace_scores: Mapping[str, float] = field(default_factory=dict)
    validation: Evaluation | None = None
    retained_score: float | None = None
    diagnostics: tuple[Diagnostic, ...] = ()
    duplicate_of: int | None = None
    mode: str | None = None
    created_at: str = field(default_factory=utc_now)
    decision: Mapping[str, Any] | None = None
    baseline_ref: str | None = None
    candidate_ref: str | None = None

    def __post_init__(self) -> None:
        _check_iteration(self.iteration, "RejectionEntry.iteration")
        if self.kind not in ENTRY_KINDS:
            raise ValueError(f"RejectionEntry.kind must be one of {', '.join(ENTRY_KINDS)}, not {self.kind!r}")
        if self.retained_score is not None and self.kind not in GATED_KINDS:
            raise ValueError(f"retained_score is set only for accepted and rejected rounds, not {self.kind}")
        if self.duplicate_of is not None and self.kind != DUPLICATE_CANDIDATE:
            raise ValueError(f"duplicate_of is set only for duplicate_candidate rounds, not {self.kind}")
        object.__setattr__(self, "edits", _edits_as_dict(self.edits))
        object.__setattr__(self, "candidate", _plain_candidate(self.candidate))
        object.__setattr__(self, "trace_ids", tuple(str(trace_id) for trace_id in self.trace_ids))
        object.__setattr__(self, "trace_scores", dict(self.trace_scores or {}))
        object.__setattr__(self, "diagnostics", tuple(self.diagnostics))
        if self.decision is not None:
            object.__setattr__(self, "decision", copy.deepcopy(dict(self.decision)))

    # -- reading -----------------------------------------------------------------------------------------------------

    @property
    def disposition(self) -> str | None:
        """The objective gate's disposition, or None for scalar gates and ungated rounds."""
        return _disposition_of(self.decision)

    def is_measured_rejection(self) -> bool:
        """A rejection the gate measured: no disposition (scalar gates) or disposition `rejected`."""
        return self.kind == REJECTED and self.disposition in (None, REJECTED)

    def edit_counts(self) -> dict[str, int]:
        """How many entries each of the four edit arrays holds (0 for a missing or malformed array)."""
        return {key: len(value) if isinstance(value := self.edits.get(key), list) else 0 for key in EDIT_KEYS}

    def edit_summary(self) -> str:
        c = self.edit_counts()
        return (
            f"+{c['add_nodes']} node(s) −{c['delete_nodes']} node(s) "
            f"+{c['add_edges']} edge(s) −{c['delete_edges']} edge(s)"
        )

    def outcome_phrase(self) -> str:
        """The middle of the headline: what decided this round."""
        if self.kind == DUPLICATE_CANDIDATE:
            if self.duplicate_of is None:
                return "duplicate of the current head graph"
            return f"duplicate of iteration {self.duplicate_of}"
        if self.kind == NO_ACTION:
            return "the refiner proposed no edits"
        if self.kind == STRUCTURAL_FAILURE:
            return self._diagnostics_phrase()
        if self.disposition is not None:
            return self._disposition_phrase()
        score = self.validation.score if self.validation is not None else None
        return f"validation {_number(score)} vs retained {_number(self.retained_score)}"

    def _diagnostics_phrase(self) -> str:
        decisive = [d for d in self.diagnostics if d.is_error] or list(self.diagnostics)
        codes = list(dict.fromkeys(d.code for d in decisive))
        return f"diagnostics {', '.join(codes)}" if codes else "diagnostics (none recorded)"

    def _disposition_phrase(self) -> str:
        decision = self.decision or {}
        phrase = str(self.disposition)
        metric = decision.get("decisive_metric")
        if metric:
            phrase += f" on {metric}"
        reasons = decision.get("reasons")
        if isinstance(reasons, str):
            reasons = [reasons]
        if reasons:
            phrase += f" ({', '.join(str(reason) for reason in reasons)})"
        return phrase

    def headline(self) -> str:
        """`iteration N KIND candidate <12 hex>: <what decided it>; +a node(s) −b node(s) +c edge(s) −d edge(s)`."""
        return (
            f"iteration {self.iteration} {self.kind.upper()} candidate {_digest_prefix(self.candidate_digest)}: "
            f"{self.outcome_phrase()}; {self.edit_summary()}"
        )

    # -- rendering ---------------------------------------------------------------------------------------------------

    def render_full(self, *, fenced_edits: bool = False) -> str:
        """The full rendering: headline, base and mode, edit JSON, verdict, diagnostics, training trajectories."""
        lines = [f"### {self.headline()}", self._base_line()]
        lines += self._edit_lines(fenced_edits)
        lines += self._verdict_lines()
        lines += self._diagnostic_lines()
        lines.append(self._trajectory_line())
        return "\n".join(lines)

    def render_accepted_section(self) -> str:
        """The operator view of an accepted round: headline, decision lines, the edits as a JSON code block."""
        return "\n".join([f"### {self.headline()}", *_decision_lines(self.decision), *self._edit_lines(True)])

    def _base_line(self) -> str:
        line = f"Base graph {_digest_prefix(self.base_digest)}"
        return line + (f", mode {self.mode}." if self.mode else ".")

    def _edit_lines(self, fenced: bool) -> list[str]:
        if fenced:
            return ["Edits:", "```json", json.dumps(self.edits, indent=2, ensure_ascii=False), "```"]
        return [f"Edits: {json.dumps(self.edits, ensure_ascii=False)}"]

    def _verdict_lines(self) -> list[str]:
        if self.kind not in GATED_KINDS:
            return []
        if self.disposition is not None:
            return _decision_lines(self.decision)
        score = self.validation.score if self.validation is not None else None
        return [f"Validation: score {_number(score)} against retained {_number(self.retained_score)}."]

    def _diagnostic_lines(self) -> list[str]:
        if not self.diagnostics:
            return []
        return ["Diagnostics:", *(f"- {diagnostic}" for diagnostic in self.diagnostics)]

    def _trajectory_line(self) -> str:
        count = len(self.trace_ids)
        if not count:
            return "Training trajectories: 0."
        shown = ", ".join(self.trace_ids[:TRACE_IDS_SHOWN])
        more = f", and {count - TRACE_IDS_SHOWN} more" if count > TRACE_IDS_SHOWN else ""
        return f"Training trajectories: {count} ({shown}{more})."

    # -- documents ---------------------------------------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        """The stored form; decision, baseline_ref and candidate_ref are left out when absent (0.2.0 shape)."""
        document: dict[str, Any] = {
            "iteration": self.iteration,
            "kind": self.kind,
            "edits": copy.deepcopy(dict(self.edits)),
            "candidate": copy.deepcopy(self.candidate),
            "candidate_digest": self.candidate_digest,
            "base_digest": self.base_digest,
            "trace_ids": list(self.trace_ids),
            "trace_scores": dict(self.trace_scores),
            "validation": self.validation.to_document() if self.validation is not None else None,
            "retained_score": self.retained_score,
            "diagnostics": [diagnostic.to_dict() for diagnostic in self.diagnostics],
            "duplicate_of": self.duplicate_of,
            "mode": self.mode,
            "created_at": self.created_at,
        }
        for name in OPTIONAL_FIELDS:
            value = getattr(self, name)
            if value is not None:
                document[name] = copy.deepcopy(value)
        return document

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> RejectionEntry:
        validation = value.get("validation")
        return cls(
            iteration=value["iteration"],
            kind=value["kind"],
            edits=value.get("edits") or {},
            candidate=value.get("candidate"),
            candidate_digest=value.get("candidate_digest"),
            base_digest=value.get("base_digest"),
            trace_ids=tuple(value.get("trace_ids") or ()),
            trace_scores=value.get("trace_scores") or {},
            validation=Evaluation.from_document(validation) if validation is not None else None,
            retained_score=value.get("retained_score"),
            diagnostics=tuple(Diagnostic.from_dict(item) for item in value.get("diagnostics") or ()),
            duplicate_of=value.get("duplicate_of"),
            mode=value.get("mode"),
            created_at=value.get("created_at") or "",
            decision=value.get("decision"),
            baseline_ref=value.get("baseline_ref"),
            candidate_ref=value.get("candidate_ref"),
        )


# -- the memory ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Part:
    """One entry's share of the refiner block: in full or as one headline line."""

    entry: RejectionEntry
    full: bool

    def text(self) -> str:
        return self.entry.render_full() if self.full else f"- {self.entry.headline()}"


def _join_parts(parts: Sequence[_Part]) -> str:
    """One-liners on consecutive lines; a blank line around every full entry."""
    chunks: list[str] = []
    previous_full = False
    for index, part in enumerate(parts):
        if index:
            chunks.append("\n\n" if part.full or previous_full else "\n")
        chunks.append(part.text())
        previous_full = part.full
    return "".join(chunks)


def _hard_cut(text: str, budget: int) -> str:
    """Keep the beginning of `text` within `budget` characters, ending with a marker when there is room for one."""
    if len(text) <= budget:
        return text
    if budget <= len(CUT_MARKER):
        return text[: max(budget, 0)]
    return text[: budget - len(CUT_MARKER)] + CUT_MARKER


@dataclass(frozen=True)
class RejectionMemory:
    """`{schema: 1, iteration, entries}`: every round's outcome, append-only; `iteration` is the last round recorded."""

    entries: tuple[RejectionEntry, ...] = ()
    iteration: int | None = None
    schema = SCHEMA_VERSION

    def __post_init__(self) -> None:
        entries = tuple(self.entries)
        for earlier, later in itertools.pairwise(entries):
            if later.iteration <= earlier.iteration:
                raise ValueError(f"entries must have increasing iterations ({earlier.iteration}, {later.iteration})")
        last = entries[-1].iteration if entries else 0
        iteration = last if self.iteration is None else self.iteration
        if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < last:
            raise ValueError(f"RejectionMemory.iteration must be an integer ≥ the last entry's ({last}): {iteration!r}")
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "iteration", iteration)

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, entry: RejectionEntry) -> RejectionMemory:
        """A new memory with `entry` at the end; its iteration must come after the last one recorded."""
        if entry.iteration <= self.iteration:
            raise ValueError(
                f"rejection memory is append-only: iteration {entry.iteration} is not after {self.iteration}"
            )
        return RejectionMemory((*self.entries, entry), entry.iteration)

    def counts(self) -> dict[str, int]:
        """How many rounds ended in each outcome (every kind present, zeros included)."""
        counts = dict.fromkeys(ENTRY_KINDS, 0)
        for entry in self.entries:
            counts[entry.kind] += 1
        return counts

    def rejected_digests(self) -> dict[str, int]:
        """Digest → first iteration, for measured rejections and structural failures that recorded a digest."""
        digests: dict[str, int] = {}
        for entry in self.entries:
            blocks = entry.is_measured_rejection() or entry.kind == STRUCTURAL_FAILURE
            if blocks and entry.candidate_digest:
                digests.setdefault(entry.candidate_digest, entry.iteration)
        return digests

    # -- summaries ---------------------------------------------------------------------------------------------------

    def _outcome_breakdown(self) -> str:
        return ", ".join(_kind_label(kind, count) for kind, count in self.counts().items() if count)

    def _refiner_summary(self) -> str:
        return (
            f"{len(self.entries)} earlier round(s): {self._outcome_breakdown()}. "
            "Do not propose again an edit set that was rejected, failed the structural checks or duplicated an "
            "earlier candidate; learn from why it lost and try something different."
        )

    def _full_indexes(self, full_entries: int) -> set[int]:
        """Positions of the newest `full_entries` entries that were not accepted."""
        candidates = [index for index, entry in enumerate(self.entries) if entry.kind != ACCEPTED]
        return set(candidates[-full_entries:]) if full_entries > 0 else set()

    # -- the refiner's view (SerializeRejections) --------------------------------------------------------------------

    def render_for_refiner(
        self, full_entries: int = 5, char_cap: int = 30_000, objective_summary: str | None = None
    ) -> str:
        """R_k: a summary line, then every round in order (the newest non-accepted ones in full), within the cap.

        Over the cap: the oldest one-liners go first, then the oldest full entries become one-liners, then the text
        is cut with a marker. The objective header, when there is one, always leads and is never cut, so only a cap
        smaller than the header itself can be exceeded.
        """
        header = f"{OBJECTIVE_HEADER}\n{objective_summary}" if objective_summary is not None else None
        budget = char_cap if header is None else char_cap - len(header) - 1
        body = self._capped_body(full_entries, budget)
        if header is None:
            return body
        return f"{header}\n{body}" if body else header

    def _capped_body(self, full_entries: int, budget: int) -> str:
        if budget <= 0:
            return ""
        if not self.entries:
            return _hard_cut(NOTHING_YET, budget)
        full = self._full_indexes(full_entries)
        parts = [_Part(entry, index in full) for index, entry in enumerate(self.entries)]
        dropped = 0
        text = self._assemble(parts, dropped)
        while len(text) > budget and any(not part.full for part in parts):
            oldest_one_liner = next(index for index, part in enumerate(parts) if not part.full)
            del parts[oldest_one_liner]
            dropped += 1
            text = self._assemble(parts, dropped)
        while len(text) > budget and any(part.full for part in parts):
            oldest_full = next(index for index, part in enumerate(parts) if part.full)
            parts[oldest_full] = _Part(parts[oldest_full].entry, False)
            text = self._assemble(parts, dropped)
        return _hard_cut(text, budget)

    def _assemble(self, parts: Sequence[_Part], dropped: int) -> str:
        head = self._refiner_summary()
        if dropped:
            head += f"\n({dropped} older round(s) left out to fit the length cap.)"
        if not parts:
            return head
        return f"{head}\n\n{_join_parts(parts)}"

    # -- the operator view (rejections.md) ---------------------------------------------------------------------------

    def render_markdown(self, full_entries: int | None = None) -> str:
        """rejections.md: a title, rounds by outcome through the last iteration, then one section per round.

        Accepted rounds show their headline, decision lines and edits; the others their full rendering. With
        `full_entries` set, only the newest that many non-accepted rounds are in full and older ones keep a headline.
        """
        lines = ["# Rejection memory", ""]
        if not self.entries:
            lines.append(f"No rounds recorded through iteration {self.iteration}: {NOTHING_YET}")
            return "\n".join(lines) + "\n"
        lines.append(f"{len(self.entries)} round(s) through iteration {self.iteration}: {self._outcome_breakdown()}.")
        full = (
            self._full_indexes(full_entries)
            if full_entries is not None
            else {i for i, e in enumerate(self.entries) if e.kind != ACCEPTED}
        )
        for index, entry in enumerate(self.entries):
            lines += ["", self._markdown_section(entry, index in full)]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _markdown_section(entry: RejectionEntry, full: bool) -> str:
        if entry.kind == ACCEPTED:
            return entry.render_accepted_section()
        if full:
            return entry.render_full(fenced_edits=True)
        return f"### {entry.headline()}"

    # -- documents ---------------------------------------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "iteration": self.iteration,
            "entries": [entry.to_document() for entry in self.entries],
        }

    @classmethod
    def from_document(cls, value: Mapping[str, Any]) -> RejectionMemory:
        schema = value.get("schema", SCHEMA_VERSION)
        if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
            raise ValueError(f"rejection memory schema must be a positive integer, not {schema!r}")
        if schema > SCHEMA_VERSION:
            raise ValueError(
                f"rejection memory schema {schema} is newer than this code reads ({SCHEMA_VERSION}); "
                "upgrade the package"
            )
        entries = tuple(RejectionEntry.from_document(item) for item in value.get("entries") or ())
        return cls(entries, value.get("iteration"))

    @classmethod
    def of(cls, entries: Iterable[RejectionEntry]) -> RejectionMemory:
        """A memory built by appending `entries` one after another (so every append rule applies)."""
        memory = cls()
        for entry in entries:
            memory = memory.append(entry)
        return memory
