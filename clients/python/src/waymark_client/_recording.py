"""Recording a run as the agent executes: the run, its steps, and the tool decorator (shared by both clients).

A step is recorded per decorated tool call: its name, arguments (bound to the function's parameters), result (the
observation), timing, and `ok` — false with the exception recorded when the tool raises (the exception propagates).
`@run.tool` records into that run; `@client.tool` / `waymark_client.tool` into the run whose `with` block is
running in the current context (a context variable, so threads and asyncio tasks each see their own), and just
calls the function when no run is being recorded.

A run is also what the per-step calls made for it carry (the active graph, guidance, the active procedures): its key
in `X-Waymark-Run`, and per endpoint the `X-Waymark-Revision` the first answer of the run named, sent back on every
later call of the run, so a canary rollout serves the run one version from its first step to its last. What the run
was served fills its `graph_workspace`, `graph_revision` and `procedure_revision` unless they were set.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal, overload

from ._models import GraphRevision, Procedure

type Outcome = Literal["success", "failure", "unknown"]
type PushMode = Literal["now", "buffer", "never"]

MAX_ARGUMENT_CHARS = 160  # what the ingest keeps of a string argument
MAX_OBSERVATION_CHARS = 8000
GUIDANCE_STEPS = 50  # the last steps sent with a guidance request (the server localizes on the last one)
RUN_HEADER = "X-Waymark-Run"
REVISION_HEADER = "X-Waymark-Revision"
MAX_RUN_KEY = 200  # what the server reads of a run key (printable ASCII)

_current: ContextVar[RecordedRun | None] = ContextVar("waymark_current_run", default=None)


def current_run() -> RecordedRun | None:
    """The run being recorded in this context (inside `with client.run(...)`), if any."""
    return _current.get()


def run_key_of(external_id: str) -> str:
    """The run key sent as X-Waymark-Run: the external id when it is printable ASCII of at most MAX_RUN_KEY
    characters (what the server reads as a key), else a digest of it (`sha256:<hex>`), as stable as the id."""
    key = external_id.strip()
    if key and len(key) <= MAX_RUN_KEY and key.isascii() and key.isprintable():
        return key
    return "sha256:" + hashlib.sha256(external_id.encode("utf-8", "surrogatepass")).hexdigest()


def header_value(value: Any) -> str:
    """A revision header's value as the client keeps and sends it: printable ASCII, else "" (never sent)."""
    if not isinstance(value, str):
        return ""
    value = value.strip()
    return value if 0 < len(value) <= MAX_RUN_KEY and value.isascii() and value.isprintable() else ""


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def scalar(value: Any) -> Any:
    """An argument value the ingest keeps: scalars as they are, anything else as compact JSON (or its repr)."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value[:MAX_ARGUMENT_CHARS]
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text[:MAX_ARGUMENT_CHARS]


def observation_of(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        text = result
    else:
        try:
            text = json.dumps(result, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):
            text = repr(result)
    return text[:MAX_OBSERVATION_CHARS]


def error_text(error: BaseException) -> str:
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def capture_arguments(signature: inspect.Signature | None, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by parameter name (defaults applied; *args as name_0, name_1…; **kwargs flattened)."""
    if signature is None:
        return {**{f"arg{i}": scalar(v) for i, v in enumerate(args)}, **{k: scalar(v) for k, v in kwargs.items()}}
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return capture_arguments(None, args, kwargs)
    bound.apply_defaults()
    out: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            out.update({f"{name}_{i}": scalar(item) for i, item in enumerate(value)})
        elif kind is inspect.Parameter.VAR_KEYWORD:
            out.update({str(key): scalar(item) for key, item in value.items()})
        else:
            out[name] = scalar(value)
    return out


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def instrument[F: Callable[..., Any]](fn: F, name: str | None, target: Callable[[], RecordedRun | None]) -> F:
    """`fn` wrapped so each call is recorded as a step of `target()` (nothing recorded when it is None)."""
    tool_name = name or getattr(fn, "__name__", "tool")
    signature = _signature(fn)

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            run = target()
            if run is None:
                return await fn(*args, **kwargs)
            step = run.begin_step(tool_name, capture_arguments(signature, args, kwargs))
            try:
                result = await fn(*args, **kwargs)
            except BaseException as exc:
                run.end_step(step, error=exc)
                raise
            run.end_step(step, result=result)
            return result

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = target()
        if run is None:
            return fn(*args, **kwargs)
        step = run.begin_step(tool_name, capture_arguments(signature, args, kwargs))
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            run.end_step(step, error=exc)
            raise
        run.end_step(step, result=result)
        return result

    return wrapper  # type: ignore[return-value]


@overload
def tool[F: Callable[..., Any]](fn: F, *, name: str | None = None) -> F: ...
@overload
def tool[F: Callable[..., Any]](fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...
def tool(fn: Any = None, *, name: str | None = None) -> Any:
    """Decorator: record each call of the tool as a step of the run being recorded in the current context."""
    if fn is None:
        return lambda f: instrument(f, name, current_run)
    return instrument(fn, name, current_run)


class RecordedRun:
    """A run being recorded; `to_item()` is the run in the ingest format (docs/api.md "Ingesting runs").

    Set the outcome with `succeed()` / `fail()` (or `outcome = …`); an exception leaving the `with` block sets it to
    failure and records the error in `metadata["error"]`; left unset it is sent as `unknown`. `graph` /
    `graph_revision` and `procedure` are what the run pinned when it started (every guidance request of the run
    passes that revision, so a new activation meanwhile changes nothing for this run).

    `run_key` is sent as `X-Waymark-Run` on the run's per-step calls, and `served` holds, per endpoint, the
    `X-Waymark-Revision` the run's first call there was answered with (sent back on the later ones).
    `graph_revision` and `procedure_revision` may be set; left unset they are what the run was served."""

    def __init__(
        self,
        *,
        task: str,
        source: str,
        intent: str = "",
        external_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        graph_workspace: str = "",
    ) -> None:
        if not source:
            raise ValueError("a run needs a source (who sent it: your agent's name)")
        self.task = task
        self.source = source
        self.intent = intent
        self.external_id = external_id or uuid.uuid4().hex
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.graph_workspace = graph_workspace
        self.outcome: Outcome | None = None
        self.score: float | None = None
        self.steps: list[dict[str, Any]] = []
        self.started_at: str | None = None
        self.ended_at: str | None = None
        self.error: BaseException | None = None
        self.graph: GraphRevision | None = None
        self.procedure: Procedure | None = None
        self._served: dict[str, str] = {}  # "graph:<workspace>" / "procedures:<intent>" -> X-Waymark-Revision
        self._graph_revision = ""  # set by the agent
        self._procedure_revision = ""  # set by the agent
        self._guided_revision = ""  # the revision the first guidance answer came from

    # -- the run key and what the run was served ---------------------------------------------------------------------

    @property
    def run_key(self) -> str:
        return run_key_of(self.external_id)

    @property
    def served(self) -> dict[str, str]:
        """Per endpoint ("graph:<workspace>", "procedures:<intent>"), the X-Waymark-Revision the run pinned."""
        return dict(self._served)

    def step_headers(self, scope: str) -> dict[str, str]:
        """The headers of a per-step call of this run: its key, and the revision the scope's first answer named."""
        headers = {RUN_HEADER: self.run_key}
        pinned = self._served.get(scope)
        if pinned:
            headers[REVISION_HEADER] = pinned
        return headers

    def note_served(self, scope: str, revision: str | None) -> None:
        """Keep the revision of the scope's first answer that named one (later answers never move the pin)."""
        value = header_value(revision)
        if value:
            self._served.setdefault(scope, value)

    def note_graph(self, graph: GraphRevision) -> None:
        """An active graph served during the run: pinned when the run has none yet (of its workspace, if it has
        one)."""
        if self.graph is None and self.graph_workspace in ("", graph.workspace):
            self.pin_graph(graph)

    def note_guidance(self, workspace: str, revision: str) -> None:
        """The revision a guidance answer came from: the run's graph revision when it pinned no graph."""
        if not self._guided_revision and revision and self.graph_workspace in ("", workspace):
            self.graph_workspace = workspace
            self._guided_revision = revision

    # -- pins --------------------------------------------------------------------------------------------------------

    @property
    def graph_revision(self) -> str:
        """As set, else the digest of the pinned graph, else the revision guidance was served from."""
        if self._graph_revision:
            return self._graph_revision
        return self.graph.digest if self.graph is not None else self._guided_revision

    @graph_revision.setter
    def graph_revision(self, value: str) -> None:
        self._graph_revision = value or ""

    @property
    def procedure_revision(self) -> str:
        """As set, else the content revision of the pinned procedure, else the X-Waymark-Revision the active
        procedures were first served with during the run (sent when the answer lists one procedure)."""
        if self._procedure_revision:
            return self._procedure_revision
        if self.procedure is not None and self.procedure.content_revision:
            return self.procedure.content_revision
        return next((value for scope, value in self._served.items() if scope.startswith("procedures:")), "")

    @procedure_revision.setter
    def procedure_revision(self, value: str) -> None:
        self._procedure_revision = value or ""

    def pin_graph(self, graph: GraphRevision) -> None:
        self.graph = graph
        self.graph_workspace = self.graph_workspace or graph.workspace

    def pin_procedure(self, procedure: Procedure | None) -> None:
        self.procedure = procedure
        if procedure is not None:
            self.metadata.setdefault(
                "procedure",
                {"id": procedure.id, "version": procedure.version, "content_revision": procedure.content_revision},
            )

    # -- steps -------------------------------------------------------------------------------------------------------

    def tool[F: Callable[..., Any]](self, fn: F | None = None, *, name: str | None = None) -> Any:
        """Decorator: record each call of the tool as a step of this run."""
        if fn is None:
            return lambda f: instrument(f, name, lambda: self)
        return instrument(fn, name, lambda: self)

    def begin_step(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        step = {"tool": tool, "arguments": arguments, "observation": "", "ok": None, "started_at": now_iso()}
        self.steps.append(step)
        return step

    def end_step(self, step: dict[str, Any], *, result: Any = None, error: BaseException | None = None) -> None:
        step["ended_at"] = now_iso()
        if error is not None:
            step["ok"] = False
            step["observation"] = error_text(error)[:MAX_OBSERVATION_CHARS]
        else:
            step["ok"] = True
            step["observation"] = observation_of(result)

    def record(
        self,
        tool: str,
        *,
        arguments: dict[str, Any] | None = None,
        observation: str = "",
        ok: bool | None = True,
        started_at: str | None = None,
        ended_at: str | None = None,
        action_family: str | None = None,
        input_tokens: int = 0,
        cached_input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
    ) -> dict[str, Any]:
        """Record a step by hand (a model call with its tokens and cost, a tool not decorated)."""
        step: dict[str, Any] = {
            "tool": tool,
            "arguments": {str(key): scalar(value) for key, value in (arguments or {}).items()},
            "observation": observation[:MAX_OBSERVATION_CHARS],
            "ok": ok,
        }
        optional = {"started_at": started_at, "ended_at": ended_at, "action_family": action_family}
        step.update({key: value for key, value in optional.items() if value is not None})
        usage = {"input_tokens": input_tokens, "cached_input_tokens": cached_input_tokens}
        usage.update(output_tokens=output_tokens, cost=cost)
        step.update({key: value for key, value in usage.items() if value})
        self.steps.append(step)
        return step

    # -- outcome -----------------------------------------------------------------------------------------------------

    def succeed(self, score: float | None = None) -> None:
        self.outcome = "success"
        if score is not None:
            self.score = score

    def fail(self, reason: str | None = None, score: float | None = None) -> None:
        self.outcome = "failure"
        if reason:
            self.metadata["failure_reason"] = reason
        if score is not None:
            self.score = score

    def start(self) -> None:
        self.started_at = self.started_at or now_iso()

    def finish(self, error: BaseException | None = None) -> None:
        self.ended_at = now_iso()
        if error is not None:
            self.error = error
            self.outcome = "failure"
            self.metadata["error"] = {"type": type(error).__name__, "message": str(error)[:2000]}

    # -- guidance and the ingest format ------------------------------------------------------------------------------

    def guidance_request(self, query: str | None, options: dict[str, Any]) -> dict[str, Any]:
        """The guidance call's arguments: this run's workspace, pinned revision and last steps."""
        if not self.graph_workspace:
            raise RuntimeError("this run has no graph workspace: start it with client.run(..., workspace=...)")
        steps = [
            {"action": step["tool"], "args": step.get("arguments") or {}, "observation": step.get("observation", "")}
            for step in self.steps[-GUIDANCE_STEPS:]
        ]
        revision = self.graph_revision or None
        return {"query": self.task if query is None else query, "steps": steps, "revision": revision, **options}

    def to_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "source": self.source,
            "external_id": self.external_id,
            "task": self.task,
            "outcome": self.outcome or "unknown",
            "metadata": self.metadata,
            "steps": [dict(step) for step in self.steps],
        }
        optional = {
            "intent": self.intent,
            "score": self.score,
            "graph_workspace": self.graph_workspace,
            "graph_revision": self.graph_revision,
            "procedure_revision": self.procedure_revision,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }
        item.update({key: value for key, value in optional.items() if value not in (None, "")})
        return item
