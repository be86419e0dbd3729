"""The active procedures list (GET /api/v1/procedures) from prepared bytes, so a 200 costs about what a 304 costs.

Every call reads the listed procedures' stamps (procedures.selectors.active_stamps: one light query, no version
bodies) and derives the strong ETag from them, so a promotion shows at once on every process. The JSON body is built
only for stamps not seen before (the full query and ProcedureListOut, rendered as django-ninja renders it) and kept
per process under those stamps, which change with everything the body shows. It is kept only when the stamps read
again after it are unchanged: a promotion landing between the reads can never file a new body under old stamps.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ninja.responses import NinjaJSONEncoder

from . import selectors
from .schemas import ProcedureListOut

BODIES_KEPT = 64


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


def read_stamps(intent: str | None) -> tuple:
    """The listed procedures' stamps now (one light query)."""
    return tuple(selectors.active_stamps(intent=intent))


def etag_of(stamps: tuple) -> str:
    return selectors.active_etag_of(list(stamps))


def active_list(intent: str | None, stamps: tuple) -> ActiveList:
    """The list for `stamps` (just read with read_stamps(intent)): its body from the kept bytes, else built."""
    body = bodies.get(stamps)
    if body is not None:
        return ActiveList(etag=etag_of(stamps), revision=stamps[0][2] if len(stamps) == 1 else None, body=body)
    procedures = selectors.active_procedures(intent=intent)
    listing = ActiveList(
        etag=selectors.active_etag(procedures),
        revision=procedures[0].active_version.content_revision if len(procedures) == 1 else None,
        body=_encode(procedures),
    )
    if listing.etag == etag_of(stamps) and read_stamps(intent) == stamps:
        bodies.put(stamps, listing.body)  # nothing moved while the body was read: it is the body of these stamps
    return listing


def _encode(procedures: list) -> bytes:
    """As django-ninja renders ProcedureListOut: validated from the objects, dumped, JSON with its encoder."""
    data = ProcedureListOut.model_validate({"items": procedures}).model_dump()
    return json.dumps(data, cls=NinjaJSONEncoder).encode()
