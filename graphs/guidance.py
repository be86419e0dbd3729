"""Step guidance for agents: the core Guide over a cached graph and cached serialized neighbourhoods.

Raw modes never call a model; the API's answers to them are encoded once per (revision, mode, node, hops) and kept per
process (`guidance_body`), so a warm raw call costs localization and a dictionary lookup. Generative modes call the
configured ChatModel through the llm ledger (one recorded call, role "guidance", subject the workspace): the one model
call Waymark makes inside a request (DESIGN.md §5).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from graphs.core import ExactActionLocalizer, Graph, GuidanceConfig, Guide, Step, as_step

from . import cache, selectors

GUIDANCE_ROLE = "guidance"
_LOCALIZER = ExactActionLocalizer()  # the Guide's default: CachedGuide localizes with it too
_answer_bodies = cache.LRU(1024)  # (revision digest, mode, node, hops) -> encoded answer, for modes without a model


class NoActiveGraph(LookupError):
    """The workspace has no active revision and the request pinned none."""


@dataclass(frozen=True)
class GuidanceAnswer:
    text: str
    node_id: str | None
    used_full_graph: bool
    subgraph_digest: str | None
    mode: str
    revision: dict[str, Any]
    context: str


class CachedGuide(Guide):
    """The core Guide whose serialized contexts come from the content-addressed cache (keyed by graph digest).

    Overrides the core's `_context` hook only; localization, modes, degradation and the prompt stay the core's.
    """

    def __init__(self, graph: Graph, digest: str, **options: Any) -> None:
        super().__init__(graph, **options)
        self.digest = digest

    def _context(self, node_id: str | None) -> tuple[str, str | None, bool]:
        full = self.config.mode.endswith("_full") or node_id is None
        context, subgraph = cache.serialized_context(
            self.graph, self.digest, None if full else node_id, self.config.hops, self.config.include_relations
        )
        return context, subgraph, full


def guidance_model(workspace_id: int):
    """The workspace's ChatModel, recorded in the ledger (the configured model: Anthropic, else the scripted demo)."""
    from llm.factory import get_recorded_chat_model

    return get_recorded_chat_model(GUIDANCE_ROLE, subject=("graphs.workspace", workspace_id))


def workspace_guidance(
    *,
    slug: str,
    query: str,
    steps: Sequence[Step],
    mode: str = "generative_subgraph",
    hops: int = 2,
    window: int = 3,
    revision: str | None = None,
    include_relations: bool = True,
    model: Any = None,
    run_key: str | None = None,
    pin: str | None = None,
) -> GuidanceAnswer:
    """Guidance for an agent at the end of `steps`, over the active graph or the pinned `revision` (seq or digest);
    while a canary runs and no revision is pinned, over the arm `run_key` and `pin` (the X-Waymark-Run and
    X-Waymark-Revision headers) are served (selectors.served_arm).

    Http404 for an unknown workspace or revision, NoActiveGraph when nothing is active and nothing pinned,
    selectors.InvalidRef for a malformed or ambiguous ref, ValueError for a bad mode/hops/window.
    """
    card, summary = _card_and_revision(slug, revision, run_key, pin)
    config = GuidanceConfig(
        hops=hops,
        window=window,
        mode=mode,
        include_relations=include_relations,
        task_description=card["task_description"] or GuidanceConfig.task_description,
    )
    graph = selectors.graph_at(summary["id"], summary["digest"])
    if mode.startswith("generative") and model is None:
        model = guidance_model(card["id"])
    guide = CachedGuide(graph, summary["digest"], model=model, config=config)
    result = guide.guidance(query, list(steps))
    return GuidanceAnswer(
        text=result.text,
        node_id=result.node_id,
        used_full_graph=result.used_full_graph,
        subgraph_digest=result.subgraph_digest,
        mode=result.mode,
        revision={"seq": summary["seq"], "digest": summary["digest"]},
        context=result.context,
    )


def _card_and_revision(
    slug: str, revision: str | None, run_key: str | None = None, pin: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workspace card and the summary of the pinned revision, else of the active one, or of the canary's arm
    this run is served (see workspace_guidance)."""
    card = selectors.workspace_card(slug)
    if revision is not None and str(revision).strip():
        return card, selectors.revision_summary(card["id"], slug, str(revision))
    if card["active"] is not None:
        if card.get("canary") is None:
            return card, card["active"]
        return card, selectors.served_arm(card, run_key=run_key, pin=pin).summary
    raise NoActiveGraph(f"workspace {slug!r} has no active graph; pin a revision or activate one")


def guidance_body(
    *,
    slug: str,
    query: str,
    steps: Sequence[Step],
    mode: str = "generative_subgraph",
    hops: int = 2,
    window: int = 3,
    revision: str | None = None,
    run_key: str | None = None,
    pin: str | None = None,
) -> tuple[bytes, int]:
    """workspace_guidance's answer as the API's JSON (GuidanceOut), with the same errors, and the seq of the graph
    used (the answer's X-Waymark-Revision header).

    An answer that calls no model (raw modes, "none") depends only on the revision, the mode, the node the agent is at
    and the hops (its text is the serialized neighbourhood), so it is encoded once and kept per process: a warm call
    resolves the revision, localizes the last step as the Guide does (the core's ExactActionLocalizer) and answers
    the kept bytes without running the Guide."""
    key = None
    if not mode.startswith("generative"):
        _, summary = _card_and_revision(slug, revision, run_key, pin)
        graph = selectors.graph_at(summary["id"], summary["digest"])
        node_id = _LOCALIZER.locate(graph, [as_step(steps[-1])] if steps else [])
        key = (summary["digest"], mode, node_id, hops)
        found = _answer_bodies.get(key)
        if found is not None:
            return found, summary["seq"]
    answer = workspace_guidance(
        slug=slug,
        query=query,
        steps=steps,
        mode=mode,
        hops=hops,
        window=window,
        revision=revision,
        run_key=run_key,
        pin=pin,
    )
    body = {
        "text": answer.text,
        "node_id": answer.node_id,
        "used_full_graph": answer.used_full_graph,
        "subgraph_digest": answer.subgraph_digest,
        "mode": answer.mode,
        "revision": answer.revision["digest"],
    }
    encoded = json.dumps(body).encode()
    if key is not None and key == (answer.revision["digest"], answer.mode, answer.node_id, hops):
        _answer_bodies.put(key, encoded)  # (unless the active revision moved between the two reads)
    return encoded, answer.revision["seq"]
