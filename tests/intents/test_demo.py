"""seed_demo fills the intents pages: a proposal run over the demo runs (worked in process), a reviewed taxonomy
(judgments by rita and rob, one merge, two versions approved by two reviewers other than otto, the proposer), the
demo agent's own labels with one novel intent raised as an alert, two window analyses and a drift report. Running
it twice changes nothing."""

import io

import pytest
from django.core.management import call_command
from django.test import Client

from accounts.demo import DEMO_PASSWORD
from accounts.models import AuditEvent
from intents.demo import NOVEL_LABEL
from intents.models import (
    Embedding,
    IntentCandidateRecord,
    IntentJudgment,
    IntentProposalBatch,
    IntentProposalRun,
    IntentTaxonomy,
    TaxonomyVersion,
)
from intents.windows.models import DriftReport, NoveltyAlert, WindowAnalysis
from reviews.models import Judgment, PromotionRequest, PromotionStatus
from tests.demo_data import demo_run_count

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _default_embedder(settings):
    """The demo runs with the product's offline embedder, not the small one of the other intents tests."""
    settings.WAYMARK_INTENT_EMBEDDER = ""


@pytest.fixture
def seeded(settings, tmp_path) -> str:
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def totals() -> dict[str, int]:
    return {
        "proposal runs": IntentProposalRun.objects.count(),
        "batches": IntentProposalBatch.objects.count(),
        "candidates": IntentCandidateRecord.objects.count(),
        "embeddings": Embedding.objects.count(),
        "judgments": IntentJudgment.objects.count(),
        "versions": TaxonomyVersion.objects.count(),
        "requests": PromotionRequest.objects.count(),
        "approvals": Judgment.objects.count(),
        "analyses": WindowAnalysis.objects.count(),
        "alerts": NoveltyAlert.objects.count(),
        "drift": DriftReport.objects.count(),
        "events": AuditEvent.objects.count(),
    }


def test_a_proposal_run_over_the_demo_runs_finishes_in_process(seeded):
    run = IntentProposalRun.objects.get()
    assert run.status == IntentProposalRun.Status.SUCCEEDED and run.scripted
    assert run.runs_total == demo_run_count() and run.batches_done == run.batches_total
    assert run.candidates_count == IntentCandidateRecord.objects.filter(source="model").count() > demo_run_count()
    assert f"intents: proposal run {run.pk} created" in seeded


def test_the_taxonomy_is_reviewed_by_rita_and_rob_and_approved_by_others_than_its_proposer(seeded):
    judges = set(IntentJudgment.objects.values_list("reviewer__username", flat=True))
    assert judges == {"rita", "rob"}
    verdicts = list(IntentJudgment.objects.values_list("verdict", flat=True))
    assert verdicts.count("valid") > verdicts.count("merge") + verdicts.count("invalid")
    assert verdicts.count("merge") == 2 and verdicts.count("invalid") == 1

    taxonomy = IntentTaxonomy.objects.get()
    v1, v2 = TaxonomyVersion.objects.order_by("number")
    assert taxonomy.active_version_id == v2.pk and v2.parent_id == v1.pk
    assert {row["label"] for row in v2.intents} == {"refund_request", "cancel_order", "change_address", "order_status"}
    assert [change["change"] for change in v2.changes] == ["merged"]
    assert v2.changes[0]["reason"] == "merged by reviewers"
    for request in PromotionRequest.objects.filter(kind="intent_taxonomy"):
        assert request.status == PromotionStatus.APPLIED and request.proposer.username == "otto"
        assert set(request.judgments.values_list("reviewer__username", flat=True)) == {"rita", "rob"}


def test_one_novel_intent_is_raised_by_the_second_window_and_drift_compares_the_two(seeded):
    first, second = WindowAnalysis.objects.order_by("window_start")
    assert first.window_end == second.window_start
    assert first.candidates_count > 0 and second.candidates_count > 0
    assert first.novel_count == 0 and second.novel_count == 1
    alert = NoveltyAlert.objects.get()
    assert alert.label == NOVEL_LABEL and alert.analysis_id == second.pk and alert.status == "open"
    drift = DriftReport.objects.get()
    assert (drift.before_id, drift.after_id) == (first.pk, second.pk)
    assert 0 < drift.jsd <= 1
    assert [row["label"] for row in drift.new] == [NOVEL_LABEL]
    assert "1 novelty alert(s)" in seeded and f"drift report {drift.pk} created" in seeded


def test_seeding_twice_changes_nothing(seeded):
    first = totals()
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert totals() == first
    text = out.getvalue()
    assert "intents: proposal run" in text and "already there" in text
    assert "0 judgments and 0 versions written now" in text and "Traceback" not in text


def test_every_intents_page_answers_a_read_only_teammate(seeded):
    client = Client()
    assert client.login(username="vera", password=DEMO_PASSWORD)
    run = IntentProposalRun.objects.get()
    analysis = WindowAnalysis.objects.order_by("window_start").last()
    drift = DriftReport.objects.get()
    version = TaxonomyVersion.objects.order_by("number").first()
    pages = [
        "/intents/",
        f"/intents/runs/{run.pk}/",
        "/intents/candidates/",
        "/intents/taxonomy/",
        f"/intents/taxonomy/?version={version.number}",
        "/intents/taxonomy/review/",
        "/intents/windows/",
        f"/intents/windows/{analysis.pk}/",
        f"/intents/windows/drift/{drift.pk}/",
        "/intents/windows/alerts/",
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
    assert NOVEL_LABEL in client.get("/intents/windows/alerts/").content.decode()


def test_the_intents_and_review_pages_link_every_intents_page(seeded):
    client = Client()
    assert client.login(username="rita", password=DEMO_PASSWORD)
    for page in ("/intents/", "/reviews/"):
        html = client.get(page).content.decode()
        for url in ('"/intents/candidates/"', '"/intents/taxonomy/"', '"/intents/windows/"', '"/reviews/rubrics/"'):
            assert f"href={url}" in html, (page, url)
    assert 'id="novelty-alerts"' in client.get("/reviews/").content.decode()


# --- the user's own proposals and judgments (issue 24) ---------------------------------------------------------------
def test_seeding_leaves_the_users_proposals_and_judgments_alone(seeded):
    from accounts.roles import Role
    from accounts.services import Actor
    from intents.demo import run_inline
    from intents.services import intent_proposal_start
    from intents.taxonomy.services import intent_judgment_submit, taxonomy_preview
    from tests.demo_data import push_user_runs
    from tests.factories import user_with

    ursula = Actor(user=user_with(Role.OPERATOR, username="ursula"))
    push_user_runs(12, intents=("track_parcel",))
    theirs = run_inline(intent_proposal_start(actor=ursula, only_new=True, enqueue=False))
    assert theirs.runs_total == 12  # the demo runs were covered by the demo's proposal
    record = IntentCandidateRecord.objects.filter(batch__run=theirs, kind="declared").order_by("id").first()
    for name in ("rhea", "ron"):  # the user's own reviewers accept one of their candidates
        intent_judgment_submit(
            actor=Actor(user=user_with(Role.REVIEWER, username=name)), candidate=record, verdict="valid"
        )
    waiting = intent_proposal_start(actor=ursula, intent="track_parcel", enqueue=False)  # for their worker
    before = totals()

    call_command("seed_demo", stdout=io.StringIO())

    assert totals() == before  # no version drafted from their judgments, no proposal worked or started
    waiting.refresh_from_db()
    assert waiting.status == IntentProposalRun.Status.QUEUED and waiting.batches_done == 0
    assert [change["change"] for change in taxonomy_preview().changes] == ["added"]  # still theirs to draft


def test_candidates_judged_on_the_tour_are_left_for_the_user_to_draft(seeded):
    """The tour invites the reader to judge the waiting candidates (as rita and rob) and draft version 3: seeding
    again before they draft must not draft and approve it for them."""
    from accounts.models import User
    from accounts.services import Actor
    from intents.taxonomy.services import intent_judgment_submit, taxonomy_preview

    judged = set(IntentJudgment.objects.values_list("candidate__candidate_id", flat=True))
    waiting = (
        IntentCandidateRecord.objects.filter(source="model", kind="hindsight")
        .exclude(candidate_id__in=judged)
        .order_by("id")
        .first()
    )
    for name in ("rita", "rob"):
        intent_judgment_submit(actor=Actor(user=User.objects.get(username=name)), candidate=waiting, verdict="valid")
    assert taxonomy_preview().changes
    versions = TaxonomyVersion.objects.count()

    call_command("seed_demo", stdout=io.StringIO())

    assert TaxonomyVersion.objects.count() == versions
    assert taxonomy_preview().changes  # still theirs to draft
