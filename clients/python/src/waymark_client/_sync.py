"""`Waymark`: the synchronous client (httpx2.Client), driving the shared core's operations."""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import httpx2

from . import _core
from ._core import DEFAULT_BATCH_RUNS, JOB_KINDS, Call, Core, Operation, ResponseCache, RetryPolicy, Send, Sleep
from ._models import GraphRevision, Guidance, Job, JobAnswer, JobOutcome, Procedures, PushResult
from ._recording import PushMode, RecordedRun, _current, current_run, tool

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "waymark-client/0.1"


def connection_settings(base_url: str | None, token: str | None) -> tuple[str, str]:
    base_url = base_url or os.environ.get("WAYMARK_URL") or DEFAULT_URL
    token = token if token is not None else os.environ.get("WAYMARK_TOKEN", "")
    return base_url.rstrip("/"), token.strip()


def default_headers(token: str) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class Run(RecordedRun):
    """A run recorded with the synchronous client: `guidance()` asks for the next step under the pinned revision."""

    def __init__(self, client: Waymark, **fields: Any) -> None:
        super().__init__(**fields)
        self._client = client

    def guidance(
        self, query: str | None = None, *, mode: str | None = None, hops: int | None = None, window: int | None = None
    ) -> Guidance:
        request = self.guidance_request(query, {"mode": mode, "hops": hops, "window": window})
        return self._client.guidance(self.graph_workspace, **request, run=self)


class RunContext:
    """`with client.run(...) as run:` pins the graph / procedure, records, then pushes (or buffers) the run."""

    def __init__(self, client: Waymark, run: Run, *, push: PushMode, pins: dict[str, Any]) -> None:
        self._client = client
        self.run = run
        self._push = push
        self._pins = pins
        self._token: Any = None
        self.pushed: PushResult | None = None

    def __enter__(self) -> Run:
        client = self._client
        client._drive(_core.pin_run(client._core, self.run, **self._pins))
        self.run.start()
        self._token = _current.set(self.run)
        return self.run

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        _current.reset(self._token)
        self.run.finish(exc)
        client = self._client
        delivery = _core.deliver(client._core, client._buffer, self.run, self._push, raised=exc is not None)
        self.pushed = client._drive(delivery)
        return False


class Waymark:
    """The synchronous Waymark client.

    `base_url` and `token` default to the environment's `WAYMARK_URL` and `WAYMARK_TOKEN`. `retry` is the
    RetryPolicy, `cache` the ResponseCache of ETagged answers (the active graph, procedures); `transport` an httpx2
    transport (tests pass `httpx2.MockTransport`), `sleep` what waits between retries."""

    tool = staticmethod(tool)

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx2.Timeout = 10.0,
        retry: RetryPolicy | None = None,
        cache: ResponseCache | None = None,
        transport: httpx2.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url, token = connection_settings(base_url, token)
        self._core = Core(retry=retry, cache=cache)
        self._buffer = _core.Buffer()
        self._sleep = sleep
        self._http = httpx2.Client(
            base_url=self.base_url, headers=default_headers(token), timeout=timeout, transport=transport
        )

    @property
    def retry(self) -> RetryPolicy:
        return self._core.retry

    @property
    def cache(self) -> ResponseCache:
        return self._core.cache

    @property
    def buffered(self) -> int:
        """Runs waiting for `flush()`."""
        return len(self._buffer)

    # -- the driver --------------------------------------------------------------------------------------------------

    def _drive[T](self, operation: Operation[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                action = operation.throw(error) if error is not None else operation.send(value)
            except StopIteration as stop:
                return stop.value
            value = error = None
            if isinstance(action, Send):
                request = self._http.build_request(
                    action.method, action.path, json=action.json, params=action.params, headers=action.headers
                )
                try:
                    value = self._http.send(request)
                except httpx2.TransportError as exc:
                    error = exc
            elif isinstance(action, Sleep):
                self._sleep(action.seconds)
            elif isinstance(action, Call):
                try:
                    value = action.fn(*action.args)
                    if inspect.isawaitable(value):
                        getattr(value, "close", lambda: None)()
                        raise TypeError("an async handler needs AsyncWaymark")
                except Exception as exc:
                    error = exc

    # -- lifecycle ---------------------------------------------------------------------------------------------------

    def close(self, *, flush: bool = True) -> None:
        """Push the buffered runs (unless `flush=False`), then close the connections."""
        try:
            if flush and len(self._buffer):
                self.flush()
        finally:
            self._http.close()

    def __enter__(self) -> Waymark:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(flush=exc is None)

    # -- runs --------------------------------------------------------------------------------------------------------

    def run(
        self,
        *,
        task: str,
        source: str,
        intent: str = "",
        external_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        workspace: str | None = None,
        revision: str | int | None = None,
        procedure: bool = False,
        push: PushMode = "now",
    ) -> RunContext:
        """Record a run: `with client.run(task=..., source=...) as run:`. With `workspace`, the run pins that
        workspace's active graph (or `revision`) for its whole life; with `procedure=True`, the active procedure of
        `intent`. On exit the run is pushed (`push="now"`), kept for `flush()` (`"buffer"`) or left to you
        (`"never"`, e.g. to answer a job with it)."""
        run = Run(
            self,
            task=task,
            source=source,
            intent=intent,
            external_id=external_id,
            metadata=metadata,
            graph_workspace=workspace or "",
        )
        pins = {"workspace": workspace, "revision": revision, "procedure_intent": intent if procedure else None}
        return RunContext(self, run, push=push, pins=pins)

    def push(self, runs: Iterable[Any], *, batch_size: int = DEFAULT_BATCH_RUNS) -> PushResult:
        """Store runs (mappings in the ingest format or recorded runs) in batches, each retried safely."""
        return self._drive(self._core.push(runs, batch_size=batch_size))

    def flush(self, *, batch_size: int = DEFAULT_BATCH_RUNS) -> PushResult:
        """Push the buffered runs."""
        return self._drive(_core.flush(self._core, self._buffer, batch_size=batch_size))

    def get_run(self, run_id: int) -> dict[str, Any]:
        return self._drive(self._core.get_run(run_id))

    # -- graphs, procedures, guidance --------------------------------------------------------------------------------

    def active_graph(self, workspace: str, *, run: RecordedRun | None = None) -> GraphRevision:
        """The workspace's active graph; a repeat sends If-None-Match and a 304 is served from the cache. Inside a
        run (`run`, else the run being recorded in this context) it is a call of that run: X-Waymark-Run and the
        run's pinned X-Waymark-Revision are sent."""
        return self._drive(self._core.active_graph(workspace, run=run or current_run()))

    def graph_revision(self, workspace: str, ref: str | int) -> GraphRevision:
        return self._drive(self._core.graph_revision(workspace, ref))

    def procedures(self, intent: str | None = None, *, run: RecordedRun | None = None) -> Procedures:
        """The active procedures (of `intent`); ETag-cached like the active graph; a call of the run, as there."""
        return self._drive(self._core.procedures(intent, run=run or current_run()))

    def guidance(
        self,
        workspace: str,
        *,
        query: str = "",
        steps: Sequence[dict[str, Any]] = (),
        revision: str | None = None,
        mode: str | None = None,
        hops: int | None = None,
        window: int | None = None,
        run: RecordedRun | None = None,
    ) -> Guidance:
        """Guidance for the next step; a call of the run, as `active_graph`."""
        operation = self._core.guidance(
            workspace,
            query=query,
            steps=steps,
            revision=revision,
            mode=mode,
            hops=hops,
            window=window,
            run=run or current_run(),
        )
        return self._drive(operation)

    # -- evaluation jobs ---------------------------------------------------------------------------------------------

    def claim(
        self,
        *,
        worker: str,
        kinds: Sequence[str] | None = JOB_KINDS,
        lease_seconds: int = 300,
        match: Mapping[str, Sequence[Any]] | None = None,
    ) -> Job | None:
        """Lease the oldest open job among `kinds` whose payload holds, for every key of `match`, one of its values
        (e.g. `{"intent": ["refund request"]}`): the Job, or None when there is none."""
        return self._drive(self._core.claim(worker=worker, kinds=kinds, lease_seconds=lease_seconds, match=match))

    def answer(self, job_id: int, run: Any) -> JobAnswer:
        return self._drive(self._core.answer(job_id, run))

    def work_jobs(
        self,
        handler: Callable[[Job], Any],
        *,
        worker: str,
        kinds: Sequence[str] | None = JOB_KINDS,
        lease_seconds: int = 300,
        match: Mapping[str, Sequence[Any]] | None = None,
        limit: int | None = None,
        on_error: Literal["raise", "skip", "answer"] = "raise",
    ) -> Iterator[JobOutcome]:
        """Claim, run `handler(job)` (it returns the run: a mapping or a recorded run) and answer, until no job is
        open (or `limit` jobs): one JobOutcome per job, as it is answered."""
        done = 0
        while limit is None or done < limit:
            job = self.claim(worker=worker, kinds=kinds, lease_seconds=lease_seconds, match=match)
            if job is None:
                return
            yield self._drive(self._core.work_job(job, handler, on_error=on_error))
            done += 1

    def answer_jobs(self, handler: Callable[[Job], Any], **options: Any) -> list[JobOutcome]:
        """`work_jobs` to the end: every outcome in a list."""
        return list(self.work_jobs(handler, **options))
