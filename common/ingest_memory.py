"""The ingest bodies one web process works on at once, bounded in bytes: its memory is bounded whoever sends.

A batch takes about 5-7 times its body's size in Python memory at its peak (docs/benchmarks.md, Load), and a web
process serves up to 32 requests at once: without a bound, 32 batches of 5 MB could need a gigabyte in one worker.
Each ingest request (JSON and OTLP) reserves its declared Content-Length from WAYMARK_INGEST_PROCESS_BYTES (default
four full batches) before it reads its body, and gives it back when it ends. A request that does not fit waits, holding
no body, for up to WAYMARK_INGEST_PROCESS_WAIT_SECONDS, then answers 503 `busy` with Retry-After. The per-writer caps
(common/fairshare.py) keep one writer from filling the budget: a token holds at most its share of the waiting and
working requests. A body larger than the whole budget waits until the budget is empty, then runs alone. 0 turns the
bound off.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from django.http import HttpRequest

from .errors import ApiError
from .settings_snapshot import SettingsSnapshot

_settings = SettingsSnapshot("WAYMARK_INGEST_PROCESS_BYTES", "WAYMARK_INGEST_PROCESS_WAIT_SECONDS")
RETRY_AFTER_SECONDS = 2


class IngestBusy(ApiError):
    def __init__(self, capacity: int) -> None:
        super().__init__(
            503,
            "busy",
            "the server is working on as many ingest bodies as it holds at once; retry shortly",
            {"retry_after": RETRY_AFTER_SECONDS, "process_bytes": capacity},
        )
        self.headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}


class ByteBudget:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.used = 0

    @contextlib.contextmanager
    def reserved(self, size: int, *, capacity: int, wait: float) -> Iterator[None]:
        """`size` bytes of `capacity` for the block (at most `capacity`: a larger body waits for an empty budget);
        IngestBusy after `wait` seconds without room."""
        size = min(max(size, 0), capacity)
        deadline = time.monotonic() + wait
        with self._changed:
            while self.used and self.used + size > capacity:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise IngestBusy(capacity)
                self._changed.wait(left)
            self.used += size
        try:
            yield
        finally:
            with self._changed:
                self.used -= size
                self._changed.notify_all()


budget = ByteBudget()


def ingest_body_reserved(request: HttpRequest) -> contextlib.AbstractContextManager[None]:
    """`with ingest_body_reserved(request): …` around reading and handling an ingest body."""
    capacity = _settings.WAYMARK_INGEST_PROCESS_BYTES
    if capacity <= 0:
        return contextlib.nullcontext()
    try:
        size = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        size = 0  # refused as malformed by the reader
    return budget.reserved(size, capacity=capacity, wait=_settings.WAYMARK_INGEST_PROCESS_WAIT_SECONDS)
