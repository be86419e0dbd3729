"""seed_demo adds a rubric for refund requests: proposed by the scripted model, four runs judged by the scripted
model judges, some assessed by rita and rob, the version left a candidate with an open promotion request. The run
page of a judged run shows its score; running the seed twice changes nothing."""

import io

import pytest
from django.core.management import call_command
from django.test import Client

from accounts.demo import DEMO_PASSWORD
from accounts.models import AuditEvent, User
from llm.models import ModelCall
from reviews.models import PromotionRequest, PromotionStatus
from rubrics import selectors as rubric_selectors
from rubrics.demo import DEMO_SOURCE, JUDGED_RUNS
from rubrics.models import (
    RaterKind,
    Rubric,
    RubricAssessmentRow,
    RubricJob,
    RubricJobStatus,
    RubricScoreRow,
    RubricVersion,
    RubricVersionStatus,
)
from trajectories.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(settings, tmp_path) -> str:
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def totals() -> dict[str, int]:
    return {
        "rubrics": Rubric.objects.count(),
        "versions": RubricVersion.objects.count(),
        "jobs": RubricJob.objects.count(),
        "assessments": RubricAssessmentRow.objects.count(),
        "scores": RubricScoreRow.objects.count(),
        "calls": ModelCall.objects.count(),
        "requests": PromotionRequest.objects.count(),
        "events": AuditEvent.objects.count(),
    }


def judged_run() -> Run:
    return Run.objects.get(source=DEMO_SOURCE, external_id=JUDGED_RUNS[0])


def test_the_refund_rubric_is_proposed_judged_by_models_and_assessed_by_people(seeded):
    rubric = Rubric.objects.get()
    version = RubricVersion.objects.get()
    assert version.rubric == rubric and version.status == RubricVersionStatus.CANDIDATE
    assert ModelCall.objects.get(pk=version.model_call_id).role == "rubric"
    assert set(RubricJob.objects.values_list("status", flat=True)) == {RubricJobStatus.SUCCEEDED}

    models = RubricAssessmentRow.objects.filter(version=version, rater_kind=RaterKind.MODEL)
    assert models.values("run_id").distinct().count() == len(JUDGED_RUNS)
    assert len(set(models.values_list("judge_name", flat=True))) >= 2
    assert ModelCall.objects.filter(role="judge").count() == len(JUDGED_RUNS) * len(
        set(models.values_list("judge_name", flat=True))
    )
    people = RubricAssessmentRow.objects.filter(version=version, rater_kind=RaterKind.PERSON)
    assert set(people.values_list("user__username", flat=True)) == {"rita", "rob"}
    assert RubricScoreRow.objects.filter(version=version).count() == len(JUDGED_RUNS)

    request = PromotionRequest.objects.get(kind="rubric_version")
    assert request.status == PromotionStatus.OPEN and request.proposer.username == "otto"
    assert request.candidate_id == str(version.pk)
    assert f"rubrics: {rubric.key} v1 (candidate, proposed now); 4 runs judged" in seeded


def test_seeding_twice_changes_nothing(seeded):
    first = totals()
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert totals() == first
    assert "(candidate, already there); 4 runs judged by the model judges (0 now)" in out.getvalue()


def test_the_run_page_of_a_judged_run_shows_its_rubric_score(seeded):
    run = judged_run()
    score = RubricScoreRow.objects.get(run=run)
    client = Client()
    assert client.login(username="vera", password=DEMO_PASSWORD)
    html = client.get(f"/trajectories/{run.pk}/").content.decode()
    assert f'<strong id="rubric-overall">{score.overall:.2f}</strong>' in html
    assert "step-evidence" in html and "rita" in html
    vera = User.objects.get(username="vera")
    (listed,) = rubric_selectors.attach_rubric_scores([run], viewer=vera)  # what the runs list shows her
    assert listed.rubric_score.overall == score.overall


def test_every_rubric_page_answers_a_read_only_teammate(seeded):
    rubric = Rubric.objects.get()
    client = Client()
    assert client.login(username="vera", password=DEMO_PASSWORD)
    for url in (
        "/reviews/rubrics/",
        f"/reviews/rubrics/{rubric.pk}/",
        f"/reviews/rubrics/{rubric.pk}/agreement/",
        f"/reviews/rubrics/runs/{judged_run().pk}/",
        "/reviews/",
        f"/reviews/{PromotionRequest.objects.get(kind='rubric_version').pk}/",
    ):
        assert client.get(url).status_code == 200, url
    agreement = client.get(f"/reviews/rubrics/{rubric.pk}/agreement/").content.decode()
    assert "rita" in agreement


def test_the_demos_people_assessed_blind_so_agreement_leaves_none_out(seeded):
    rubric = Rubric.objects.get()
    vera = User.objects.get(username="vera")
    report = rubric_selectors.agreement_for(vera, rubric, rubric.versions.order_by("-number").first())
    assert report.not_blind == 0 and not report.own_runs_only
    assert set(RubricAssessmentRow.objects.filter(rater_kind="person").values_list("blind", flat=True)) == {True}
    alpha = {dimension.dimension_id: dimension.alpha for dimension in report.dimensions}
    assert alpha["task_completed"] > alpha["policy_followed"]  # the tour's figures: high, then low
