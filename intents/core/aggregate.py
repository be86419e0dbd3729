"""Group intent candidates by a label key (trajectory-mining spec §2.4)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .candidates import IntentCandidate, IntentKind
from .normalize import normalize_intent


@dataclass(frozen=True, kw_only=True)
class IntentAggregate:
    key: str
    labels: tuple[str, ...]
    candidate_ids: tuple[str, ...]
    trajectory_ids: tuple[str, ...]
    kinds: tuple[IntentKind, ...]

    @property
    def support(self) -> int:
        """The number of distinct trajectories behind the group, not the number of candidates."""
        return len(set(self.trajectory_ids))


def aggregate_intents(
    candidates: Iterable[IntentCandidate], *, key: Callable[[str], str] = normalize_intent
) -> tuple[IntentAggregate, ...]:
    """One aggregate per `key(candidate.intent).strip()`, sorted by that key; an empty key is a ValueError."""
    groups: dict[str, list[IntentCandidate]] = {}
    for candidate in candidates:
        group_key = key(candidate.intent).strip()
        if not group_key:
            raise ValueError("intent grouping key cannot be empty")
        groups.setdefault(group_key, []).append(candidate)
    return tuple(
        IntentAggregate(
            key=group_key,
            labels=tuple(sorted({member.intent for member in members})),
            candidate_ids=tuple(sorted(member.candidate_id for member in members)),
            trajectory_ids=tuple(sorted({item.trajectory_id for member in members for item in member.evidence})),
            kinds=tuple(sorted({IntentKind(member.kind) for member in members}, key=lambda kind: kind.value)),
        )
        for group_key, members in sorted(groups.items())
    )
