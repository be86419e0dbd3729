"""Blinding of audit events: a judgment of something still open is sealed for anyone who has not judged it yet (the
same independence rule as the review pages), on every surface that shows audit events — and sealed means absent.

Showing a sealed judgment as "a reviewer judged, contents withheld" still tells its existence, its count and its
time: beside "auth.login rita" the time names the judge, and where one rejection closes a request, a judgment on a
request still open can only be an approval. So a list of events leaves out every event sealed for its viewer, and
shows it, whole, once the viewer has judged the target or the target has closed. Everything else is untouched: an
admin (or anyone) who has judged sees the others' judgments with their actors and contents, every other event is
shown to whoever may see the list, and the contents of nothing are ever rewritten.

Apps that record judgments register a sealer for each verb that tells a judgment (the judgment itself, and any event
that follows from the judgments alone, such as "enough approvals"): `sealed_ids(viewer, among)` answers a QuerySet
of the target ids (as text, one column) that `viewer` may not see yet, limited to `among` when given. accounts
knows nothing of the apps; they register in their AppConfig.ready.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q


@dataclass(frozen=True)
class _Sealer:
    target_type: str
    sealed_ids: Callable[[Any, Collection[str] | None], Any]  # (viewer, among) -> a one-column QuerySet of ids


_SEALERS: dict[str, _Sealer] = {}


def register_sealed_verb(verb: str, target_type: str, sealed_ids: Callable[[Any, Collection[str] | None], Any]) -> None:
    """`verb` events on `target_type` tell judgments; `sealed_ids(viewer, among)` answers the sealed target ids."""
    _SEALERS[verb] = _Sealer(target_type=target_type, sealed_ids=sealed_ids)


def blind(events: Iterable, viewer) -> list:
    """The events `viewer` may see, in their order: those sealed for `viewer` are left out. At most one query per
    registered verb present. A list cut to a size before blinding comes out shorter: callers that show a fixed
    number exclude `sealed_events(viewer)` in their query instead (or as well)."""
    events = list(events)
    wanted: dict[str, set[str]] = defaultdict(set)
    for event in events:
        sealer = _SEALERS.get(event.verb)
        if sealer is not None and event.target_type == sealer.target_type:
            wanted[event.verb].add(event.target_id)
    sealed = {verb: set(_SEALERS[verb].sealed_ids(viewer, ids)) for verb, ids in wanted.items()}
    shown = [event for event in events if event.target_id not in sealed.get(event.verb, ())]
    for event in shown:
        event.sealed = False  # nothing shown is sealed (kept for the templates and views that still ask)
    return shown


def sealed_events(viewer) -> Q | None:
    """A condition matching every audit event sealed for `viewer` (one subquery per registered verb), for queries
    to exclude so a page of events is full and its cursor exact; None when no app registers a sealer."""
    condition = None
    for verb, sealer in _SEALERS.items():
        part = Q(verb=verb, target_type=sealer.target_type, target_id__in=sealer.sealed_ids(viewer, None))
        condition = part if condition is None else condition | part
    return condition
