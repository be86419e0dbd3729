"""The demo seeds what certification looks like: the review candidate certified by the demo agent answering each
held-out task with and without it (repairs and breakages), one split exhausted, one active procedure not certified
for the model its agent moved to; seeding again adds nothing."""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from accounts.models import User
from procedures.demo import ACTIVE_INTENT, NEW_MODEL, REVIEW_INTENT
from procedures.mining import intent_key
from procedures.models import Procedure
from reviews.models import PromotionRequest
from tests.conftest import logged_in
from uplift.models import Certificate, CoverageFlag, HeldOutSplit

pytestmark = pytest.mark.django_db


def demo_user(name):
    return User.objects.get(username=name)


@pytest.fixture
def seeded(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.WAYMARK_CERTIFICATION_POLICY = {}  # the demo sets its own procedures' policy
    call_command("seed_demo", stdout=io.StringIO())


def test_the_review_candidate_is_certified_with_and_without_it(seeded):
    refund = Procedure.objects.get(intent=intent_key(REVIEW_INTENT))
    request = PromotionRequest.objects.get(kind="procedure_version", parent_key=str(refund.pk))
    certificate = Certificate.objects.get(pk=request.gate_snapshot["certificate"]["id"])
    assert certificate.passed and certificate.replaces_id == "" and certificate.totals["repairs"] > 0
    assert {row["outcome"] for row in certificate.rows} - {"both_passed", "both_failed"}  # it changed something
    page = logged_in(demo_user("rita")).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert certificate.sentence in page and "Repairs and breakages" in page


def test_one_split_is_exhausted_and_one_active_procedure_is_flagged(seeded):
    operator = demo_user("otto")
    procedure = Procedure.objects.get(intent=intent_key(ACTIVE_INTENT))
    assert procedure.active_version_id is not None
    split = HeldOutSplit.objects.get(parent_key=str(procedure.pk))
    assert split.decisions == 2
    flag = CoverageFlag.objects.get()
    assert (flag.model, flag.candidate_id) == (NEW_MODEL, str(procedure.active_version_id))
    page = logged_in(operator).get(reverse("uplift:policies")).content.decode()
    assert f"Certify for {NEW_MODEL}" in page
    certificate = Certificate.objects.filter(parent_key=str(procedure.pk)).latest("id")
    whole = logged_in(operator).get(reverse("uplift:certificate", args=[certificate.pk])).content.decode()
    assert "The split is exhausted" in whole


def test_seeding_again_adds_no_certificate(seeded):
    before = (Certificate.objects.count(), CoverageFlag.objects.count())
    call_command("seed_demo", stdout=io.StringIO())
    assert (Certificate.objects.count(), CoverageFlag.objects.count()) == before


def test_the_demo_seeds_a_running_canary_and_one_the_watch_rolled_back(seeded):
    from uplift.models import Watch

    by_status = {watch.status: watch for watch in Watch.objects.filter(mode="canary")}
    assert set(by_status) == {"running", "rolled_back"}
    rolled = by_status["rolled_back"]
    assert "worse in success" in rolled.reason and rolled.rollback_request_id
    running = Procedure.objects.get(pk=int(by_status["running"].parent_key))
    assert running.canary_control_id is not None and running.canary_share == 0.5
    page = logged_in(demo_user("rita")).get(reverse("reviews:queue")).content.decode()
    assert "Rolled back by the watch" in page
