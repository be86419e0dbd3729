"""The review tests' requests and workspaces: a form post with its CSRF token, a proposal of the fake kind, and graph
workspaces holding a candidate to review."""

from dataclasses import replace

from django.urls import reverse

from accounts.services import Actor
from graphs import services as graph_services
from graphs.core import END, START, Edge, Node
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_start
from graphs.selectors import graph_of
from reviews import services
from tests.promote import promote_graph_revision

SYSTEM = Actor.system()


def post(client, url, data=None):
    """A form post as a browser sends it: the CSRF cookie from a page first, then the token in the form."""
    client.get(reverse("reviews:queue"))
    cookie = client.cookies.get("csrftoken")
    return client.post(url, {**(data or {}), "csrfmiddlewaretoken": cookie.value if cookie else ""})


def propose(kind, proposer, candidate="v1", **kwargs):
    kind.add(candidate, **kwargs)
    return services.promotion_propose(
        actor=Actor(user=proposer), kind="fake", candidate_id=candidate, rationale="better"
    )


def workspace_with_two_revisions():
    """ws: skeleton #0, #1 accepted by a one-round evolution and made active through a review, and #2 (a node more)
    as the newest candidate. Revision pks differ from seqs (the other chains take ids too)."""
    workspace = graph_services.workspace_create(actor=SYSTEM, slug="ws", title="Ws").workspace
    run = run_inline(evolution_start(actor=SYSTEM, workspace=workspace, rounds=1, evaluator="two-hop", enqueue=False))
    first = run.rounds.get().graph_revision
    promote_graph_revision(first)
    graph = graph_of(first)
    nodes = [*graph.nodes.values(), Node("verify", "REASONING", "Check the answer")]
    edges = (*graph.edges, Edge(START, "LEADS_TO", "verify", {"guidance": "check"}), Edge("verify", "LEADS_TO", END))
    second = graph_services.graph_append_accepted(
        actor=SYSTEM,
        workspace=workspace,
        graph=replace(graph, nodes={n.id: n for n in nodes}, edges=edges),
        expected_head=first.digest,
        meta={},
    )
    workspace.refresh_from_db()
    assert workspace.active_revision_id == first.pk and (first.seq, second.seq) == (1, 2)
    return workspace, first, second


def graph_workspace():
    """ws: the seeded skeleton #0 active, and as the candidate the graph #1 a one-round evolution accepted (the
    two-hop evaluator measured it: 1.0 against the skeleton's 0.5)."""
    workspace = graph_services.workspace_create(actor=SYSTEM, slug="ws", title="Ws").workspace
    head = workspace.active_revision
    run = run_inline(evolution_start(actor=SYSTEM, workspace=workspace, rounds=1, evaluator="two-hop", enqueue=False))
    return workspace, head, run.rounds.get().graph_revision
