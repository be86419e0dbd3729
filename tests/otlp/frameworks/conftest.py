"""Fixtures of the framework tests: the stand-in provider, one recording TracerProvider the instrumentations write
to, and `exported` — the spans of one agent run sent with the real OTLP/HTTP exporter to the live server, as the
SDK's BatchSpanProcessor would (in the order they ended, in two requests, the root last)."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.otlp.agents import OTLP_PATH

from .provider import StandIn

pytestmark = pytest.mark.postgres


class Recorder(SpanProcessor):
    """Keeps the spans that end while a test records (so spans from other tests' SDK clients are not kept)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []
        self.recording = False
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        if self.recording:
            with self._lock:
                self.spans.append(span)

    def take(self) -> list[ReadableSpan]:
        with self._lock:
            spans, self.spans = self.spans, []
        return spans


RECORDER = Recorder()
PROVIDER = TracerProvider(resource=Resource.create({"service.name": "refund-agent"}))
PROVIDER.add_span_processor(RECORDER)


@pytest.fixture(scope="session")
def tracer_provider() -> TracerProvider:
    """The provider every instrumentation in these tests writes to; also the global one (strands-agents and the
    Anthropic SDK read the global provider), set once for the process."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(PROVIDER)
    return PROVIDER


@pytest.fixture(scope="session")
def stand_in() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@dataclass
class Exported:
    spans: list[ReadableSpan]
    trace_id: str
    results: list[SpanExportResult]


@pytest.fixture
def record(tracer_provider) -> Iterator[Callable[..., Exported]]:
    """record(run) runs `run()` (the agent) while recording, then exports what it traced to the live server."""
    yield from _record()


@pytest.fixture
def agent_token(transactional_db, make_agent_token) -> str:
    return make_agent_token("trajectories:write", name="framework-agent")


# One thread runs every agent: frameworks that start an event loop refuse to inside the one pytest-playwright's sync
# API leaves running in the main thread once a browser test has run; and one thread keeps one loop for the clients
# an agent reuses across runs (as the main thread did).
AGENT_THREAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="framework-agent")


def _in_a_thread(agent: Callable[[], Any]) -> Any:
    return AGENT_THREAD.submit(agent).result()


def _record() -> Iterator[Callable[..., Any]]:
    RECORDER.take()

    def run(agent: Callable[[], Any], *, url: str, token: str, expect_error: type[BaseException] | None = None):
        RECORDER.recording = True
        try:
            if expect_error is None:
                _in_a_thread(agent)
            else:
                with pytest.raises(expect_error):
                    _in_a_thread(agent)
        finally:
            PROVIDER.force_flush()
            RECORDER.recording = False
        spans = RECORDER.take()
        assert spans, "the agent traced nothing"
        return export(spans, url=url, token=token)

    yield run
    RECORDER.recording = False
    RECORDER.take()


def export(spans: list[ReadableSpan], *, url: str, token: str) -> Exported:
    """Send the spans as a BatchSpanProcessor would: in the order they ended, in two requests (the root ends last)."""
    exporter = OTLPSpanExporter(endpoint=url + OTLP_PATH, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    half = len(spans) // 2
    results = [exporter.export(batch) for batch in (spans[:half], spans[half:]) if batch]
    exporter.shutdown()
    roots = {format(s.context.trace_id, "032x") for s in spans if s.parent is None}
    assert len(roots) == 1, f"one agent run, one trace: {roots}"
    return Exported(spans=spans, trace_id=roots.pop(), results=results)
