"""Rubric pages with the three actors (owner, read-only teammate, outsider), the run page's panel with evidence steps
highlighted, and fixed query counts."""

from __future__ import annotations

import pytest
from django.urls import reverse

from rubrics import services as rubric_services
from rubrics.models import RubricAssessmentRow, RubricJob
from tests.conftest import logged_in
from tests.helpers.rubrics import act, make_run, make_version, post

pytestmark = pytest.mark.django_db


def judged(operator, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    committed(rubric_services.rubric_judge_start, actor=act(operator), run_id=run_id, version_id=version.pk, judges=2)
    return version, run_id


def test_the_run_page_shows_the_score_and_highlights_the_evidence_steps(operator, viewer, committed):
    _, run_id = judged(operator, committed)
    page = logged_in(viewer).get(reverse("trajectories:detail", args=[run_id]))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="rubric-overall"' in html and "task_completed" in html and "model judge" in html
    assert 'id="step-1" class="timeline-step step-failed step-evidence"' in html
    assert 'href="#step-1"' in html
    assert "Judge with models" not in html  # read-only teammate


def test_the_runs_list_has_a_rubric_column(operator, viewer, committed):
    judged(operator, committed)
    html = logged_in(viewer).get(reverse("trajectories:list")).content.decode()
    assert '<th scope="col" class="c-rubric num">Rubric</th>' in html and 'title="rubric v1"' in html


def test_the_run_page_keeps_a_fixed_number_of_queries(
    operator,
    viewer,
    committed,
    django_assert_max_num_queries,
):
    version, run_id = judged(operator, committed)
    client = logged_in(viewer)
    url = reverse("trajectories:detail", args=[run_id])
    with django_assert_max_num_queries(10):
        client.get(url)
    rubric_services.rubric_assessment_submit(
        actor=act(operator),
        run_id=run_id,
        version_id=version.pk,
        items=[{"dimension_id": "task_completed", "score": 1}],
    )
    with django_assert_max_num_queries(10):
        client.get(url)


def test_a_reviewer_records_an_assessment_from_the_run_page(operator, reviewer, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    response = post(
        logged_in(reviewer),
        reverse("rubrics:assess", args=[run_id]),
        {
            "version": version.pk,
            "dimension": ["task_completed", "policy_followed"],
            "score:task_completed": "0.75",
            "evidence:task_completed": "0, 2",
            "explanation:task_completed": "refund issued",
            "score:policy_followed": "",
        },
    )
    assert response.status_code == 302
    row = RubricAssessmentRow.objects.get(user=reviewer)
    assert row.score == 0.75 and row.evidence_steps == [0, 2]


def test_a_bad_evidence_step_re_renders_the_panel_with_the_message(operator, reviewer, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    response = post(
        logged_in(reviewer),
        reverse("rubrics:assess", args=[run_id]),
        {
            "version": version.pk,
            "dimension": ["task_completed"],
            "score:task_completed": "1",
            "evidence:task_completed": "9",
        },
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 422
    assert "outside the trajectory" in response.content.decode()
    assert not RubricAssessmentRow.objects.exists()


def test_a_read_only_teammate_cannot_assess_or_judge(operator, viewer, committed):
    version = make_version(operator, committed)
    run_id = make_run()
    client = logged_in(viewer)
    data = {"version": version.pk, "dimension": ["task_completed"], "score:task_completed": "1"}
    assert post(client, reverse("rubrics:assess", args=[run_id]), data).status_code == 403
    assert post(client, reverse("rubrics:judge", args=[run_id]), {"version": version.pk}).status_code == 403
    assert not RubricJob.objects.filter(kind="judge").exists()


def test_the_judge_button_starts_the_model_judges(operator, committed, django_capture_on_commit_callbacks):
    version = make_version(operator, committed)
    run_id = make_run()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(
            logged_in(operator), reverse("rubrics:judge", args=[run_id]), {"version": version.pk, "judges": "2"}
        )
    assert response.status_code == 302
    assert RubricAssessmentRow.objects.filter(run_id=run_id, rater_kind="model").count() == 4


def test_an_outsider_is_sent_to_log_in(outsider, operator, committed):
    version = make_version(operator, committed)
    client = logged_in(outsider)
    for url in (
        reverse("rubrics:list"),
        reverse("rubrics:detail", args=[version.rubric_id]),
        reverse("rubrics:agreement", args=[version.rubric_id]),
    ):
        assert client.get(url).status_code == 302


def test_rubric_pages_read_for_everyone_with_fixed_queries(
    operator,
    viewer,
    committed,
    django_assert_max_num_queries,
):
    version, _ = judged(operator, committed)
    client = logged_in(viewer)
    for url, limit in (
        (reverse("rubrics:list"), 6),
        (reverse("rubrics:detail", args=[version.rubric_id]), 8),
        (reverse("rubrics:agreement", args=[version.rubric_id]), 8),
    ):
        with django_assert_max_num_queries(limit):
            response = client.get(url)
        assert response.status_code == 200, url
    html = client.get(reverse("rubrics:agreement", args=[version.rubric_id])).content.decode()
    assert "alpha" in html and "task_completed" in html
    detail = client.get(reverse("rubrics:detail", args=[version.rubric_id])).content.decode()
    assert "Propose v1 for activation" not in detail


def test_an_operator_proposes_a_rubric_from_the_list_page(operator, django_capture_on_commit_callbacks):
    run_id = make_run()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(logged_in(operator), reverse("rubrics:list"), {"key": "refund_request", "run_ids": str(run_id)})
    assert response.status_code == 302
    detail = logged_in(operator).get(response["Location"]).content.decode()
    assert "Propose v1 for activation" in detail and "task_completed" in detail


def test_the_promotion_item_shows_the_dimensions_diff(operator, committed):
    from reviews.services import promotion_propose

    version = make_version(operator, committed)
    request = promotion_propose(actor=act(operator), kind="rubric_version", candidate_id=str(version.pk), rationale="r")
    html = logged_in(operator).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert "policy_followed" in html and "added" in html
