"""Blind rubric assessment (issue 24, "annotation is not blinded"): until a reviewer or operator has assessed a
production run under a rubric version, nothing of anyone else's assessments of it shows to them — not on the run
page's panel (nor its htmx partial), the runs list, the agreement page or the API — and everything shows after.
Each person's assessment records whether it was made blind; agreement counts blind ratings of production runs only,
and says how many it left out. Rubrics read production runs only: a live replay's runs are judged by the replay
gate's rubric floor alone."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.models import AuditEvent
from accounts.roles import Role
from reviews.errors import Conflict
from rubrics import selectors as rubric_selectors
from rubrics import services as rubric_services
from rubrics.models import RubricAssessmentRow
from tests.conftest import logged_in
from tests.factories import user_with
from tests.helpers.rubrics import act, make_run, make_version, post
from trajectories.choices import EVALUATION_SOURCE
from trajectories.models import Run

pytestmark = pytest.mark.django_db


def assess(user, run_id, version, score=0.9, dimension="task_completed", evidence=(0,)):
    return rubric_services.rubric_assessment_submit(
        actor=act(user),
        run_id=run_id,
        version_id=version.pk,
        items=[{"dimension_id": dimension, "score": score, "evidence_steps": list(evidence), "explanation": "why"}],
    )


@pytest.fixture
def scored(operator, reviewer, committed):
    """A refund run judged by two model judges and assessed by rita (reviewer); rob (reviewer) has not assessed."""
    version = make_version(operator, committed)
    run_id = make_run()
    committed(rubric_services.rubric_judge_start, actor=act(operator), run_id=run_id, version_id=version.pk, judges=2)
    assess(reviewer, run_id, version, evidence=(2,))
    return version, run_id


@pytest.fixture
def rob(db):
    return user_with(Role.REVIEWER, username="rob")


SEALED_WORDS = ("rubric-overall", "model judge", "rita", "assessment(s) by", "Assessments (evidence steps)")


def test_the_run_page_hides_every_score_from_a_reviewer_until_their_own_assessment(scored, rob, viewer):
    version, run_id = scored
    url = reverse("trajectories:detail", args=[run_id])
    html = logged_in(rob).get(url).content.decode()
    assert "data-rubric-sealed" in html and "Record my assessment" in html
    for word in SEALED_WORDS:
        assert word not in html, word
    assert "step-evidence" not in html  # nobody's evidence steps highlighted either
    partial = logged_in(rob).get(reverse("rubrics:run_panel", args=[run_id])).content.decode()  # the htmx part
    assert "data-rubric-sealed" in partial and "model judge" not in partial and "rita" not in partial

    seen_by_vera = logged_in(viewer).get(url).content.decode()  # she cannot assess: the product's output shows
    assert "rubric-overall" in seen_by_vera and "model judge" in seen_by_vera and "rita" in seen_by_vera

    response = post(
        logged_in(rob),
        reverse("rubrics:assess", args=[run_id]),
        {"version": version.pk, "dimension": ["task_completed"], "score:task_completed": "0.2"},
    )
    assert response.status_code == 302
    after = logged_in(rob).get(url).content.decode()
    assert "data-rubric-sealed" not in after
    assert all(word in after for word in ("rubric-overall", "model judge", "rita", "rob", "step-evidence"))


def test_the_sealed_run_page_keeps_its_query_count(scored, rob, django_assert_max_num_queries):
    _, run_id = scored
    client = logged_in(rob)
    with django_assert_max_num_queries(10):
        assert client.get(reverse("trajectories:detail", args=[run_id])).status_code == 200
    with django_assert_max_num_queries(8):
        assert client.get(reverse("rubrics:run_panel", args=[run_id])).status_code == 200


def test_the_runs_list_shows_a_score_only_to_those_who_may_see_it(scored, rob, viewer, django_assert_max_num_queries):
    version, run_id = scored
    listed = reverse("trajectories:list")
    assert 'title="rubric v1"' in logged_in(viewer).get(listed).content.decode()
    client = logged_in(rob)
    with django_assert_max_num_queries(12):
        html = client.get(listed).content.decode()
    assert 'title="rubric v1"' not in html  # sealed means absent: the cell is empty, as for an unscored run
    assess(rob, run_id, version, score=0.1)
    assert 'title="rubric v1"' in client.get(listed).content.decode()


def test_a_score_under_a_version_one_assessed_stays_visible_when_a_newer_one_is_sealed(
    scored,
    reviewer,
    operator,
    committed,
):
    """The list shows the newest score the viewer may see: rita assessed v1; v2's newer score stays sealed."""
    from rubrics.core.rubrics import RubricDimension, TrajectoryRubric

    v1, run_id = scored
    v2, _ = rubric_services.rubric_version_add(
        actor=act(operator),
        rubric=v1.rubric,
        document=TrajectoryRubric(task="refunds", dimensions=(RubricDimension("task_completed", "Done.", 1.0),)),
    )
    assess(operator, run_id, v2, score=0.05)
    run = Run.objects.get(pk=run_id)
    rubric_selectors.attach_rubric_scores([run], viewer=reviewer)
    assert run.rubric_score.version_number == 1


def test_a_persons_assessment_records_whether_it_was_made_blind(scored, rob, operator, committed):
    version, run_id = scored
    assess(rob, run_id, version, score=0.3)
    first = RubricAssessmentRow.objects.get(user=rob)
    assert first.blind is True
    assess(rob, run_id, version, score=0.4, dimension="policy_followed")  # after seeing everyone's: not blind
    assert RubricAssessmentRow.objects.get(user=rob, dimension_id="policy_followed").blind is False
    assert RubricAssessmentRow.objects.get(user=rob, dimension_id="task_completed").blind is True  # kept as made
    assess(rob, run_id, version, score=0.5)  # a new one replacing the first, made with the others in sight
    assert RubricAssessmentRow.objects.get(user=rob, dimension_id="task_completed").blind is False
    assert set(RubricAssessmentRow.objects.filter(rater_kind="model").values_list("blind", flat=True)) == {True}
    events = AuditEvent.objects.filter(verb="rubric.assess").order_by("id")
    assert [e.after["blind"] for e in events if e.after["rater"] == f"user:{rob.pk}"] == [
        True,
        False,
        False,
    ]


def test_agreement_counts_blind_ratings_only_and_says_how_many_it_left_out(scored, rob, viewer):
    version, run_id = scored
    assess(rob, run_id, version, score=0.3)
    assess(rob, run_id, version, score=0.35, dimension="policy_followed")  # not blind
    RubricAssessmentRow.objects.filter(user__username="rita").update(blind=None)  # made before blinding existed
    report = rubric_selectors.agreement_for(viewer, version.rubric, version)
    raters = {rater for dimension in report.dimensions for rater in dimension.raters}
    assert f"user:{rob.pk}" in raters and not any(r.startswith("user:") and r != f"user:{rob.pk}" for r in raters)
    task = next(d for d in report.dimensions if d.dimension_id == "task_completed")
    assert f"user:{rob.pk}" in task.raters
    policy = next(d for d in report.dimensions if d.dimension_id == "policy_followed")
    assert f"user:{rob.pk}" not in policy.raters
    assert report.not_blind == 2  # rita's (unknown) and rob's second
    html = logged_in(viewer).get(reverse("rubrics:agreement", args=[version.rubric_id])).content.decode()
    assert "data-agreement-left-out" in html and "2 assessments by people left out" in html


def test_agreement_shows_a_reviewer_only_the_runs_they_assessed(
    scored,
    rob,
    reviewer,
    operator,
    committed,
    django_assert_max_num_queries,
):
    version, _ = scored
    other = make_run()
    assess(reviewer, other, version, score=0.7)
    assess(operator, other, version, score=0.6)
    robs = rubric_selectors.agreement_for(rob, version.rubric, version)
    assert robs.own_runs_only and robs.dimensions == () and robs.rating_count == 0
    assess(rob, other, version, score=0.65)
    robs = rubric_selectors.agreement_for(rob, version.rubric, version)
    units = {unit for dimension in robs.dimensions for unit in dimension.units}
    assert units == {str(other)}  # the judged run stays sealed to rob: he has not assessed it
    client = logged_in(rob)
    with django_assert_max_num_queries(8):
        html = client.get(reverse("rubrics:agreement", args=[version.rubric_id])).content.decode()
    assert "data-agreement-own-runs" in html


def test_agreement_reads_no_evaluation_run(operator, viewer, committed):
    version = make_version(operator, committed)
    replayed = make_run(source=EVALUATION_SOURCE, external_id="job-1")
    job = rubric_services.rubric_judge_for_gate(replayed, version, 2)  # the replay gate's rubric floor judges it
    assert job is not None and RubricAssessmentRow.objects.filter(run_id=replayed).count() == 4
    report = rubric_selectors.agreement_for(viewer, version.rubric, version)
    assert report.rating_count == 0 and report.dimensions == ()


def test_judging_refuses_an_evaluation_run(operator, committed):
    version = make_version(operator, committed)
    replayed = make_run(source=EVALUATION_SOURCE, external_id="job-2")
    with pytest.raises(Conflict) as refused:
        rubric_services.rubric_judge_start(actor=act(operator), run_id=replayed, version_id=version.pk, judges=2)
    assert refused.value.code == "evaluation_run"
    assert not RubricAssessmentRow.objects.exists()


def test_a_rubric_learns_from_production_runs_only(operator):
    replayed = make_run(source=EVALUATION_SOURCE, external_id="job-3")
    production = make_run()
    assert rubric_services.example_run_ids(rubric_services.intent_key("refund_request")) == [production]
    with pytest.raises(Conflict) as refused:
        rubric_services.rubric_propose_start(actor=act(operator), key="refund_request", run_ids=[replayed])
    assert refused.value.code == "evaluation_run"


def test_an_evaluation_runs_page_shows_its_floor_scores_to_a_reviewer_and_no_form(operator, rob, committed):
    version = make_version(operator, committed)
    replayed = make_run(source=EVALUATION_SOURCE, external_id="job-4")
    rubric_services.rubric_judge_for_gate(replayed, version, 2)
    html = logged_in(rob).get(reverse("trajectories:detail", args=[replayed])).content.decode()
    assert "rubric-overall" in html and "model judge" in html and "data-rubric-sealed" not in html
    assert "Record my assessment" not in html and "Judge with models" not in html
    assert "only the replay gate" in html
    with pytest.raises(Conflict):
        assess(rob, replayed, version)


def test_the_activity_lines_of_assessments_are_sealed_until_ones_own(scored, rob, viewer):
    """The dashboard's recent activity and the audit lists (accounts.blinding) leave out people's `rubric.assess`
    events on a run to a reviewer who has not assessed it: "rita rubric.assess run #n" tells that she did."""
    from accounts.blinding import blind

    version, run_id = scored
    events = list(AuditEvent.objects.filter(verb="rubric.assess", target_id=str(run_id)))
    assert len(events) == 3  # two model judges (system) and rita
    assert blind(events, rob) == []
    assert len(blind(events, viewer)) == 3  # she cannot assess: nothing is sealed to her
    dashboard = logged_in(rob).get(reverse("dashboard")).content.decode()
    assert "rubric.assess" not in dashboard
    assess(rob, run_id, version, score=0.2)
    assert len(blind(list(AuditEvent.objects.filter(verb="rubric.assess", target_id=str(run_id))), rob)) == 4
    assert "rubric.assess" in logged_in(rob).get(reverse("dashboard")).content.decode()
