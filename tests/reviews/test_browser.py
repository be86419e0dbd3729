"""In Debian's Chromium: one reviewer proposes, two others approve from the queue with the keyboard, and the agent
API then answers with the new ETag; the proposer's own approve button does not exist."""

import re

import pytest
from playwright.sync_api import expect

from graphs.models import Workspace
from reviews.models import PromotionRequest, PromotionStatus
from tests.e2e import conftest as e2e
from tests.helpers.reviews import graph_workspace

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings(e2e.PLUGIN_DEPRECATION)]

# The browser fixtures of tests/e2e (Debian's Chromium, pages logged in as a user), reused here.
browser_type_launch_args = e2e.browser_type_launch_args
page_as = e2e.page_as


def approve_with_the_keyboard(page):
    """From the queue: select the item (j), open it (Enter), a, confirm in the dialog."""
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/reviews/\d+/$"))
    page.wait_for_load_state("load")  # the URL changes before the item's scripts have run
    page.keyboard.press("a")
    dialog = page.locator("#review-confirm")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Confirm").click()
    expect(page.locator(".msg-success")).to_contain_text("Approved")


def test_a_promotion_is_proposed_and_approved_from_the_queue_with_the_keyboard(
    page_as, proposer, reviewer, second_reviewer, make_token, api_client
):
    workspace, _, candidate = graph_workspace()
    token = make_token(reviewer, "graphs:read")
    etag_before = api_client.get("/api/v1/graphs/ws/active", token=token)["ETag"]
    errors = []

    page = page_as(proposer, f"/reviews/propose/?kind=graph_revision&candidate_id={candidate.pk}")
    page.on("pageerror", lambda error: errors.append(error))
    page.get_by_label("Rationale").fill("The evolution gate accepted it.")
    page.get_by_role("button", name="Propose").click()
    expect(page).to_have_url(re.compile(r"/reviews/\d+/$"))
    expect(page.get_by_text("You proposed this request, so you cannot judge it.")).to_be_visible()
    expect(page.locator("[data-approve]")).to_have_count(0)
    page.goto("/reviews/")
    expect(page.locator("[data-queue-row]")).to_have_count(1)
    expect(page.locator("[data-approve]")).to_have_count(0)

    for judge in (reviewer, second_reviewer):
        judge_page = page_as(judge, "/reviews/")
        judge_page.on("pageerror", lambda error: errors.append(error))
        approve_with_the_keyboard(judge_page)

    request = PromotionRequest.objects.get()
    assert request.status == PromotionStatus.APPLIED
    assert Workspace.objects.get(pk=workspace.pk).active_revision_id == candidate.pk
    after = api_client.get("/api/v1/graphs/ws/active", token=token, HTTP_IF_NONE_MATCH=etag_before)
    assert after.status_code == 200 and after["ETag"] != etag_before
    assert not errors


def test_the_help_dialog_opens_with_the_question_mark(page_as, reviewer):
    page = page_as(reviewer, "/reviews/")
    page.keyboard.press("?")
    expect(page.get_by_role("dialog")).to_be_visible()
    expect(page.get_by_role("dialog")).to_contain_text("next / previous item")


def test_judging_by_keyboard_needs_an_opened_item_and_a_confirmation(page_as, proposer, reviewer):
    """On the queue, a and r judge nothing; on the item, a opens the confirmation, Escape cancels it unsent, and
    Confirm submits the verdict with the comment typed in the dialog."""
    _, _, candidate = graph_workspace()
    request = propose_graph(proposer, candidate)
    errors = []
    page = page_as(reviewer, "/reviews/")
    page.on("pageerror", lambda error: errors.append(error))
    expect(page.locator("[data-queue-row]")).to_have_count(1)
    for key in ("a", "r", "j", "a", "r"):
        page.keyboard.press(key)
    expect(page.get_by_role("dialog")).to_have_count(0)
    page.wait_for_timeout(300)
    expect(page).to_have_url(re.compile(r"/reviews/$"))
    assert not request.judgments.exists()

    page.goto(f"/reviews/{request.pk}/")
    page.keyboard.press("a")
    dialog = page.locator("#review-confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Approve")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.wait_for_timeout(300)
    assert not request.judgments.exists()

    page.keyboard.press("r")  # reject asks for the reason: confirming without one is refused by the dialog
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Reject")
    dialog.get_by_role("button", name="Confirm").click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    page.keyboard.press("a")  # the shortcuts work again right after a cancelled confirmation
    dialog.get_by_label("Comment").fill("Checked the diff and the gate.")
    dialog.get_by_role("button", name="Confirm").click()
    expect(page.locator(".msg-success")).to_contain_text("Approved")
    judgment = request.judgments.get()
    assert judgment.verdict == "approve" and judgment.comment == "Checked the diff and the gate."
    assert not errors


def propose_graph(proposer, candidate):
    from accounts.services import Actor
    from reviews import services

    return services.promotion_propose(
        actor=Actor(user=proposer), kind="graph_revision", candidate_id=str(candidate.pk), rationale="better"
    )
