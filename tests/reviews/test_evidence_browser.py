"""In Debian's Chromium: a reviewer proposes a graph revision picked by its label from the list, and the item page
draws the candidate with its changes marked at a readable size (it was 258×20 px)."""

import re

import pytest
from playwright.sync_api import expect

from reviews.models import PromotionRequest
from tests.e2e import conftest as e2e
from tests.helpers.reviews import workspace_with_two_revisions

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings(e2e.PLUGIN_DEPRECATION)]

browser_type_launch_args = e2e.browser_type_launch_args
page_as = e2e.page_as


@pytest.mark.django_db(transaction=True)
def test_propose_from_the_list_and_see_the_candidate_drawn_readably(page_as, proposer, reviewer):
    _, first, second = workspace_with_two_revisions()
    errors = []
    page = page_as(proposer, "/reviews/propose/")
    page.on("pageerror", lambda error: errors.append(error))
    select = page.get_by_label("Candidate")
    option = select.locator("option", has_text=second.label)
    expect(option).to_have_count(1)
    select.select_option(value=f"graph_revision:{second.pk}")
    page.get_by_label("Rationale").fill("Adds a check step.")
    page.get_by_role("button", name="Propose").click()
    expect(page).to_have_url(re.compile(r"/reviews/\d+/$"))
    expect(page.locator(".msg-success")).to_contain_text(f"replacing {first.label}")
    request = PromotionRequest.objects.get(status="open")
    assert request.candidate_id == str(second.pk)

    page = page_as(reviewer, f"/reviews/{request.pk}/")
    page.on("pageerror", lambda error: errors.append(error))
    drawing = page.locator(".review-graph svg")
    expect(drawing).to_be_visible()
    box = drawing.bounding_box()
    assert box["width"] >= 200 and box["height"] >= 200, box
    # the added node is drawn with its class and its mark
    expect(page.locator(".review-graph .node.added")).to_have_count(1)
    expect(page.locator(".review-graph")).to_contain_text("verify (new)")
    assert not errors
