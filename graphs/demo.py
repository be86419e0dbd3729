"""Demo data of graphs: the two-hop question-answering workspace of spec §10 (idempotent)."""

from __future__ import annotations

from dataclasses import dataclass

from accounts.services import Actor
from common.demo_seeding import SeedContext, demo_seeder
from graphs.core import Graph

from . import revisions, services
from .models import Revision, Workspace

DEMO_SLUG = "two-hop-qa"
DEMO_TITLE = "Two-hop question answering"
DEMO_TASK = "two-hop question answering over a small corpus"
DEMO_TOOLS = ("search", "read", "answer")
# The demo's certification policy (issue 26): its validation set is spec §10's four questions, on which no interval
# says anything (four paired ties give [-1, 1] at the split's level), so the demo workspace asks what four tasks can
# show: no net regression, no critical breakage, n >= 4; the bound is switched off (margin 1). Production workspaces
# keep the default policy (non-inferiority by 2 points, n >= 10).
DEMO_POLICY = {"mode": "non_inferiority", "margin": 1.0, "min_n": 4}
CERTIFIED_KIND = "graph_revision"
LAB_SLUG = "two-hop-lab"
LAB_TITLE = "Two-hop lab (evolve from the skeleton)"


def _edge(source: str, target: str, guidance: str, *, relation: str = "LEADS_TO", condition=None, pitfalls=None):
    return {
        "source": source,
        "target": target,
        "relation": relation,
        "condition": condition,
        "guidance": guidance,
        "pitfalls": pitfalls,
    }


TWO_HOP_GRAPH = {
    "nodes": [
        {"id": "Start", "type": "STATUS", "description": "Task start"},
        {"id": "End", "type": "STATUS", "description": "Task end"},
        {"id": "search", "type": "ACTION", "description": "Search the corpus for documents about a name or entity"},
        {"id": "read", "type": "ACTION", "description": "Read one document: its fact and its bridge entity"},
        {"id": "answer", "type": "ACTION", "description": "Give the final answer"},
    ],
    "edges": [
        _edge("Start", "search", "Search the corpus with the question's subject.", condition="a new question"),
        _edge(
            "search",
            "read",
            "Read the top hit before answering.",
            condition="search returned at least one document",
            pitfalls="Answering from the search titles alone misses two-hop questions.",
        ),
        _edge(
            "read",
            "search",
            "Search the bridge entity the document names to reach the second hop.",
            relation="PROVIDES_INPUT_FOR",
            condition="the document names a bridge entity and the question asks about it (country, city, company)",
            pitfalls="Do not search the original subject again.",
        ),
        _edge(
            "read",
            "answer",
            "Answer with the fact of the document you read last.",
            condition="the document you read answers the question",
        ),
        _edge("answer", "End", "Stop after answering.", condition="an answer was given"),
    ],
}


@dataclass(frozen=True)
class DemoGraphs:
    workspace: Workspace
    created: bool


def two_hop_graph() -> Graph:
    graph, _ = Graph.from_human(TWO_HOP_GRAPH)
    return graph


def seed_demo_graphs(*, actor: Actor) -> DemoGraphs:
    """Workspace two-hop-qa: the skeleton as revision 0 and the five-node graph as revision 1, active.

    Safe to run again: an existing workspace is completed where a step is missing and otherwise left alone.
    """
    workspace = Workspace.objects.filter(slug=DEMO_SLUG).first()
    created = workspace is None
    if workspace is None:
        seeded = services.workspace_create(
            actor=actor, slug=DEMO_SLUG, title=DEMO_TITLE, task_description=DEMO_TASK, activate=False
        )
        workspace = seeded.workspace
    chain = revisions.list_revisions(workspace, Revision.Kind.GRAPH, limit=2)
    if len(chain) == 1:
        services.graph_append_accepted(
            actor=actor,
            workspace=workspace,
            graph=two_hop_graph(),
            expected_head=chain[0].digest,
            meta={"iteration": 1, "validation_score": 1.0, "available_tools": list(DEMO_TOOLS)},
        )
    workspace.refresh_from_db()
    if workspace.active_revision_id is None:
        latest = revisions.head(workspace, Revision.Kind.GRAPH)
        services.workspace_seed_active_revision(actor=actor, workspace=workspace, revision=latest)
        workspace.refresh_from_db()
    return DemoGraphs(workspace, created)


def seed_lab_workspace(*, actor: Actor) -> DemoGraphs:
    """Workspace two-hop-lab: the skeleton only, active, for an operator to evolve with the two-hop evaluator (with
    no API key, spec §10's scripted refiner answers: accepted, structural_failure, rejected, duplicate_candidate)."""
    workspace = Workspace.objects.filter(slug=LAB_SLUG).first()
    if workspace is not None:
        return DemoGraphs(workspace, False)
    seeded = services.workspace_create(actor=actor, slug=LAB_SLUG, title=LAB_TITLE, task_description=DEMO_TASK)
    return DemoGraphs(seeded.workspace, True)


def ensure_demo_policy(*, actor: Actor) -> None:
    """The demo workspace's certification policy (DEMO_POLICY), set once: seeding again writes nothing."""
    from uplift.selectors import policy_for
    from uplift.services import policy_set

    current = policy_for(CERTIFIED_KIND, DEMO_SLUG).to_document()
    if any(current.get(key) != value for key, value in DEMO_POLICY.items()):
        policy_set(actor=actor, kind=CERTIFIED_KIND, parent_key=DEMO_SLUG, **DEMO_POLICY)


@demo_seeder("graphs", after=("users",))
def seed_demo_graphs_step(ctx: SeedContext) -> str:
    """The seed_demo step (common.demo_seeding): one summary line."""
    result = seed_demo_graphs(actor=ctx.actor)
    ensure_demo_policy(actor=ctx.actor)
    lab = seed_lab_workspace(actor=ctx.actor)
    state = "created" if result.created else "already there"
    active = result.workspace.active_revision
    return (
        f"graphs: workspace {DEMO_SLUG} {state}, active revision #{active.seq} {active.short_digest}; "
        f"workspace {LAB_SLUG} {'created' if lab.created else 'already there'} (skeleton, ready to evolve)"
    )
