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
from trajectories.models import Step

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.filterwarnings(PLUGIN_DEPRECATION)]


def htmx_settled(page):
    """Wait until htmx has swapped and settled what it last received (its classes are gone): new content's hx-
    attributes are processed by then."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')"
    )


def test_a_reviewer_judges_by_keyboard_merges_one_and_sees_the_new_version(page_as, rita, rob, ruth, otto):
    """Inline review (issue 24): each candidate shows with its run's task and evidence steps; a judgment brings the
    next candidate in place (auto-advance) with the focus on it, so the keys go on working."""
    runs = [make_run(n, intent="support") for n in range(1, 6)]
    for run in runs:
        run.task = f"Help customer {run.external_id}"
        run.save(update_fields=["task"])
        for ordinal, tool in enumerate(("greet", "lookup", "act")):
            Step.objects.create(run=run, ordinal=ordinal, tool=tool, action_family="act", ok=True)
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
    expect(page.locator("#intent-review")).not_to_contain_text("rob")  # not even how many judged

    focus = page.locator("#intent-focus")
    expect(focus.locator("[data-label]")).to_have_text("Book a flight")  # the oldest, inline
    expect(focus.locator("[data-task]")).to_have_text("Help customer 3")
    evidence = focus.locator("[data-evidence-step]")
    expect(evidence).to_have_count(2)  # steps 0 and 1 of the run
    assert evidence.first.evaluate("row => getComputedStyle(row).backgroundColor") != "rgba(0, 0, 0, 0)"

    page.keyboard.press("?")
    expect(page.locator("#intent-review-shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#intent-review-shortcuts")).to_be_hidden()

    page.keyboard.press("s")  # skip to the next, then back
    expect(focus.locator("[data-label]")).to_have_text("Recover account access")
    page.keyboard.press("k")
    expect(focus.locator("[data-label]")).to_have_text("Book a flight")
    expect(focus).to_be_focused()
    htmx_settled(page)  # else a key may press the new form's button before htmx took it over (a plain POST)

    page.keyboard.press("v")  # valid, and the next candidate comes in place
    expect(page.locator("[data-judged]")).to_contain_text("Book a flight”: valid")
    expect(focus.locator("[data-label]")).to_have_text("Recover account access")
    expect(focus).to_be_focused()
    expect(page).to_have_url(re.compile(rf"\?candidate={recover.pk}$"))
    expect(page.locator("[data-intent-row]")).to_have_count(1)
    expect(page.locator("[data-recent-judgments]")).to_contain_text("rob: valid")  # visible after her own
    htmx_settled(page)

    page.keyboard.press("m")
    merge_list = focus.locator("[data-merge-target]")
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
