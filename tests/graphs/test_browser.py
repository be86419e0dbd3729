"""In Chromium: a workspace page draws its graphs with the vendored Mermaid, and the guidance panel answers (htmx)."""

import os
import re

import pytest
from playwright.sync_api import expect

from graphs.models import Revision
from reviews.models import PromotionRequest
from tests.e2e.conftest import browser_type_launch_args, page_as  # noqa: F401  (shared browser fixtures)
from tests.graphs.factories import make_demo_workspace

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings(
        "ignore:Session-scoped fixtures defined as instance methods:pytest.PytestRemovedIn10Warning"
    ),
]
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"


def test_a_workspace_page_draws_the_graph_and_the_guidance_panel_answers(page_as, viewer):  # noqa: F811
    make_demo_workspace()
    errors = []
    page = page_as(viewer, "/graphs/two-hop-qa/")
    page.on("pageerror", lambda error: errors.append(error))
    drawing = page.locator("figure.graph-drawing pre.mermaid svg").first
    expect(drawing).to_be_visible(timeout=15_000)
    expect(drawing).to_contain_text("search")

    page.get_by_label("Steps taken (one action per line)").fill("search\nread")
    page.get_by_role("button", name="Show the context").click()
    context = page.locator("#guidance-context")
    expect(context).to_contain_text("Active Cognitive Node: [read] (Type: ACTION)")
    expect(page.locator("#guidance")).to_contain_text("localized at: read")
    assert page.url.endswith("/graphs/two-hop-qa/")  # swapped in place by htmx, no navigation
    assert not errors


def test_a_reviewer_proposes_a_revision_for_activation_from_the_workspace_page(page_as, reviewer):  # noqa: F811
    workspace = make_demo_workspace()
    seed = Revision.objects.get(workspace=workspace, seq=0)
    page = page_as(reviewer, "/graphs/two-hop-qa/")

    page.get_by_text("Propose for activation").click()
    page.get_by_label("Rationale for promoting revision #0").fill("the skeleton is a safer default for now")
    page.get_by_role("button", name="Propose revision #0").click()

    expect(page).to_have_url(re.compile(r"/reviews/\d+/$"))
    request = PromotionRequest.objects.get()
    assert (request.kind, request.candidate_id, request.proposer_id) == ("graph_revision", str(seed.pk), reviewer.pk)
    page.goto("/graphs/two-hop-qa/")
    expect(page.get_by_role("link", name=f"promotion request #{request.pk}")).to_be_visible()
    workspace.refresh_from_db()
    assert workspace.active_revision.seq == 1  # it waits for two other reviewers
