"""Admission of an ingest request (POST /api/v1/trajectories, the OTLP export), before its body is read.

In order: 413 when the declared Content-Length is over the ingest limit (common/bodies.py); 429 `too_many_in_flight`
when the token or its agent already has its share of ingest requests in flight (common/fairshare.py); room for the
body among those this process works on at once, else 503 `busy` after a wait (common/ingest_memory.py). A request
refused with 429 or 503 has its body read and dropped first (at most the limit, in chunks, never kept), as a proxy's
lingering close would: the answer then reaches a client that is still sending, instead of a reset connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.http import HttpRequest

from .bodies import discard_body, refuse_declared_over
from .fairshare import TooManyInFlight, ingest_slot
from .ingest_memory import IngestBusy, ingest_body_reserved


@contextlib.contextmanager
def ingest_admitted(request: HttpRequest, limit: int) -> Iterator[None]:
    refuse_declared_over(request, limit)
    held = contextlib.ExitStack()
    try:
        held.enter_context(ingest_slot(request))
        held.enter_context(ingest_body_reserved(request))
    except BaseException as exc:
        held.close()
        if isinstance(exc, TooManyInFlight | IngestBusy):
            discard_body(request, limit)
        raise
    with held:
        yield
