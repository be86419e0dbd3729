"""`Waymark`: the synchronous client (httpx2.Client), driving the shared core's operations."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import httpx2

from . import _core
from ._core import DEFAULT_BATCH_RUNS, JOB_KINDS, Call, Operation, ResponseCache, RetryPolicy, Send, Sleep
from ._models import GraphRevision, Guidance, Job, JobAnswer, JobOutcome, Procedures, PushResult
from ._recording import RecordedRun, current_run, tool


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


class RunContext(_core.RunContextBase):
    """`with client.run(...) as run:` pins the graph / procedure, records, then pushes (or buffers) the run."""

    def __enter__(self) -> Run:
        self._client._drive(self._pinning())
        return self._started()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        self.pushed = self._client._drive(self._delivery(exc))
        return False


class Waymark(_core.ClientBase[RunContext]):
    """The synchronous Waymark client.

    `base_url` and `token` default to the environment's `WAYMARK_URL` and `WAYMARK_TOKEN`. `retry` is the
    RetryPolicy, `cache` the ResponseCache of ETagged answers (the active graph, procedures); `transport` an httpx2
    transport (tests pass `httpx2.MockTransport`), `sleep` what waits between retries."""

    tool = staticmethod(tool)
    _run_class = Run
    _context_class = RunContext

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
        super().__init__(base_url, token, timeout=timeout, retry=retry, cache=cache, transport=transport, sleep=sleep)
        self._http = httpx2.Client(**self._http_options)

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
                request = action.request(self._http)
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
