"""The online guidance runtime (spec §7): localize the agent, serialize N_h or the whole graph, optionally ask Ψ.

    u_t = Match(a_{t-1}, V);  G_t = N_h(u_t), or the full graph when matching fails;  g_t = Ψ(G_t, q, T_{t-w:t})

Synchronous: one Guide per episode over a frozen graph. Raw modes never call a model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from llm.core import ModelRequest, ModelResponse

from .graph import START, Graph
from .serialize import render_trajectory, serialize_context

MODES: tuple[str, ...] = ("generative_subgraph", "generative_full", "raw_subgraph", "raw_full", "none")
GUIDANCE_ROLE = "guidance"

# Our own wording of the reference's guidance prompt; the six slots come in the reference's order.
GUIDANCE_PROMPT = (
    "You are guiding an AI agent, one step at a time, as it works on {task_description}.\n"
    "Below is {graph_context_desc}:{graph_summary}\n"
    "The agent's current query or observation: {query}\n"
    "The agent's most recent steps:{recent_trajectory}\n"
    "Study this {graph_source} against the progress the agent has made so far. Drawing on the condition, guidance "
    "and pitfalls carried by the transitions, tell the agent concretely which step or strategy to take next, which "
    "pitfalls to steer clear of, and how to recover from any recent failure. Name the specific tools, arguments, "
    "file paths or command patterns from the graph context whenever they bear on the next step."
)
LOCAL_CONTEXT_DESC = "the localized procedural graph context around the agent's current node"
LOCAL_SOURCE = "local graph context"
FULL_CONTEXT_DESC = "the complete Procedural Graph that lays out the task's structure and strategy"
FULL_SOURCE = "complete Procedural Graph"


@dataclass(frozen=True)
class Step:
    """One trajectory element: an action (a tool call or a status node id), its arguments and what came back."""

    action: str
    args: Any = None
    observation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "args": self.args, "observation": self.observation}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Step:
        return cls(value["action"], value.get("args"), value.get("observation") or "")


def as_step(value: Any) -> Step:
    """A Step from a Step, a mapping with `action`, or any object with `action`/`args`/`observation`."""
    if isinstance(value, Step):
        return value
    if isinstance(value, Mapping):
        return Step.from_dict(value)
    return Step(value.action, getattr(value, "args", None), getattr(value, "observation", "") or "")


class Localizer(Protocol):
    def locate(self, graph: Graph, trajectory: Sequence[Step]) -> str | None:
        """The node id the agent is at, or None when matching fails."""
        ...


class ExactActionLocalizer:
    """The paper's Match: the last action equals a node id; an empty trajectory is at Start (a0 = Start)."""

    def __init__(self, normalize: Callable[[str], str] | None = None) -> None:
        self.normalize = normalize

    def locate(self, graph: Graph, trajectory: Sequence[Step]) -> str | None:
        if not trajectory:
            return START if START in graph.nodes else None
        action = trajectory[-1].action
        if self.normalize is not None and isinstance(action, str):
            action = self.normalize(action)
        return action if isinstance(action, str) and action in graph.nodes else None


def _positive_int(value: Any, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, not {value!r}")


@dataclass(frozen=True)
class GuidanceConfig:
    hops: int = 2
    window: int = 3
    mode: str = "generative_subgraph"
    include_relations: bool = True
    max_tokens: int = 1024
    task_description: str = "tasks in this workspace"
    max_guidance_calls: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        _positive_int(self.hops, "hops", 1)
        _positive_int(self.window, "window", 0)
        _positive_int(self.max_tokens, "max_tokens", 1)
        if self.max_guidance_calls is not None:
            _positive_int(self.max_guidance_calls, "max_guidance_calls", 0)
        if not isinstance(self.include_relations, bool):
            raise ValueError("include_relations must be a boolean")
        if not isinstance(self.task_description, str):
            raise ValueError("task_description must be a string")


@dataclass(frozen=True)
class Guidance:
    """g_t and what produced it."""

    text: str
    node_id: str | None
    subgraph_digest: str | None
    used_full_graph: bool
    context: str
    usage: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    mode: str = "generative_subgraph"

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.text, self.node_id, self.subgraph_digest, self.used_full_graph, self.context)
        return (Guidance, (*fields, dict(self.usage), self.mode))

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "node_id": self.node_id,
            "subgraph_digest": self.subgraph_digest,
            "used_full_graph": self.used_full_graph,
            "usage": dict(self.usage),
            "mode": self.mode,
        }


class GuidanceModel(Protocol):
    def complete(self, request: ModelRequest) -> ModelResponse: ...


def _usage_dict(usage: Any) -> dict[str, Any]:
    if usage is None:
        return {}
    if isinstance(usage, Mapping):
        return dict(usage)
    if dataclasses.is_dataclass(usage) and not isinstance(usage, type):
        return dataclasses.asdict(usage)
    return {}


def render_guidance_prompt(
    *, task_description: str, context: str, query: str, trajectory: Sequence[Any], window: int, full: bool
) -> str:
    """The guidance prompt: task, graph-context description, graph summary, query, recent steps, graph source."""
    return GUIDANCE_PROMPT.format(
        task_description=task_description,
        graph_context_desc=FULL_CONTEXT_DESC if full else LOCAL_CONTEXT_DESC,
        graph_summary="\n" + context,
        query=query,
        recent_trajectory="\n" + render_trajectory(trajectory, window),
        graph_source=FULL_SOURCE if full else LOCAL_SOURCE,
    )


class Guide:
    """Per-episode guidance over a frozen graph; `visited` and `guidance_log` record what happened."""

    def __init__(
        self,
        graph: Graph,
        model: GuidanceModel | None = None,
        config: GuidanceConfig | None = None,
        localizer: Localizer | None = None,
    ) -> None:
        self.graph = graph
        self.model = model
        self.config = config or GuidanceConfig()
        self.localizer = localizer or ExactActionLocalizer()
        if self.config.mode.startswith("generative") and model is None:
            raise ValueError(f"mode {self.config.mode!r} needs a model; use a raw_* mode or 'none' without one")
        self.visited: list[str] = []
        self.guidance_log: list[Guidance] = []
        self.model_calls = 0

    def _context(self, node_id: str | None) -> tuple[str, str | None, bool]:
        """(serialized context, neighbourhood digest or None, used_full_graph).

        The one seam a host may override, for example to serve serialized contexts from a cache keyed by the graph
        digest; localization, modes, degradation and the prompt stay the Guide's.
        """
        include = self.config.include_relations
        if self.config.mode.endswith("_full") or node_id is None:
            return serialize_context(self.graph, None, include_relations=include), None, True
        context = serialize_context(self.graph, node_id, self.config.hops, include)
        return context, self.graph.neighborhood(node_id, self.config.hops).digest, False

    def context_for(self, trajectory: Sequence[Any] = ()) -> tuple[str | None, str, bool]:
        """(node id, serialized context, used_full_graph) with no model call and nothing recorded."""
        node_id = self.localizer.locate(self.graph, [as_step(s) for s in trajectory])
        context, _, used_full = self._context(node_id)
        return node_id, context, used_full

    def guidance(self, query: str, trajectory: Sequence[Any] = ()) -> Guidance:
        steps = [as_step(s) for s in trajectory]
        mode = self.config.mode
        node_id = self.localizer.locate(self.graph, steps)
        if node_id is not None:
            self.visited.append(node_id)
        if mode == "none":
            return self._record(Guidance("", node_id, None, False, "", mode=mode))
        context, digest, used_full = self._context(node_id)
        limit = self.config.max_guidance_calls
        if mode.startswith("generative") and limit is not None and self.model_calls >= limit:
            mode = "raw_full" if used_full else "raw_subgraph"
        if mode.startswith("raw"):
            return self._record(Guidance(context, node_id, digest, used_full, context, mode=mode))
        prompt = render_guidance_prompt(
            task_description=self.config.task_description,
            context=context,
            query=query,
            trajectory=steps,
            window=self.config.window,
            full=used_full,
        )
        metadata = {"node_id": node_id, "used_full_graph": used_full, "subgraph_digest": digest}
        request = ModelRequest(
            role=GUIDANCE_ROLE, system="", parts=(prompt,), max_tokens=self.config.max_tokens, metadata=metadata
        )
        assert self.model is not None
        response = self.model.complete(request)
        self.model_calls += 1
        usage = MappingProxyType(_usage_dict(getattr(response, "usage", None)))
        return self._record(Guidance(response.text.strip(), node_id, digest, used_full, context, usage, mode))

    def _record(self, result: Guidance) -> Guidance:
        self.guidance_log.append(result)
        return result
