"""In Debian's Chromium at the default window size (1280×720), issue 24: every graph drawing on the graph pages is
whole: fitted into its box (every node and edge label inside the box that clips it, the drawing no wider than its
panel and no taller than the window allows), not shrunk to nothing, with its caption below it. Checked on the
workspace page (the active graph and a newer head), the evolution round page (a base and its candidate side by
side), and for a graph of DRAW_LIMIT (150) nodes on both pages, the largest the pages draw. The review page is
checked in tests/reviews/test_browser_review_pages.py."""

from __future__ import annotations

import contextlib
from itertools import pairwise

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from accounts.services import Actor
from graphs import services as graph_services
from graphs.core import Graph
from graphs.demo import TWO_HOP_GRAPH
from graphs.selectors import graph_of
from graphs.views import DRAW_LIMIT
from tests.e2e import conftest as e2e
from tests.graphs.evolution_helpers import TASK, start

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings(e2e.PLUGIN_DEPRECATION)]

browser_type_launch_args = e2e.browser_type_launch_args
page_as = e2e.page_as

# Per drawing on the page: its box (the pre Mermaid draws into), the box that clips it, its panel (the figure's
# parent), its caption, the SVG, every node and every edge label.
GEOMETRY = """() => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return {left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height}; };
  return Array.from(document.querySelectorAll("figure[data-graph-view]")).filter((f) => f.querySelector("svg"))
    .map((figure) => ({
      drawing: box(figure.querySelector("pre.mermaid")),
      clip: box(figure.querySelector("[data-graph-canvas]")),
      panel: box(figure.parentElement),
      caption: box(figure.querySelector("figcaption")),
      svg: box(figure.querySelector("pre.mermaid svg")),
      nodes: Array.from(figure.querySelectorAll("svg .node")).map((n) => ({text: n.textContent.trim(), ...box(n)})),
      labels: Array.from(figure.querySelectorAll("svg g.edgeLabel"))
        .map((n) => ({text: n.textContent.trim(), ...box(n)})).filter((label) => label.text && label.width > 0),
      ready: figure.dataset.graphReady === "1",
    }));
}"""
WINDOW = (
    "() => ({width: window.innerWidth, height: window.innerHeight, scrollWidth: document.documentElement.scrollWidth})"
)
# Every drawn figure set up (graph_view.js) and every node inside its drawing's box.
FITTED = """(count) => {
  const figures = Array.from(document.querySelectorAll("figure[data-graph-view]"))
    .filter((f) => f.querySelector("svg"));
  return figures.length === count && figures.every((figure) => {
    const pre = figure.querySelector("pre.mermaid").getBoundingClientRect();
    return figure.dataset.graphReady === "1" && Array.from(figure.querySelectorAll("svg .node")).every((n) => {
      const r = n.getBoundingClientRect();
      return r.top >= pre.top - 1 && r.bottom <= pre.bottom + 1 && r.left >= pre.left - 1 && r.right <= pre.right + 1;
    });
  });
}"""


def inside(inner: dict, outer: dict, slack: float = 1.0) -> bool:
    return (
        inner["left"] >= outer["left"] - slack
        and inner["top"] >= outer["top"] - slack
        and inner["right"] <= outer["right"] + slack
        and inner["bottom"] <= outer["bottom"] + slack
    )


def large_graph(actions: int = DRAW_LIMIT - 2) -> dict:
    """Start, End and `actions` ACTION nodes (DRAW_LIMIT in all): twelve branches from Start to End, each a chain of
    actions, with a guidance label on every edge."""
    branches = [[] for _ in range(12)]
    for number in range(actions):
        branches[number % 12].append(f"step_{number:03d}")
    nodes = [{"id": "Start", "type": "STATUS", "description": "Task start"}]
    nodes += [{"id": "End", "type": "STATUS", "description": "Task end"}]
    edges = []
    for chain in branches:
        nodes += [{"id": node, "type": "ACTION", "description": f"Do {node}"} for node in chain]
        path = ["Start", *chain, "End"]
        edges += [
            {"source": a, "target": b, "relation": "LEADS_TO", "guidance": f"then {b}"} for a, b in pairwise(path)
        ]
    return {"nodes": nodes, "edges": edges}


def drawn(page_as, user, path: str, figures: int):
    """The page at `path` once its `figures` drawings are drawn and fitted (a bounded wait: the assertions say what
    is wrong when they never are), its geometry, its window and the script errors it raised."""
    errors = []
    page = page_as(user, path)
    page.on("pageerror", lambda error: errors.append(error))
    expect(page.locator("figure[data-graph-view] pre.mermaid svg")).to_have_count(figures, timeout=20_000)
    with contextlib.suppress(PlaywrightError):
        page.wait_for_function(FITTED, arg=figures, timeout=10_000)
    return page, page.evaluate(GEOMETRY), page.evaluate(WINDOW), errors


def assert_whole(figure: dict, window: dict, *, nodes: int) -> None:
    drawing, clip = figure["drawing"], figure["clip"]
    assert figure["ready"], "graph_view.js did not set the drawing up"
    assert len(figure["nodes"]) == nodes
    outside = [node["text"] for node in figure["nodes"] if not (inside(node, drawing) and inside(node, clip))]
    assert not outside, f"nodes outside the drawing's box {drawing} or its clip {clip}: {outside[:10]}"
    cut = [label["text"] for label in figure["labels"] if not inside(label, clip)]
    assert not cut, f"edge labels cut: {cut[:10]}"
    assert inside(figure["svg"], clip), (figure["svg"], clip)  # edges and arrows too: the whole SVG in view
    assert inside(clip, figure["panel"]), (clip, figure["panel"])  # no wider than its panel
    assert clip["right"] <= window["width"] and window["scrollWidth"] <= window["width"]  # no sideways scroll
    assert drawing["height"] <= window["height"] * 0.75  # on the screen whole, with room for the caption
    assert max(drawing["width"], drawing["height"]) >= 200  # and not shrunk to nothing
    assert figure["caption"]["top"] >= clip["bottom"] - 1, (figure["caption"], clip)


def test_the_workspace_page_draws_the_active_graph_and_the_head_whole(page_as, viewer):
    seeded = graph_services.workspace_create(
        actor=Actor.system(), slug="fit", task_description=TASK, graph=TWO_HOP_GRAPH
    )
    head = {
        "nodes": [*TWO_HOP_GRAPH["nodes"], {"id": "verify", "type": "ACTION", "description": "Check the answer"}],
        "edges": [
            *TWO_HOP_GRAPH["edges"],
            {"source": "read", "target": "verify", "relation": "LEADS_TO", "guidance": "Check before answering."},
            {"source": "verify", "target": "answer", "relation": "LEADS_TO", "guidance": "Answer once checked."},
        ],
    }
    graph_services.graph_append_accepted(
        actor=Actor.system(),
        workspace=seeded.workspace,
        graph=Graph.from_human(head)[0],
        expected_head=seeded.revision.digest,
    )
    _, (active, newer), window, errors = drawn(page_as, viewer, "/graphs/fit/", 2)
    assert_whole(active, window, nodes=5)
    assert_whole(newer, window, nodes=6)
    # One above the other (the page's one column), neither over the other.
    assert newer["clip"]["top"] >= active["caption"]["bottom"]
    assert not errors


def test_the_round_page_draws_the_base_and_the_candidate_whole_side_by_side(page_as, operator):
    lab = graph_services.workspace_create(actor=Actor.system(), slug="lab", task_description=TASK).workspace
    run = start(lab, operator, rounds=1)  # the live server commits: the round runs inside the start
    run.refresh_from_db()
    assert run.is_finished and run.rounds.get().outcome == "accepted"
    _, figures, window, errors = drawn(page_as, operator, f"/graphs/lab/evolutions/{run.pk}/rounds/1/", 2)
    base, candidate = figures
    assert_whole(base, window, nodes=2)  # the skeleton: Start, End
    assert_whole(candidate, window, nodes=5)
    assert base["clip"]["right"] <= candidate["clip"]["left"]  # side by side, neither over the other
    assert not errors


def test_a_graph_of_the_drawing_limit_is_drawn_whole_on_the_workspace_page(page_as, viewer):
    graph_services.workspace_create(actor=Actor.system(), slug="big", task_description=TASK, graph=large_graph())
    _, (figure,), window, errors = drawn(page_as, viewer, "/graphs/big/", 1)
    assert_whole(figure, window, nodes=DRAW_LIMIT)
    assert not errors


def test_graphs_up_to_the_drawing_limit_are_drawn_whole_side_by_side_on_the_round_page(page_as, operator):
    big = graph_services.workspace_create(
        actor=Actor.system(), slug="big", task_description=TASK, graph=large_graph(DRAW_LIMIT - 5)
    ).workspace
    run = start(big, operator, rounds=1)  # round 1 of the two-hop script adds search, read and answer
    run.refresh_from_db()
    candidate_nodes = len(graph_of(run.rounds.get().graph_revision).nodes)
    assert candidate_nodes == DRAW_LIMIT

    _, (base, candidate), window, errors = drawn(page_as, operator, f"/graphs/big/evolutions/{run.pk}/rounds/1/", 2)

    assert_whole(base, window, nodes=DRAW_LIMIT - 3)
    assert_whole(candidate, window, nodes=DRAW_LIMIT)
    assert base["clip"]["right"] <= candidate["clip"]["left"]
    assert not errors
