"""In Debian's Chromium at the default window size (1280×720), issue 24: a graph request's review page draws the whole
graph with its changes marked and the caption below it, zooms and pans; every approval asks to confirm, by a click
as by a key, from the queue or the item, with the evidence summed up, and keeps what was typed on Esc; an admin's
override asks in the same dialog, never a bare browser confirm; a verdict leads to the next item waiting."""

from __future__ import annotations

import contextlib
import re
from dataclasses import replace

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from accounts.roles import Role
from accounts.services import Actor
from graphs import services as graph_services
from graphs.core import Edge
from graphs.selectors import graph_of
from reviews import services
from reviews.models import Judgment
from tests.e2e import conftest as e2e
from tests.factories import user_with
from tests.helpers.reviews import propose, workspace_with_two_revisions

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings(e2e.PLUGIN_DEPRECATION)]

browser_type_launch_args = e2e.browser_type_launch_args
page_as = e2e.page_as

# Where each part of the drawing is, in CSS pixels of the window: the drawing's box (the pre Mermaid draws into),
# the box that clips it, the caption, every node and every edge label with its text.
BOX = (
    "(el) => { const r = el.getBoundingClientRect(); return {left: r.left, top: r.top, right: r.right, "
    "bottom: r.bottom, width: r.width, height: r.height}; }"
)
GEOMETRY = f"""() => {{
  const box = {BOX};
  const figure = document.querySelector(".review-graph");
  const canvas = figure.querySelector("[data-graph-canvas]") || figure;
  const texts = (selector) => Array.from(figure.querySelectorAll(selector))
    .map((n) => ({{text: n.textContent.trim(), classes: n.getAttribute("class"), ...box(n)}}));
  return {{
    drawing: box(figure.querySelector("pre.mermaid")),
    clip: box(canvas),
    caption: box(figure.querySelector("figcaption")),
    nodes: texts("svg .node"),
    labels: texts("svg g.edgeLabel").filter((label) => label.text),
    windowHeight: window.innerHeight,
  }};
}}"""
NODE_BOX = f"""(text) => {{
  const nodes = Array.from(document.querySelectorAll(".review-graph svg .node"));
  return ({BOX})(nodes.find((n) => n.textContent.trim() === text));
}}"""
# Every node inside the drawing's box (the pre Mermaid draws into).
FITTED = """() => {
  const pre = document.querySelector(".review-graph pre.mermaid").getBoundingClientRect();
  return Array.from(document.querySelectorAll(".review-graph svg .node")).every((n) => {
    const r = n.getBoundingClientRect();
    return r.top >= pre.top - 1 && r.bottom <= pre.bottom + 1;
  });
}"""


def inside(inner: dict, outer: dict, slack: float = 1.0) -> bool:
    return (
        inner["left"] >= outer["left"] - slack
        and inner["top"] >= outer["top"] - slack
        and inner["right"] <= outer["right"] + slack
        and inner["bottom"] <= outer["bottom"] + slack
    )


def candidate_with_every_change():
    """ws: #1 (the two-hop graph) active; #3 its candidate: a node and two edges added (verify, from #2), the answer
    node's description and the read → answer edge's pitfalls changed."""
    workspace, first, second = workspace_with_two_revisions()
    graph = graph_of(second)
    nodes = dict(graph.nodes)
    nodes["answer"] = replace(nodes["answer"], description="Answer with the bridge entity's fact.")
    edges = tuple(
        Edge(e.source, e.relation, e.target, {**e.attributes, "pitfalls": "Check the bridge was followed."})
        if e.key == ("read", "LEADS_TO", "answer")
        else e
        for e in graph.edges
    )
    third = graph_services.graph_append_accepted(
        actor=Actor.system(),
        workspace=workspace,
        graph=replace(graph, nodes=nodes, edges=edges),
        expected_head=second.digest,
        meta={},
    )
    return first, third


def propose_graph(proposer, candidate):
    return services.promotion_propose(
        actor=Actor(user=proposer), kind="graph_revision", candidate_id=str(candidate.pk), rationale="better"
    )


def opened(page_as, user, path):
    errors = []
    page = page_as(user, path)
    page.on("pageerror", lambda error: errors.append(error))
    return page, errors


def wait_until_fitted(page):
    """Mermaid draws after load; the drawing is fitted right after. Wait (a bounded time) until every node is inside
    the drawing's box; the assertions below say what is wrong if that never happens."""
    expect(page.locator(".review-graph svg .node").first).to_be_visible(timeout=15_000)
    with contextlib.suppress(PlaywrightError):
        page.wait_for_function(FITTED, timeout=5_000)


def test_the_review_page_draws_the_whole_graph_its_changes_marked_and_the_caption_below(page_as, proposer, reviewer):
    _, third = candidate_with_every_change()
    request = propose_graph(proposer, third)
    page, errors = opened(page_as, reviewer, f"/reviews/{request.pk}/")
    wait_until_fitted(page)
    page.locator(".review-graph").scroll_into_view_if_needed()
    geometry = page.evaluate(GEOMETRY)
    drawing, caption = geometry["drawing"], geometry["caption"]

    assert len(geometry["nodes"]) == 6  # Start, search, read, answer, verify, End
    outside = [node["text"] for node in geometry["nodes"] if not inside(node, drawing)]
    assert not outside, f"nodes outside the drawing's box {drawing}: {outside}"
    assert all(inside(node, geometry["clip"]) for node in geometry["nodes"])
    assert drawing["height"] <= geometry["windowHeight"] * 0.75  # on the screen whole, with room for the caption
    assert drawing["width"] >= 200 and drawing["height"] >= 200  # and not shrunk to nothing
    assert caption["top"] >= drawing["bottom"] and caption["top"] >= geometry["clip"]["bottom"], (caption, drawing)

    marked = {node["text"]: node["classes"] for node in geometry["nodes"] if "(" in node["text"]}
    assert set(marked) == {"verify (new)", "answer (changed)"}
    assert "added" in marked["verify (new)"].split() and "changed" in marked["answer (changed)"].split()
    marks = ("new", "changed")
    changed_labels = sorted(label["text"] for label in geometry["labels"] if label["text"].startswith(marks))
    assert changed_labels == ["changed LEADS_TO", "new LEADS_TO", "new LEADS_TO"]
    assert all(inside(label, drawing) for label in geometry["labels"])
    expect(page.locator(".review-graph figcaption")).to_contain_text("drawn thick")
    assert not errors


def test_the_drawing_zooms_and_pans_with_buttons_drag_wheel_and_keys_and_fits_again(page_as, proposer, reviewer):
    _, third = candidate_with_every_change()
    request = propose_graph(proposer, third)
    page, errors = opened(page_as, reviewer, f"/reviews/{request.pk}/")
    wait_until_fitted(page)
    canvas = page.locator(".review-graph [data-graph-canvas]")
    canvas.scroll_into_view_if_needed()
    fitted = page.evaluate(NODE_BOX, "read")

    page.get_by_role("button", name="Zoom in").click()
    page.wait_for_function(f"() => ({NODE_BOX})('read').width > {fitted['width'] * 1.3}", timeout=3_000)
    zoomed = page.evaluate(NODE_BOX, "read")

    box = canvas.bounding_box()
    start = (box["x"] + 40, box["y"] + 40)  # a drag from anywhere in the box pans
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(start[0] + 60, start[1] + 30, steps=6)
    page.mouse.move(start[0] + 120, start[1] + 60, steps=6)
    page.mouse.up()
    dragged = page.evaluate(NODE_BOX, "read")
    assert abs(dragged["left"] - zoomed["left"] - 120) <= 3 and abs(dragged["top"] - zoomed["top"] - 60) <= 3

    canvas.focus()
    page.keyboard.press("ArrowLeft")  # the drawing moves right, as the view looks further left
    page.wait_for_timeout(100)
    keyed = page.evaluate(NODE_BOX, "read")
    assert abs(keyed["left"] - dragged["left"] - 48) <= 3
    page.keyboard.press("-")
    page.wait_for_function(f"() => ({NODE_BOX})('read').width < {keyed['width'] * 0.9}", timeout=3_000)

    page.keyboard.press("0")  # fit: the whole graph again, where it was
    page.wait_for_timeout(100)
    again = page.evaluate(NODE_BOX, "read")
    assert all(abs(again[k] - fitted[k]) <= 1 for k in ("left", "top", "width")), (again, fitted)

    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -300)  # Ctrl + wheel zooms; the page itself is not zoomed
    page.keyboard.up("Control")
    page.wait_for_function(f"() => ({NODE_BOX})('read').width > {fitted['width'] * 1.1}", timeout=3_000)
    geometry = page.evaluate(GEOMETRY)
    assert geometry["caption"]["top"] >= geometry["clip"]["bottom"]  # zoomed in, the box clips: the caption stays clear
    assert page.evaluate("() => window.devicePixelRatio") == 1
    assert not errors


def test_a_click_on_approve_in_the_queue_opens_the_evidence_and_asks_to_confirm_keeping_the_comment(
    page_as, proposer, reviewer
):
    _, third = candidate_with_every_change()
    request = propose_graph(proposer, third)
    page, errors = opened(page_as, reviewer, "/reviews/")
    page.locator("[data-approve]").first.click()
    expect(page).to_have_url(re.compile(rf"/reviews/{request.pk}/$"))  # the item, its evidence on the page
    dialog = page.locator("#review-confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(f"Approve “{request.title}”?", use_inner_text=True)
    expect(dialog).to_contain_text("no measured evaluation (accepted graph)")  # the gate's summary
    expect(dialog).to_contain_text("nodes 1 added, 0 removed, 1 changed; edges 2 added, 0 removed, 1 changed")
    page.wait_for_timeout(300)
    assert not request.judgments.exists()  # a click on Approve judges nothing by itself

    dialog.get_by_label("Comment").fill("Looked at the whole drawing.")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.wait_for_timeout(300)
    assert not request.judgments.exists()
    expect(page.locator("#approve textarea")).to_have_value("Looked at the whole drawing.")  # kept on Esc

    page.locator("#approve").get_by_role("button", name="Approve").click()  # the page's own button asks too
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Comment")).to_have_value("Looked at the whole drawing.")
    dialog.get_by_role("button", name="Confirm").click()
    expect(page.locator(".msg-success")).to_contain_text("Approved")
    judgment = request.judgments.get()
    assert (judgment.reviewer, judgment.verdict) == (reviewer, "approve")
    assert judgment.comment == "Looked at the whole drawing."
    assert not errors


def test_the_admin_overrides_through_the_dialog_never_a_bare_browser_confirm(page_as, fake_kind, proposer):
    request = propose(fake_kind, proposer, passing=None)
    ada = user_with(Role.ADMIN, username="ada")
    page, errors = opened(page_as, ada, f"/reviews/{request.pk}/")
    browser_dialogs = []
    page.on("dialog", lambda d: (browser_dialogs.append(d.message), d.dismiss()))
    expect(page.locator("[data-four-eyes]")).to_be_visible()
    page.get_by_label("Written reason (required)").fill("Checked by hand.")
    page.get_by_role("button", name="Override the gate").click()
    dialog = page.locator("#review-confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Override the gate of “fake v1”?", use_inner_text=True)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    request.refresh_from_db()
    assert not request.is_overridden
    page.get_by_role("button", name="Override the gate").click()
    expect(dialog.get_by_label("Written reason for the override")).to_have_value("Checked by hand.")
    dialog.get_by_role("button", name="Confirm").click()
    expect(page.locator(".msg-success")).to_contain_text("Gate overridden")
    request.refresh_from_db()
    assert request.is_overridden and request.override_reason == "Checked by hand."
    assert browser_dialogs == [] and not errors


def test_after_a_verdict_the_next_item_waiting_opens(page_as, fake_kind, proposer, reviewer):
    first = propose(fake_kind, proposer, "v1", parent="p1")
    second = propose(fake_kind, proposer, "v2", parent="p2")
    page, errors = opened(page_as, reviewer, f"/reviews/{first.pk}/")
    page.wait_for_load_state("load")
    page.keyboard.press("a")
    page.locator("#review-confirm").get_by_role("button", name="Confirm").click()
    expect(page).to_have_url(re.compile(rf"/reviews/{second.pk}/$"))
    expect(page.locator(".msg-success")).to_contain_text("Approved fake v1. Next: fake v2, waiting for your judgment.")
    page.locator("#reject textarea").fill("Not this one.")
    page.locator("#reject").get_by_role("button", name="Reject").click()
    page.locator("#review-confirm").get_by_role("button", name="Confirm").click()
    expect(page).to_have_url(re.compile(rf"/reviews/{second.pk}/$"))  # none left: the judged item, its outcome
    expect(page.locator(".msg-success")).to_contain_text("Nothing else is waiting for your judgment.")
    assert Judgment.objects.filter(reviewer=reviewer).count() == 2
    assert not errors


@pytest.fixture
def page_without_javascript(live_server, browser, browser_context_args):
    """page_without_javascript(user, path) -> a page with JavaScript off, logged in as `user`."""
    contexts = []

    def open_as(user, path):
        client = Client()
        client.force_login(user)
        options = {**browser_context_args, "base_url": live_server.url, "java_script_enabled": False}
        context = browser.new_context(**options)
        contexts.append(context)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}])
        page = context.new_page()
        page.goto(path)
        return page

    yield open_as
    for context in contexts:
        context.close()


def test_without_javascript_the_queues_approve_opens_the_item_whose_plain_form_approves(
    page_without_javascript, fake_kind, proposer, reviewer
):
    request = propose(fake_kind, proposer)
    page = page_without_javascript(reviewer, "/reviews/")
    page.locator("[data-approve]").first.click()
    expect(page).to_have_url(re.compile(rf"/reviews/{request.pk}/#approve$"))
    assert not request.judgments.exists()
    expect(page.locator("#evidence")).to_contain_text("gate passes")  # the evidence, above the form
    page.locator("#approve textarea").fill("Read it all.")
    page.locator("#approve").get_by_role("button", name="Approve").click()
    expect(page.locator(".msg-success")).to_contain_text("Approved fake v1.")
    assert request.judgments.get().comment == "Read it all."
