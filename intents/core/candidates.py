"""Intent candidates bound to trajectory evidence, and the parser of the model's reply (trajectory-mining spec §2.3)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from llm.core import MalformedModelOutput, extract_json_object, require_list
from trajectories.core import TrajectoryRun

from .normalize import normalize_intent

INTENT_MINING_VERSION = "trajectory-intents-v1"

INTENT_LIMIT = 300
OUTCOME_LIMIT = 1000
LIMITATION_LIMIT = 300

INTENT_REQUIRED = "trajectory intent is required"
KIND_INVALID = "trajectory intent kind is invalid"
EVIDENCE_NOT_LIST = "trajectory intent evidence must be a non-empty list"
EVIDENCE_NOT_OBJECTS = "trajectory intent evidence must be objects"
EVIDENCE_UNKNOWN = "trajectory intent evidence references an unknown trajectory"
BOUNDS_NOT_INTEGERS = "trajectory intent evidence bounds must be integers"
EVIDENCE_OUTSIDE = "trajectory intent evidence is outside the trajectory"
LIMITATIONS_NOT_STRINGS = "trajectory intent limitations must be strings"
OUTCOME_NOT_TEXT = "trajectory intent outcome must be text"


class IntentKind(StrEnum):
    DECLARED = "declared"
    INFERRED = "inferred"
    HINDSIGHT = "hindsight"


@dataclass(frozen=True, kw_only=True)
class IntentEvidence:
    """Steps `start`..`end` (inclusive) of one trajectory. The upper bound is checked by the parser, not here."""

    trajectory_id: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not isinstance(self.trajectory_id, str) or not self.trajectory_id.strip():
            raise ValueError("intent evidence trajectory ID is required")
        for bound in (self.start, self.end):
            if isinstance(bound, bool) or not isinstance(bound, int):
                raise ValueError("intent evidence bounds must be integers")
        if self.start < 0 or self.end < self.start:
            raise ValueError("intent evidence bounds must satisfy 0 <= start <= end")

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.trajectory_id, self.start, self.end)


@dataclass(frozen=True)
class IntentCandidate:
    candidate_id: str
    intent: str
    kind: IntentKind
    evidence: tuple[IntentEvidence, ...]
    actual_outcome: str = ""
    limitations: tuple[str, ...] = field(default=())
    schema_version: str = INTENT_MINING_VERSION

    def __post_init__(self) -> None:
        if not isinstance(self.candidate_id, str) or not self.candidate_id.strip():
            raise ValueError("intent candidate ID is required")
        if not isinstance(self.intent, str) or not normalize_intent(self.intent):
            raise ValueError(INTENT_REQUIRED)
        object.__setattr__(self, "kind", IntentKind(self.kind))
        object.__setattr__(self, "evidence", tuple(self.evidence))
        if not self.evidence:
            raise ValueError("intent candidate evidence is required")
        if not all(isinstance(item, IntentEvidence) for item in self.evidence):
            raise ValueError("intent candidate evidence must be IntentEvidence values")
        object.__setattr__(self, "limitations", tuple(self.limitations))

    @property
    def trajectory_ids(self) -> tuple[str, ...]:
        """The distinct evidence trajectory ids, sorted."""
        return tuple(sorted({item.trajectory_id for item in self.evidence}))


def intent_candidate_id(kind: IntentKind, intent: str, evidence: Iterable[IntentEvidence]) -> str:
    """`intent:` + 20 hex of SHA-256 over kind, normalized label and sorted unique `tid:start:end`, NUL-joined."""
    spans = [f"{tid}:{start}:{end}" for tid, start, end in sorted({item.key for item in evidence})]
    material = "\0".join([IntentKind(kind).value, normalize_intent(intent), *spans])
    # surrogatepass: identical bytes for every valid string, and no crash on a lone surrogate in a caller's id.
    return "intent:" + hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _text(value: Any, message: str) -> str:
    """`str(value or "")` as the spec writes it; the rare failure (e.g. a huge int) becomes MalformedModelOutput."""
    try:
        return str(value or "")
    except (ValueError, RecursionError):
        raise MalformedModelOutput(message) from None


def _bound(item: dict, name: str) -> int:
    try:
        return int(item[name])
    except (KeyError, TypeError, ValueError, OverflowError, RecursionError):
        raise MalformedModelOutput(BOUNDS_NOT_INTEGERS) from None


def _evidence(item: Any, allowed: dict[str, TrajectoryRun]) -> IntentEvidence:
    if not isinstance(item, dict):
        raise MalformedModelOutput(EVIDENCE_NOT_OBJECTS)
    trajectory_id = _text(item.get("trajectory_id"), EVIDENCE_UNKNOWN)
    run = allowed.get(trajectory_id)
    if run is None:
        raise MalformedModelOutput(EVIDENCE_UNKNOWN)
    start = _bound(item, "start")
    end = _bound(item, "end")
    if not 0 <= start <= end < len(run.steps):
        raise MalformedModelOutput(EVIDENCE_OUTSIDE)
    return IntentEvidence(trajectory_id=trajectory_id, start=start, end=end)


def _limitations(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise MalformedModelOutput(LIMITATIONS_NOT_STRINGS)
    kept = (item.strip()[:LIMITATION_LIMIT] for item in value)
    return tuple(item for item in kept if item)


def parse_intent_candidates(runs: Iterable[TrajectoryRun], model_output: Any) -> tuple[IntentCandidate, ...]:
    """Candidates from the decoded JSON reply `{"intents": [...]}`; MalformedModelOutput at the first bad row."""
    allowed = {run.trajectory_id: run for run in runs}
    rows = require_list(model_output, "intents", recipe=INTENT_MINING_VERSION)
    candidates: list[IntentCandidate] = []
    seen: set[str] = set()
    for row in rows:
        intent = _text(row.get("intent"), INTENT_REQUIRED).strip()
        if not normalize_intent(intent):
            raise MalformedModelOutput(INTENT_REQUIRED)
        try:
            kind = IntentKind(_text(row.get("kind") or IntentKind.INFERRED.value, KIND_INVALID))
        except ValueError:
            raise MalformedModelOutput(KIND_INVALID) from None
        items = row.get("evidence")
        if not isinstance(items, list) or not items:
            raise MalformedModelOutput(EVIDENCE_NOT_LIST)
        spans = {span.key: span for span in (_evidence(item, allowed) for item in items)}
        evidence = tuple(spans[key] for key in sorted(spans))
        candidate_id = intent_candidate_id(kind, intent, evidence)
        if candidate_id in seen:
            continue
        limitations = _limitations(row.get("limitations"))
        actual_outcome = _text(row.get("actual_outcome"), OUTCOME_NOT_TEXT)[:OUTCOME_LIMIT]
        try:
            candidate = IntentCandidate(
                candidate_id=candidate_id,
                intent=intent[:INTENT_LIMIT],
                kind=kind,
                evidence=evidence,
                actual_outcome=actual_outcome,
                limitations=limitations,
            )
        except ValueError as error:  # e.g. the first 300 characters of a long label hold no word character
            raise MalformedModelOutput(str(error)) from None
        seen.add(candidate_id)
        candidates.append(candidate)
    return tuple(candidates)


def parse_intent_reply(runs: Iterable[TrajectoryRun], text: Any) -> tuple[IntentCandidate, ...]:
    """Candidates from a model's raw text: the first JSON object in it (prose and code fences tolerated)."""
    try:
        model_output = extract_json_object(text, recipe=INTENT_MINING_VERSION)
    except RecursionError:  # pathologically nested JSON: the decoder gives up, and so do we
        raise MalformedModelOutput(f"{INTENT_MINING_VERSION} must return a JSON object") from None
    return parse_intent_candidates(runs, model_output)
