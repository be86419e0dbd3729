"""`AsyncWaymark`: the asyncio client (httpx2.AsyncClient), driving the same core operations as `Waymark`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import httpx2

from . import _core
from ._core import DEFAULT_BATCH_RUNS, JOB_KINDS, Call, Operation, ResponseCache, RetryPolicy, Send, Sleep
from ._models import GraphRevision, Guidance, Job, JobAnswer, JobOutcome, Procedures, PushResult
from ._recording import RecordedRun, current_run, tool


class AsyncRun(RecordedRun):
    """A run recorded with the asyncio client: `await run.guidance()` under the pinned revision."""

    def __init__(self, client: AsyncWaymark, **fields: Any) -> None:
        super().__init__(**fields)
        self._client = client

    async def guidance(
        self, query: str | None = None, *, mode: str | None = None, hops: int | None = None, window: int | None = None
    ) -> Guidance:
        request = self.guidance_request(query, {"mode": mode, "hops": hops, "window": window})
        return await self._client.guidance(self.graph_workspace, **request, run=self)


class AsyncRunContext(_core.RunContextBase):
    """`async with client.run(...) as run:`: as RunContext, awaited."""

    async def __aenter__(self) -> AsyncRun:
        await self._client._drive(self._pinning())
        return self._started()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        self.pushed = await self._client._drive(self._delivery(exc))
        return False


class AsyncWaymark(_core.ClientBase[AsyncRunContext]):
    """The asyncio Waymark client: the same operations as `Waymark`, awaited. Job handlers may be coroutines.

    Connections belong to the event loop that opened them, so the client opens its pool in the loop that first
    uses it and, once that loop has ended, a new one in the next: one client may serve one `asyncio.run(...)` per
    task, and `await client.aclose()` may run in a loop of its own. It is used by one running loop at a time.
    """

    tool = staticmethod(tool)
    _run_class = AsyncRun
    _context_class = AsyncRunContext

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx2.Timeout = 10.0,
        retry: RetryPolicy | None = None,
        cache: ResponseCache | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(base_url, token, timeout=timeout, retry=retry, cache=cache, transport=transport, sleep=sleep)
        self._http: httpx2.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def _connections(self) -> httpx2.AsyncClient:
        """The connection pool of the running loop (see the class): a pool whose loop has ended is left behind, its
        connections having ended with that loop; a pool another loop is running with is refused."""
        if self._closed:
            raise RuntimeError("this AsyncWaymark is closed")
        loop = asyncio.get_running_loop()
        if self._http is not None and self._loop is not loop:
            if self._loop is not None and self._loop.is_running():
                raise RuntimeError("this AsyncWaymark is in use by another event loop; make one client per loop")
            self._http = None
        if self._http is None:
            self._http = httpx2.AsyncClient(**self._http_options)
            self._loop = loop
        return self._http

    async def _drive[T](self, operation: Operation[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                action = operation.throw(error) if error is not None else operation.send(value)
            except StopIteration as stop:
                return stop.value
            value = error = None
            if isinstance(action, Send):
                http = self._connections()
                request = action.request(http)
                try:
                    value = await http.send(request)
                except httpx2.TransportError as exc:
                    error = exc
            elif isinstance(action, Sleep):
                await self._sleep(action.seconds)
            elif isinstance(action, Call):
                try:
                    value = action.fn(*action.args)
                    if inspect.isawaitable(value):
                        value = await value
                except Exception as exc:
                    error = exc

    async def aclose(self, *, flush: bool = True) -> None:
        """Push the buffered runs (unless `flush=False`), then close the connections; the client is closed even when
        the push fails (it raises then). In any event loop; closing twice does nothing."""
        if self._closed:
            return
        try:
            if flush and len(self._buffer):
                await self.flush()
        finally:
            self._closed = True
            http, self._http = self._http, None
            if http is not None and self._loop is asyncio.get_running_loop():
                await http.aclose()

    async def __aenter__(self) -> AsyncWaymark:
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self.aclose(flush=exc is None)

    async def push(self, runs: Iterable[Any], *, batch_size: int = DEFAULT_BATCH_RUNS) -> PushResult:
        return await self._drive(self._core.push(runs, batch_size=batch_size))

    async def flush(self, *, batch_size: int = DEFAULT_BATCH_RUNS) -> PushResult:
        return await self._drive(_core.flush(self._core, self._buffer, batch_size=batch_size))

    async def get_run(self, run_id: int) -> dict[str, Any]:
        return await self._drive(self._core.get_run(run_id))

    async def active_graph(self, workspace: str, *, run: RecordedRun | None = None) -> GraphRevision:
        return await self._drive(self._core.active_graph(workspace, run=run or current_run()))

    async def graph_revision(self, workspace: str, ref: str | int) -> GraphRevision:
        return await self._drive(self._core.graph_revision(workspace, ref))

    async def procedures(self, intent: str | None = None, *, run: RecordedRun | None = None) -> Procedures:
        return await self._drive(self._core.procedures(intent, run=run or current_run()))

    async def guidance(
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
        return await self._drive(operation)

    async def claim(
        self,
        *,
        worker: str,
        kinds: Sequence[str] | None = JOB_KINDS,
        lease_seconds: int = 300,
        match: Mapping[str, Sequence[Any]] | None = None,
    ) -> Job | None:
        operation = self._core.claim(worker=worker, kinds=kinds, lease_seconds=lease_seconds, match=match)
        return await self._drive(operation)

    async def answer(self, job_id: int, run: Any) -> JobAnswer:
        return await self._drive(self._core.answer(job_id, run))

    async def work_jobs(
        self,
        handler: Callable[[Job], Any],
        *,
        worker: str,
        kinds: Sequence[str] | None = JOB_KINDS,
        lease_seconds: int = 300,
        match: Mapping[str, Sequence[Any]] | None = None,
        limit: int | None = None,
        on_error: Literal["raise", "skip", "answer"] = "raise",
    ) -> AsyncIterator[JobOutcome]:
        done = 0
        while limit is None or done < limit:
            job = await self.claim(worker=worker, kinds=kinds, lease_seconds=lease_seconds, match=match)
            if job is None:
                return
            yield await self._drive(self._core.work_job(job, handler, on_error=on_error))
            done += 1

    async def answer_jobs(self, handler: Callable[[Job], Any], **options: Any) -> list[JobOutcome]:
        return [outcome async for outcome in self.work_jobs(handler, **options)]
