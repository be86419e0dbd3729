"""The active procedures list (GET /api/v1/procedures) from prepared bytes, so a 200 costs about what a 304 costs.

The listed procedures' stamps (procedures.selectors.active_stamps: one light query, no version bodies) say what the
list shows; the strong ETag derives from them. Each process reuses the stamps it read for an intent for at most
STAMPS_LOCAL_SECONDS (1 s), as graphs.cache reuses a workspace card, so an agent's per-step call costs no query: a
promotion or any other change shows on every process within a second, and at once on the process whose services
wrote it (they forget this process's stamps when their transaction commits: `changed`, and the model signals in
ProceduresConfig.ready).

A procedure whose active version is a canary (uplift.core.canary) serves it to a share of runs and the version it
replaced to the others: the arm is chosen per call from the run key (`X-Waymark-Run`) and the pin
(`X-Waymark-Revision`), with the share and both content revisions read from the stamps, so choosing costs no query.
The ETag and the body are those of the versions served (each combination of arms its own body).

The JSON body is built only for stamps not seen before (the full query and ProcedureListOut, rendered as django-ninja
renders it) and kept per process under those stamps, which change with everything the body shows. It is kept only
when the stamps read again after it are unchanged: a promotion landing between the reads can never file a new body
under old stamps.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from django.db import transaction
from ninja.responses import NinjaJSONEncoder

from common.local_copies import Recent
from uplift.core.canary import CONTROL, serve

from . import selectors
from .schemas import ProcedureListOut

BODIES_KEPT = 64
STAMPS_LOCAL_SECONDS = 1.0


@dataclass(frozen=True)
class ActiveList:
    etag: str
    revision: str | None  # the content revision when exactly one procedure is listed (X-Waymark-Revision)
    body: bytes


class _Bodies:
    """Stamps → encoded body, the most recent BODIES_KEPT."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, stamps: tuple) -> bytes | None:
        with self._lock:
            found = self._items.get(stamps)
            if found is not None:
                self._items.move_to_end(stamps)
            return found

    def put(self, stamps: tuple, body: bytes) -> None:
        with self._lock:
            self._items[stamps] = body
            while len(self._items) > BODIES_KEPT:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


bodies = _Bodies()


@dataclass(frozen=True)
class Current:
    stamps: tuple
    etag: str


recent: Recent[str | None, Current] = Recent(STAMPS_LOCAL_SECONDS)  # intent (None: every intent) → its stamps


def current(intent: str | None) -> Current:
    """The stamps of the list for `intent` and their ETag: this process's copy (at most 1 s old), else read now."""
    found = recent.get(intent)
    if found is None:
        read_at = time.monotonic()
        stamps = read_stamps(intent)
        found = Current(stamps=stamps, etag=etag_of(stamps))
        recent.put(intent, found, read_at=read_at)
    return found


def changed() -> None:
    """A write to what the list shows: this process forgets its stamps once the write commits (others within 1 s)."""
    transaction.on_commit(recent.clear)


def read_stamps(intent: str | None) -> tuple:
    """The listed procedures' stamps now (one light query)."""
    return tuple(selectors.active_stamps(intent=intent))


SHARE, CONTROL_REVISION = 6, 7  # the canary's fields in a stamps row (selectors.active_stamps)


def controls(stamps: tuple, *, run_key: str | None, pin: str | None) -> frozenset:
    """The ids of the listed procedures whose canary serves this call the control (empty without a canary)."""
    served = set()
    for row in stamps:
        share, control = row[SHARE], row[CONTROL_REVISION]
        if share and control:
            arm = serve(str(row[0]), run_key=run_key, pin=pin, share=share, canary_ref=row[2], control_ref=control)
            if arm == CONTROL:
                served.add(row[0])
    return frozenset(served)


def _served(stamps: tuple, control: frozenset) -> tuple:
    """The stamps as served: a procedure served its control shows the control's content revision."""
    if not control:
        return stamps
    return tuple((row[0], row[1], row[CONTROL_REVISION], row[3], "control", *row[5:]) if row[0] in control else row
                 for row in stamps)  # fmt: skip


def etag_of(stamps: tuple, control: frozenset = frozenset()) -> str:
    return selectors.active_etag_of(list(_served(stamps, control)))


def revision_of(stamps: tuple, control: frozenset = frozenset()) -> str | None:
    """X-Waymark-Revision: the served content revision when exactly one procedure is listed."""
    if len(stamps) != 1:
        return None
    return _served(stamps, control)[0][2]


def active_list(intent: str | None, stamps: tuple, control: frozenset = frozenset()) -> ActiveList:
    """The list for `stamps` (just read with read_stamps(intent)) with `control`'s procedures served their canary's
    control: its body from the kept bytes, else built."""
    key = (stamps, control) if control else stamps
    body = bodies.get(key)
    if body is not None:
        return ActiveList(etag=etag_of(stamps, control), revision=revision_of(stamps, control), body=body)
    procedures = selectors.active_procedures(intent=intent)
    for procedure in procedures:
        if procedure.pk in control and procedure.canary_control is not None:
            procedure.active_version = procedure.canary_control
    listing = ActiveList(
        etag=selectors.active_etag(procedures),
        revision=procedures[0].active_version.content_revision if len(procedures) == 1 else None,
        body=_encode(procedures),
    )
    if listing.etag == etag_of(stamps, control) and read_stamps(intent) == stamps:
        bodies.put(key, listing.body)  # nothing moved while the body was read: it is the body of these stamps
    return listing


def _encode(procedures: list) -> bytes:
    """As django-ninja renders ProcedureListOut: validated from the objects (each with its active version's
    certificate and coverage flag: two queries), dumped, JSON with its encoder."""
    selectors.attach_certification(procedures)
    data = ProcedureListOut.model_validate({"items": procedures}).model_dump()
    return json.dumps(data, cls=NinjaJSONEncoder).encode()
