"""The core both clients share: request building, the retry policy, the ETag cache, and every operation written once.

Each operation is a generator of *actions* (sans-IO): it yields `Send` (one HTTP request; the driver sends it back
the response, or throws the transport error into the generator), `Sleep` (wait before a retry) or `Call` (run the
agent's own code, e.g. a job handler; the driver sends back its result or throws its exception), and returns its
result. `Waymark` drives operations with `httpx2.Client` and `time.sleep`, `AsyncWaymark` with `httpx2.AsyncClient`
and `asyncio.sleep` (awaiting a coroutine a `Call` returns), so no logic is written twice. What the two clients hold
besides their connections (`ClientBase`) and what their run blocks do around the driven calls (`RunContextBase`) are
here too: each client keeps only its plain or awaited lines.
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import quote, urlencode

import httpx2

from ._errors import APIError, WaymarkConnectionError, error_class
from ._models import GraphRevision, Guidance, Job, JobAnswer, JobOutcome, Procedure, Procedures, PushResult
from ._recording import PushMode, RecordedRun, _current

API = "/api/v1"
DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "waymark-client/0.1"
MAX_BATCH_RUNS = 1000  # WAYMARK_INGEST_MAX_RUNS
DEFAULT_BATCH_RUNS = 100
DEFAULT_BATCH_BYTES = 4 * 1024 * 1024  # under WAYMARK_INGEST_MAX_BYTES (5 MB)
JOB_KINDS = ("procedure_replay", "graph_evaluation")


# -- actions ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Send:
    method: str
    path: str
    json: Any = None
    params: Mapping[str, str] | None = None
    headers: Mapping[str, str] | None = None

    def request(self, http: httpx2.Client | httpx2.AsyncClient) -> httpx2.Request:
        """The request to send with `http` (either client builds it alike)."""
        return http.build_request(self.method, self.path, json=self.json, params=self.params, headers=self.headers)


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Call:
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


type Action = Send | Sleep | Call
type Operation[T] = Generator[Action, Any, T]


# -- retry policy ----------------------------------------------------------------------------------------------------

# The request never reached the server: retrying can duplicate nothing, whatever the operation.
NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
# The request may have reached the server: retried only for operations that are safe to repeat.
MAYBE_SENT = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before trying a request again.

    - Connection errors (nothing reached the server), 429 and 503: every request is retried; a `Retry-After` header
      (seconds or an HTTP date) is honoured, and one longer than `max_retry_after` gives up at once.
    - Timeouts, connections dropped mid-request and other 5xx (500, 502, 504, …): only idempotent requests (every
      read, ingest — idempotent on (source, external_id) —, guidance, job answers; not a job claim, which would lease
      a second job).
    - Any other 4xx: never.
    Waits grow exponentially (`backoff` × `multiplier`^(attempt − 1), at most `max_backoff`) with ± `jitter` (a
    fraction). `max_attempts` counts the first try.
    """

    max_attempts: int = 5
    backoff: float = 0.5
    multiplier: float = 2.0
    max_backoff: float = 30.0
    jitter: float = 0.1
    max_retry_after: float = 120.0

    def backoff_for(self, attempt: int) -> float:
        base = min(self.max_backoff, self.backoff * self.multiplier ** max(0, attempt - 1))
        if self.jitter:
            base *= 1 + random.uniform(-self.jitter, self.jitter)
        return max(0.0, base)

    def delay_after_response(self, attempt: int, response: httpx2.Response, *, idempotent: bool) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to stop and return `response`."""
        status = response.status_code
        if attempt >= self.max_attempts or (status < 500 and status != 429):
            return None
        if status in (429, 503):
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if retry_after is not None:
                return retry_after if retry_after <= self.max_retry_after else None
            return self.backoff_for(attempt)
        if status >= 500 and idempotent:
            return self.backoff_for(attempt)
        return None

    def delay_after_error(self, attempt: int, error: Exception, *, idempotent: bool) -> float | None:
        """Seconds to wait before attempt `attempt + 1` after a transport error, or None to give up."""
        if attempt >= self.max_attempts:
            return None
        if isinstance(error, NOT_SENT) or (idempotent and isinstance(error, MAYBE_SENT)):
            return self.backoff_for(attempt)
        return None


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """A Retry-After header in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())


# -- the ETag cache --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheEntry:
    etag: str
    body: Any
    revision: str | None  # the X-Waymark-Revision header of the 200


@dataclass
class ResponseCache:
    """Bodies of GET answers that carried an ETag, per URL (least recently used dropped past `max_entries`); sent
    back as If-None-Match, and served when the server answers 304. Counts `hits` (304s served) and `misses`."""

    max_entries: int = 256
    hits: int = 0
    misses: int = 0
    _entries: OrderedDict[str, CacheEntry] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, key: str) -> CacheEntry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: str, entry: CacheEntry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def cache_key(path: str, params: Mapping[str, str] | None) -> str:
    query = urlencode(sorted((params or {}).items()))
    return f"{path}?{query}" if query else path


# -- responses -------------------------------------------------------------------------------------------------------


def raise_for(response: httpx2.Response, *, attempts: int = 1) -> None:
    """Raise the APIError of an error answer (Waymark's `{code, message, details}` body, or the bare status)."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    code = str(body.get("code") or f"http_{status}")
    message = str(body.get("message") or response.reason_phrase or "error")
    raise error_class(status)(status, code, message, body.get("details"), attempts=attempts)


def segment(value: object) -> str:
    return quote(str(value), safe="")


def graph_scope(workspace: str) -> str:
    """Where a run's graph pin applies: the workspace's active graph and its guidance."""
    return f"graph:{workspace}"


def procedures_scope(intent: str | None) -> str:
    return f"procedures:{intent or ''}"


# -- run items -------------------------------------------------------------------------------------------------------


def run_item(run: Any) -> dict[str, Any]:
    """A run in the ingest format: a mapping as given, or a recorded run (anything with `to_item()`)."""
    if hasattr(run, "to_item"):
        return run.to_item()
    if isinstance(run, Mapping):
        return dict(run)
    raise TypeError(f"a run is a mapping in the ingest format or a recorded run, not {type(run).__name__}")


def batches(items: Sequence[dict[str, Any]], *, max_runs: int, max_bytes: int) -> list[list[dict[str, Any]]]:
    """Split runs into batches of at most `max_runs` runs and about `max_bytes` of JSON (a bigger run goes alone)."""
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for item in items:
        item_size = len(json.dumps(item, ensure_ascii=False, default=str).encode()) + 1
        if current and (len(current) >= max_runs or size + item_size > max_bytes):
            out.append(current)
            current, size = [], 0
        current.append(item)
        size += item_size
    if current:
        out.append(current)
    return out


def check_identities(items: Iterable[dict[str, Any]]) -> None:
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(items):
        identity = (str(item.get("source") or ""), str(item.get("external_id") or ""))
        if not all(identity):
            raise ValueError(f"run {index} needs a source and an external_id (the ingest is idempotent on them)")
        if identity in seen:
            raise ValueError(f"run {index} repeats (source, external_id) {identity}: one run per identity in a push")
        seen.add(identity)


# -- the core --------------------------------------------------------------------------------------------------------


class Core:
    """Request building, retries, the ETag cache and the operations; no I/O of its own."""

    def __init__(self, *, retry: RetryPolicy | None = None, cache: ResponseCache | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.cache = cache if cache is not None else ResponseCache()
        self.revisions: dict[tuple[str, str], GraphRevision] = {}  # (workspace, digest): immutable, kept for good

    # -- one request, retried ---------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool = True,
    ) -> Operation[tuple[httpx2.Response, int]]:
        """Send until the retry policy stops: the last response and the number of attempts, or
        WaymarkConnectionError when the transport kept failing."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = yield Send(method, path, json=json, params=params, headers=headers)
            except httpx2.TransportError as exc:
                delay = self.retry.delay_after_error(attempt, exc, idempotent=idempotent)
                if delay is None:
                    raise WaymarkConnectionError(
                        f"{method} {path} failed after {attempt} attempt(s): {type(exc).__name__}: {exc}",
                        attempts=attempt,
                    ) from exc
            else:
                delay = self.retry.delay_after_response(attempt, response, idempotent=idempotent)
                if delay is None:
                    return response, attempt
            yield Sleep(delay)

    def expect(self, method: str, path: str, statuses: Sequence[int], **options: Any) -> Operation[httpx2.Response]:
        response, attempts = yield from self.request(method, path, **options)
        if response.status_code not in statuses:
            raise_for(response, attempts=attempts)
        return response

    def cached_get(
        self, path: str, params: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None
    ) -> Operation[tuple[CacheEntry, bool]]:
        """GET with If-None-Match from the cache (and `headers`): (entry, True) when the server answered 304,
        (entry, False) for a fresh 200 (stored when it carries an ETag). A 304's X-Waymark-Revision, when it has
        one, is the entry's revision."""
        key = cache_key(path, params)
        cached = self.cache.get(key)
        sent = dict(headers or {})
        if cached is not None:
            sent["If-None-Match"] = cached.etag
        response, attempts = yield from self.request("GET", path, params=params, headers=sent or None)
        if response.status_code == 304 and cached is not None:
            self.cache.hits += 1
            revision = response.headers.get("X-Waymark-Revision")
            return (replace(cached, revision=revision) if revision else cached), True
        if response.status_code != 200:
            raise_for(response, attempts=attempts)
        self.cache.misses += 1
        entry = CacheEntry(
            etag=response.headers.get("ETag", ""),
            body=response.json(),
            revision=response.headers.get("X-Waymark-Revision"),
        )
        if entry.etag:
            self.cache.put(key, entry)
        return entry, False

    # -- operations -------------------------------------------------------------------------------------------------

    def push(
        self, runs: Iterable[Any], *, batch_size: int = DEFAULT_BATCH_RUNS, max_batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Operation[PushResult]:
        """POST /trajectories in batches; each batch is retried as a whole (ingest is idempotent)."""
        if not 1 <= batch_size <= MAX_BATCH_RUNS:
            raise ValueError(f"batch_size must be between 1 and {MAX_BATCH_RUNS}")
        items = [run_item(run) for run in runs]
        check_identities(items)
        result = PushResult()
        for batch in batches(items, max_runs=batch_size, max_bytes=max_batch_bytes):
            response = yield from self.expect("POST", f"{API}/trajectories", (200, 201), json={"runs": batch})
            result = result.merge(response.json())
        return result

    def active_graph(self, workspace: str, *, run: RecordedRun | None = None) -> Operation[GraphRevision]:
        """The workspace's active graph; for a run, with its key and pinned revision (and the answer noted)."""
        scope = graph_scope(workspace)
        headers = run.step_headers(scope) if run is not None else None
        entry, from_cache = yield from self.cached_get(f"{API}/graphs/{segment(workspace)}/active", headers=headers)
        revision = GraphRevision.from_json(entry.body, etag=entry.etag or None, from_cache=from_cache)
        self.revisions.setdefault((revision.workspace, revision.digest), revision)
        if run is not None:
            run.note_served(scope, entry.revision)
            run.note_graph(revision)
        return revision

    def graph_revision(self, workspace: str, ref: str | int) -> Operation[GraphRevision]:
        """One revision by seq or digest; a revision never changes, so one fetched by digest is kept for good."""
        known = self.revisions.get((workspace, str(ref)))
        if known is not None:
            return known
        response = yield from self.expect("GET", f"{API}/graphs/{segment(workspace)}/revisions/{segment(ref)}", (200,))
        revision = GraphRevision.from_json(response.json())
        self.revisions[(revision.workspace, revision.digest)] = revision
        return revision

    def procedures(self, intent: str | None = None, *, run: RecordedRun | None = None) -> Operation[Procedures]:
        """The active procedures (of `intent`); for a run, with its key and pinned revision (and the answer noted)."""
        params = {"intent": intent} if intent else None
        scope = procedures_scope(intent)
        headers = run.step_headers(scope) if run is not None else None
        entry, from_cache = yield from self.cached_get(f"{API}/procedures", params, headers=headers)
        items = tuple(Procedure.from_json(item) for item in entry.body.get("items") or [])
        if run is not None:
            run.note_served(scope, entry.revision)
        return Procedures(items=items, etag=entry.etag or None, revision=entry.revision, from_cache=from_cache)

    def guidance(
        self,
        workspace: str,
        *,
        query: str = "",
        steps: Sequence[Mapping[str, Any]] = (),
        revision: str | None = None,
        mode: str | None = None,
        hops: int | None = None,
        window: int | None = None,
        run: RecordedRun | None = None,
    ) -> Operation[Guidance]:
        """Guidance for the next step; for a run, with its key and the revision its first graph call pinned."""
        body: dict[str, Any] = {"query": query, "steps": [dict(step) for step in steps]}
        optional = {"revision": revision, "mode": mode, "hops": hops, "window": window}
        body.update({key: value for key, value in optional.items() if value is not None})
        scope = graph_scope(workspace)
        headers = run.step_headers(scope) if run is not None else None
        path = f"{API}/graphs/{segment(workspace)}/guidance"
        response = yield from self.expect("POST", path, (200,), json=body, headers=headers)
        guidance = Guidance.from_json(response.json())
        if run is not None:
            run.note_served(scope, response.headers.get("X-Waymark-Revision"))
            run.note_guidance(workspace, guidance.revision)
        return guidance

    def get_run(self, run_id: int) -> Operation[dict[str, Any]]:
        response = yield from self.expect("GET", f"{API}/trajectories/{int(run_id)}", (200,))
        return response.json()

    def claim(
        self,
        *,
        worker: str,
        kinds: Sequence[str] | None = JOB_KINDS,
        lease_seconds: int = 300,
        match: Mapping[str, Sequence[Any]] | None = None,
    ) -> Operation[Job | None]:
        """Lease the oldest open job among `kinds` (whose payload holds, for every key of `match`, one of its
        values): the Job, or None (204). Never retried once it may have reached the server (a repeat would lease a
        second job)."""
        body: dict[str, Any] = {"worker": worker, "lease_seconds": lease_seconds}
        if kinds is not None:
            body["kinds"] = list(kinds)
        if match:
            body["match"] = {key: list(values) for key, values in match.items()}
        response = yield from self.expect("POST", f"{API}/jobs/claim", (200, 204), json=body, idempotent=False)
        if response.status_code == 204:
            return None
        return Job.from_json(response.json())

    def answer(self, job_id: int, run: Any) -> Operation[JobAnswer]:
        """Answer a job with a run (a repeat answers 200, not counted twice: safe to retry)."""
        item = run_item(run)
        response = yield from self.expect("POST", f"{API}/jobs/{int(job_id)}/result", (200, 201), json={"run": item})
        body = response.json()
        return JobAnswer(job_id=int(body["job_id"]), run_id=int(body["run_id"]), counted=bool(body["counted"]))

    def work_job(
        self, job: Job, handler: Callable[[Job], Any], *, on_error: Literal["raise", "skip", "answer"]
    ) -> Operation[JobOutcome]:
        """Run `handler(job)` and answer with the run it returns. When the handler raises: `raise` re-raises (the
        job is left to its lease), `skip` reports the error and leaves the job likewise, `answer` answers with a
        failed run recording the error. An answer the API refuses (4xx) is reported, not raised."""
        try:
            produced = yield Call(handler, (job,))
        except Exception as exc:
            if on_error == "raise":
                raise
            if on_error == "skip":
                return JobOutcome(job=job, error=exc)
            produced = failed_job_run(job, exc)
        if produced is None:
            raise TypeError(f"the job handler returned no run for job {job.id}")
        item = run_item(produced)
        try:
            answer = yield from self.answer(job.id, item)
        except APIError as exc:
            if exc.status >= 500 or exc.status == 429:
                raise
            return JobOutcome(job=job, run=item, error=exc)
        return JobOutcome(job=job, run=item, answer=answer)


def failed_job_run(job: Job, error: BaseException) -> dict[str, Any]:
    return {
        "task": str(job.payload.get("task") or "")[:20_000],
        "outcome": "failure",
        "metadata": {"error": {"type": type(error).__name__, "message": str(error)[:2000]}},
        "steps": [],
    }


# -- recorded runs ---------------------------------------------------------------------------------------------------


def pin_run(
    core: Core, run: Any, *, workspace: str | None, revision: str | int | None, procedure_intent: str | None
) -> Operation[None]:
    """Pin what a run starts with: the workspace's active graph (or the revision asked for) and the intent's active
    procedure (the first of GET /procedures?intent=…, None when there is none)."""
    if workspace:
        if revision is not None:
            graph = yield from core.graph_revision(workspace, revision)
        else:
            graph = yield from core.active_graph(workspace, run=run)
        run.pin_graph(graph)
    if procedure_intent:
        found = yield from core.procedures(procedure_intent, run=run)
        run.pin_procedure(found.items[0] if found.items else None)


class Buffer:
    """Runs kept for a later batch push (`push="buffer"`, or a push that failed when its block exited)."""

    def __init__(self) -> None:
        self._items: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def add(self, item: dict[str, Any]) -> None:
        with self._lock:
            self._items.append(item)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items)

    def drop(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            ids = {id(item) for item in items}
            self._items = [item for item in self._items if id(item) not in ids]

    def __len__(self) -> int:
        return len(self._items)


def deliver(core: Core, buffer: Buffer, run: Any, mode: str, *, raised: bool) -> Operation[PushResult | None]:
    """What happens to a run when its block exits: pushed (`now`), kept for `flush()` (`buffer`) or left to the
    caller (`never`). A push that fails keeps the run in the buffer; its error is raised unless the block raised."""
    if mode == "never":
        return None
    item = run.to_item()
    if mode == "buffer":
        buffer.add(item)
        return None
    try:
        return (yield from core.push([item]))
    except (WaymarkConnectionError, APIError):
        buffer.add(item)
        if raised:
            return None
        raise


def flush(core: Core, buffer: Buffer, *, batch_size: int) -> Operation[PushResult]:
    """Push every buffered run in batches; they leave the buffer only once stored (resending is harmless)."""
    items = buffer.snapshot()
    if not items:
        return PushResult()
    unique: dict[tuple[Any, Any], dict[str, Any]] = {}
    for item in items:  # a run buffered twice (a failed push, then again) is one run
        unique.setdefault((item.get("source"), item.get("external_id")), item)
    result = yield from core.push(list(unique.values()), batch_size=batch_size)
    buffer.drop(items)
    return result


# -- what both clients hold ------------------------------------------------------------------------------------------


def connection_settings(base_url: str | None, token: str | None) -> tuple[str, str]:
    base_url = base_url or os.environ.get("WAYMARK_URL") or DEFAULT_URL
    token = token if token is not None else os.environ.get("WAYMARK_TOKEN", "")
    return base_url.rstrip("/"), token.strip()


def default_headers(token: str) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class RunContextBase:
    """What a run block does around the calls its client drives: before the block, pin what the run starts with
    (`_pinning()`, then `_started()`); after it, the run finished and its delivery (`_delivery()`)."""

    def __init__(self, client: ClientBase[Any], run: RecordedRun, *, push: PushMode, pins: dict[str, Any]) -> None:
        self._client = client
        self.run = run
        self._push = push
        self._pins = pins
        self._token: Any = None
        self.pushed: PushResult | None = None

    def _pinning(self) -> Operation[None]:
        return pin_run(self._client._core, self.run, **self._pins)

    def _started(self) -> Any:
        """The run, started and current in this context (what `with` binds)."""
        self.run.start()
        self._token = _current.set(self.run)
        return self.run

    def _delivery(self, exc: BaseException | None) -> Operation[PushResult | None]:
        _current.reset(self._token)
        self.run.finish(exc)
        return deliver(self._client._core, self._client._buffer, self.run, self._push, raised=exc is not None)


class ClientBase[C: RunContextBase]:
    """What `Waymark` and `AsyncWaymark` hold besides their connections: the settings the connections open with
    (`_http_options`), the core, the buffer of runs and what waits between retries; and `run()`, which makes the
    client's own run (`_run_class`) in its own run block (`_context_class`)."""

    _run_class: Callable[..., RecordedRun]
    _context_class: type[C]

    def __init__(
        self,
        base_url: str | None,
        token: str | None,
        *,
        timeout: Any,
        retry: RetryPolicy | None,
        cache: ResponseCache | None,
        transport: Any,
        sleep: Callable[[float], Any],
    ) -> None:
        self.base_url, token = connection_settings(base_url, token)
        self._core = Core(retry=retry, cache=cache)
        self._buffer = Buffer()
        self._sleep = sleep
        self._http_options: dict[str, Any] = {
            "base_url": self.base_url,
            "headers": default_headers(token),
            "timeout": timeout,
            "transport": transport,
        }

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
    ) -> C:
        """Record a run: `with client.run(task=..., source=...) as run:` (`async with` for AsyncWaymark). With
        `workspace`, the run pins that workspace's active graph (or `revision`) for its whole life; with
        `procedure=True`, the active procedure of `intent`. On exit the run is pushed (`push="now"`), kept for
        `flush()` (`"buffer"`) or left to you (`"never"`, e.g. to answer a job with it)."""
        run = self._run_class(
            self,
            task=task,
            source=source,
            intent=intent,
            external_id=external_id,
            metadata=metadata,
            graph_workspace=workspace or "",
        )
        pins = {"workspace": workspace, "revision": revision, "procedure_intent": intent if procedure else None}
        return self._context_class(self, run, push=push, pins=pins)
