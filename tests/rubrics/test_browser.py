"""In Debian's Chromium: a viewer opens a run that a person and model judges assessed under a rubric, sees the
rubric score (overall and per dimension) and the evidence steps highlighted in the timeline, and an evidence link
takes them to its step."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from accounts.services import Actor
from rubrics import services as rubric_services
from rubrics.core.rubrics import RubricDimension, TrajectoryRubric
from rubrics.models import RubricAssessmentRow, RubricJobStatus, RubricScoreRow
from tests.e2e import conftest as e2e
from tests.trajectories.factories import ingest, run_item, step_item

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings(e2e.PLUGIN_DEPRECATION)]

# The browser fixtures of tests/e2e (Debian's Chromium, pages logged in as a user), reused here.
browser_type_launch_args = e2e.browser_type_launch_args
page_as = e2e.page_as

STEPS = 30
FAILED_STEP = 27  # the scripted judges cite a run's failed steps as evidence
PERSON_EVIDENCE = [0, 4]


def assessed_run(reviewer) -> tuple[int, RubricScoreRow]:
    """A refund run of STEPS steps (one failed), a rubric for its intent, a reviewer's assessment and two model
    judges' (the scripted judges: no API key in tests), all through the services."""
    steps = [step_item("lookup_policy" if i % 2 else "check_order", ok=i != FAILED_STEP) for i in range(STEPS)]
    run_id = ingest(run_item(intent="refund_request", outcome="success", steps=steps)).created_ids[0]
    rubric = rubric_services.rubric_ensure(actor=Actor(user=reviewer), key="refund_request")
    version, _ = rubric_services.rubric_version_add(
        actor=Actor(user=reviewer),
        rubric=rubric,
        document=TrajectoryRubric(
            task="Refund an order",
            dimensions=(
                RubricDimension("task_completed", "Did what was asked.", weight=2.0, required=True),
                RubricDimension("policy_followed", "Respected the refund policy.", weight=1.0),
            ),
        ),
    )
    rubric_services.rubric_assessment_submit(
        actor=Actor(user=reviewer),
        run_id=run_id,
        version_id=version.pk,
        items=[
            {
                "dimension_id": "task_completed",
                "score": 0.9,
                "confidence": 1.0,
                "evidence_steps": PERSON_EVIDENCE,
                "explanation": "Checked the order before refunding.",
            },
            {"dimension_id": "policy_followed", "score": 0.7, "confidence": 0.8, "evidence_steps": [4]},
        ],
    )
    # live_server's database commits, so the judging task runs (eagerly, in tests) when the job is committed
    job = rubric_services.rubric_judge_start(actor=Actor(user=reviewer), run_id=run_id, version_id=version.pk, judges=2)
    job.refresh_from_db()
    assert job.status == RubricJobStatus.SUCCEEDED, job.error
    assert RubricAssessmentRow.objects.filter(run_id=run_id, rater_kind="model").exists()
    return run_id, RubricScoreRow.objects.get(run_id=run_id, version=version)


def test_a_run_page_shows_its_rubric_score_and_highlights_the_evidence_steps(page_as, reviewer, viewer):
    run_id, score = assessed_run(reviewer)
    evidence = sorted(
        {int(step) for row in RubricAssessmentRow.objects.filter(run_id=run_id) for step in row.evidence_steps}
    )
    assert evidence == sorted({*PERSON_EVIDENCE, FAILED_STEP})  # the person's steps and the judges' failed step
    errors = []

    page = page_as(viewer, reverse("trajectories:detail", args=[run_id]))
    page.on("pageerror", lambda error: errors.append(error))

    panel = page.locator("#rubric")
    expect(panel.get_by_role("heading", name="Rubric score")).to_be_visible()
    expect(page.locator("#rubric-overall")).to_have_text(f"{score.overall:.2f}")
    expect(panel).to_contain_text("required dimensions pass")
    for dimension_id, value in score.dimension_scores.items():
        row = panel.locator("table.rubric-dimensions tbody tr").filter(has_text=dimension_id)
        expect(row).to_contain_text(f"{value:.2f}")
    expect(panel).to_contain_text(reviewer.username)
    expect(panel).to_contain_text("model judge")
    expect(panel.get_by_role("button", name="Judge with models")).to_have_count(0)  # a viewer only reads

    highlighted = page.locator("ol.timeline > li.step-evidence")
    expect(highlighted).to_have_count(len(evidence))
    assert highlighted.evaluate_all("rows => rows.map(row => row.id)") == [f"step-{i}" for i in evidence]
    for index in evidence:
        step = page.locator(f"#step-{index}")
        expect(step).to_contain_text("rubric evidence")
        assert step.evaluate("row => getComputedStyle(row).outlineStyle") == "solid"
    plain = page.locator("#step-1")
    expect(plain).not_to_have_class("step-evidence")
    assert plain.evaluate("row => getComputedStyle(row).outlineStyle") == "none"

    target = page.locator(f"#step-{FAILED_STEP}")
    expect(target).not_to_be_in_viewport()
    panel.locator(f'a[href="#step-{FAILED_STEP}"]').first.click()
    expect(page).to_have_url(f"{page.url.split('#')[0]}#step-{FAILED_STEP}")
    expect(target).to_be_in_viewport()
    assert page.evaluate("document.querySelector(':target').id") == f"step-{FAILED_STEP}"
    assert not errors


def test_a_reviewer_sees_no_score_until_their_own_assessment_then_everything(page_as, reviewer):
    """Blind annotation (issue 24): rob, a reviewer, opens a run that rita and two model judges assessed. Nothing of
    theirs shows — no score, no rater, no reason, no highlighted evidence, no count — until he records his own."""
    from accounts.roles import Role
    from tests.factories import user_with

    run_id, _ = assessed_run(reviewer)
    rob = user_with(Role.REVIEWER, username="rob")
    errors = []
    page = page_as(rob, reverse("trajectories:detail", args=[run_id]))
    page.on("pageerror", lambda error: errors.append(error))

    panel = page.locator("#rubric")
    expect(panel.locator("[data-rubric-sealed]")).to_be_visible()
    expect(page.locator("#rubric-overall")).to_have_count(0)
    for hidden in (reviewer.username, "model judge", "Checked the order", "assessment(s) by"):
        expect(panel).not_to_contain_text(hidden)
    expect(page.locator("ol.timeline > li.step-evidence")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("rubric evidence")

    form = panel.locator("form.rubric-assess")
    expect(form).to_be_visible()  # his own form, open
    form.locator('input[name="score:task_completed"]').fill("0.4")
    form.locator('input[name="evidence:task_completed"]').fill("3")
    form.get_by_role("button", name="Record my assessment").click()

    expect(page.locator("#rubric-overall")).to_be_visible()  # the page reloads with everything
    expect(panel.locator("[data-rubric-sealed]")).to_have_count(0)
    expect(panel).to_contain_text(reviewer.username)
    expect(panel).to_contain_text("rob")
    expect(panel).to_contain_text("model judge")
    expect(page.locator("#step-3")).to_have_class(re.compile(r"\bstep-evidence\b"))
    expect(page.locator(f"#step-{FAILED_STEP}")).to_have_class(re.compile(r"\bstep-evidence\b"))
    assert not errors
