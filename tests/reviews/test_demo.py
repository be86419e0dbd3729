"""seed_demo leaves one open promotion request for a procedure candidate and one for a graph revision."""

import io

import pytest
from django.core.management import call_command

from accounts.models import User
from reviews import selectors
from reviews.demo import DEMO_KINDS
from reviews.models import PromotionRequest, PromotionStatus

pytestmark = pytest.mark.django_db


def test_the_demo_leaves_an_open_request_per_kind_for_the_reviewers(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    # One open request per kind (the applied ones activated the demo's other procedures: the certification and
    # watch seeders').
    requests = {r.kind: r for r in PromotionRequest.objects.filter(kind__in=DEMO_KINDS, status=PromotionStatus.OPEN)}
    assert set(requests) == {"procedure_version", "graph_revision"}
    assert all(r.status == PromotionStatus.OPEN and r.proposer.username == "otto" for r in requests.values())
    assert requests["graph_revision"].gate_snapshot["passing"] is True
    assert requests["procedure_version"].parent_label == "refund_request"  # the refund candidate of issue 4's demo
    rita = User.objects.get(username="rita")
    pending = [row for row in selectors.queue_for(rita) if row.kind in DEMO_KINDS]
    assert [row.pending_for_me for row in pending] == [True, True]

    before = PromotionRequest.objects.filter(kind__in=DEMO_KINDS).count()
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert PromotionRequest.objects.filter(kind__in=DEMO_KINDS).count() == before
    assert "reviews: procedure_version: already there; graph_revision: already there" in out.getvalue()


def test_a_refund_rubric_proposed_from_someone_elses_runs_is_left_alone(settings, tmp_path, operator):
    from accounts.services import Actor
    from rubrics.models import RubricAssessmentRow, RubricVersion
    from rubrics.services import rubric_propose_run, rubric_propose_start
    from tests.demo_data import push_user_runs

    settings.VAR_DIR = tmp_path
    examples = push_user_runs(5, intents=("refund_request",))[:4]
    job = rubric_propose_start(actor=Actor(user=operator), key="refund_request", run_ids=examples)
    rubric_propose_run(job_id=job.pk, worker="test")  # (its task is enqueued on a commit the test never makes)
    (theirs,) = RubricVersion.objects.all()
    out = io.StringIO()

    call_command("seed_demo", stdout=out)

    assert "rubrics: none (the refund request rubric in use (v1) was not proposed from the demo runs)" in out.getvalue()
    assert not PromotionRequest.objects.filter(kind="rubric_version").exists()
    assert not RubricAssessmentRow.objects.filter(version=theirs).exists()
