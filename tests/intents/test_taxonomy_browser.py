# ruff: noqa: F811 (pytest fixtures imported from tests.intents.taxonomy_fixtures are test arguments)
"""Browser: a reviewer judges intent candidates by keyboard, merges one into an existing intent, and sees the
taxonomy's new version once two others approve the draft (Debian's Chromium, tests/e2e/conftest.py fixtures)."""

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import PLUGIN_DEPRECATION, browser_type_launch_args, page_as  # noqa: F401 (fixtures)
from tests.intents.taxonomy_fixtures import (  # noqa: F401 (fixtures)
    act,
    activate_draft,
    judge,
    make_candidate,
    make_run,
    otto,
    rita,
    rob,
    ruth,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.filterwarnings(PLUGIN_DEPRECATION)]


def test_a_reviewer_judges_by_keyboard_merges_one_and_sees_the_new_version(page_as, rita, rob, ruth, otto):
    runs = [make_run(n, intent="support") for n in range(1, 6)]
    reset = make_candidate("Reset password", runs[:2])
    judge(reset, "valid", rob, ruth)
    v1, _ = activate_draft(otto, [rob, ruth])
    reset_id = v1.intents[0]["intent_id"]
    book = make_candidate("Book a flight", runs[2:3])
    recover = make_candidate("Recover account access", runs[3:4])
    judge(book, "valid", rob)
    judge(recover, "merge", rob, target=reset_id)

    page = page_as(rita, "/reviews/")
    card = page.locator("[data-intent-review-card]")
    expect(card).to_contain_text("2 intent candidates await judgment")
    card.get_by_role("link", name=re.compile("intent candidates")).click()
    expect(page.get_by_role("heading", name="Intent review queue")).to_be_visible()
    page.wait_for_load_state("load")  # the heading shows before the queue's scripts have run (their keys with them)
    expect(page.locator("[data-intent-row]")).to_have_count(2)
    expect(page.locator("[data-recent-judgments]")).to_have_count(0)  # rob's verdicts stay hidden

    page.keyboard.press("?")
    expect(page.locator("#intent-review-shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#intent-review-shortcuts")).to_be_hidden()

    page.keyboard.press("j")  # the oldest candidate: "Book a flight"
    expect(page.locator("[data-intent-row]").first).to_have_attribute("aria-selected", "true")
    page.keyboard.press("v")
    expect(page.locator(".messages")).to_contain_text("Book a flight”: valid")
    expect(page.locator("[data-intent-row]")).to_have_count(1)
    expect(page.locator("[data-recent-judgments]")).to_contain_text("rob: valid")  # visible after her own

    page.keyboard.press("j")
    page.keyboard.press("m")
    merge_list = page.locator("[data-intent-row] [data-merge-target]")
    expect(merge_list).to_be_focused()
    page.keyboard.type("Reset")
    expect(merge_list).to_have_value(reset_id)
    page.keyboard.press("Enter")
    expect(page.locator("[data-queue-empty]")).to_be_visible()
    expect(page.locator("[data-recent-judgments]")).to_contain_text(f"rob: merge → {reset_id}")

    # Two others approve the next version, drafted through the services.
    _, request = activate_draft(otto, [rob, ruth])
    assert request.status == "applied"

    page.goto("/intents/taxonomy/")
    expect(page.get_by_role("heading", name=re.compile(r"Version 2"))).to_contain_text("active")
    rows = page.locator("[data-taxonomy-intents] tbody tr")
    expect(rows).to_have_count(2)
    reset_row = page.locator(f'[data-intent-id="{reset_id}"]')
    expect(reset_row).to_contain_text("Reset password")
    expect(reset_row).to_contain_text("Recover account access")  # merged: an alias, same id
    expect(page.locator("[data-taxonomy-intents]")).to_contain_text("Book a flight")
    expect(page.locator("[data-taxonomy-versions]")).to_contain_text("1 added, 1 merged, 0 relabelled")
