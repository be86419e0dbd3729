"""Blinding of audit events: the contents of a judgment on something still open are sealed for anyone who has not
judged it yet (the same independence rule as the review pages), on every surface that shows audit events.

Apps that record judgments register a `sealer` for their judgment verb: given the viewer and the target ids of such
events, it answers the ids whose judgments `viewer` may not see yet (the target is open and `viewer` has not judged
it). accounts knows nothing of the apps; they register in their AppConfig.ready.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class _Sealer:
    target_type: str
    sealed_for: Callable[[object, set[str]], set[str]]


_SEALERS: dict[str, _Sealer] = {}


def register_sealed_verb(verb: str, target_type: str, sealed_for: Callable[[object, set[str]], set[str]]) -> None:
    """`verb` events on `target_type` are judgments; `sealed_for(viewer, target_ids)` answers the sealed ids."""
    _SEALERS[verb] = _Sealer(target_type=target_type, sealed_for=sealed_for)


def blind(events: Iterable, viewer) -> list:
    """The events as `viewer` may see them: a sealed judgment keeps its verb, target and time, but its before/after
    and its actor are withheld (`event.sealed` is True). Other events are untouched (`event.sealed` is False).
    At most one query per registered verb present."""
    events = list(events)
    wanted: dict[str, set[str]] = defaultdict(set)
    for event in events:
        sealer = _SEALERS.get(event.verb)
        if sealer is not None and event.target_type == sealer.target_type:
            wanted[event.verb].add(event.target_id)
    sealed = {verb: _SEALERS[verb].sealed_for(viewer, ids) for verb, ids in wanted.items()}
    for event in events:
        event.sealed = event.target_id in sealed.get(event.verb, ())
        if event.sealed:
            event.before = None
            event.after = None
    return events
