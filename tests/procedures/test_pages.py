"""Procedure pages: list, version report, mine now (operators), activation (admins); fixed query counts."""

import pytest
from django.urls import reverse

from accounts.models import AuditEvent
from accounts.services import Actor
from procedures.mining import services as mining_services
from procedures.models import Procedure, ProcedureVersion
from procedures.replay.services import offline as offline_replay_services
from reviews.models import PromotionRequest
from tests.conftest import logged_in
from tests.promote import promote_procedure_version
from tests.trajectories.factories import ingest

from .factories import REFUND, queued_replay, refund_run, refund_runs, stored_version

pytestmark = pytest.mark.django_db
LIST = reverse("procedures:list")
MINE = reverse("procedures:mine")


def version_url(version):
    return reverse("procedures:version", args=[version.pk])


def post(client, url, data):
    client.get(LIST)
    return client.post(url, {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


@pytest.fixture
def mined(operator, django_capture_on_commit_callbacks):
    refund_runs()
    with django_capture_on_commit_callbacks(execute=True):
        return mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND).version


@pytest.mark.parametrize("who", ["operator", "viewer", "admin_user"])
def test_logged_in_users_see_the_list_and_a_version(request, mined, who):
    client = logged_in(request.getfixturevalue(who))
    page = client.get(LIST)
    assert page.status_code == 200
    content = page.content.decode()
    assert "refund request" in content and "gate passed" in content and version_url(mined) in content
    version = client.get(version_url(mined)).content.decode()
    assert "lookup_policy" in version and "order_id" in version and "Gate checks" in version
    assert reverse("trajectories:detail", args=[mined.source_run_ids[0]]) in version


def test_outsiders_are_sent_to_log_in(client, outsider, mined):
    for url in (LIST, version_url(mined)):
        assert client.get(url).status_code == 302
        assert reverse("accounts:login") in logged_in(outsider).get(url)["Location"]
    assert client.post(MINE, {"intent": REFUND}).status_code in (302, 403)
    proposal = {"kind": "procedure_version", "candidate_id": str(mined.pk), "rationale": "r"}
    assert client.post(reverse("reviews:propose"), proposal).status_code in (302, 403)
    assert not PromotionRequest.objects.exists()
    assert Procedure.objects.get().active_version_id is None
    assert ProcedureVersion.objects.count() == 1


def test_only_operators_see_and_use_mine_now(operator, viewer):
    refund_runs()
    assert "Mine now" in logged_in(operator).get(LIST).content.decode()
    assert "Mine now" not in logged_in(viewer).get(LIST).content.decode()
    assert post(logged_in(viewer), MINE, {"intent": REFUND, "held_out_share": 0.3, "seed": 17}).status_code == 403
    assert not ProcedureVersion.objects.exists()


def test_an_operator_mines_from_the_page(operator, django_capture_on_commit_callbacks):
    refund_runs()
    client = logged_in(operator)
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, MINE, {"intent": REFUND, "held_out_share": 0.3, "seed": 17})
    version = ProcedureVersion.objects.get()
    assert response.status_code == 302 and response["Location"] == version_url(version)
    assert "Mined version 1" in client.get(response["Location"]).content.decode()


def test_a_refused_mining_rerenders_the_form_with_the_reason(operator):
    ingest(refund_run())
    response = post(logged_in(operator), MINE, {"intent": REFUND, "held_out_share": 0.3, "seed": 17})
    assert response.status_code == 422 and "mining needs at least 2" in response.content.decode()
    bad = post(logged_in(operator), MINE, {"intent": "", "held_out_share": 3, "seed": 17})
    assert bad.status_code == 422
    assert not Procedure.objects.exists()


def test_the_version_page_shows_regressions_with_coloured_deltas(viewer, admin_user):
    held_out = ingest(*[refund_run() for _ in range(3)], refund_run("lookup_policy", "check", "issue_refund"))
    procedure = Procedure.objects.create(intent="refund request", title=REFUND)
    active = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
    promote_procedure_version(active)
    candidate = stored_version(procedure, "lookup_policy", "check", "issue_refund", number=2, status="candidate")
    offline_replay_services.replay_offline_run(
        replay=queued_replay(candidate, compared_with=active, held_out=held_out.created_ids)
    )

    content = logged_in(viewer).get(version_url(candidate)).content.decode()

    assert "gate failed" in content and "Regressions (3)" in content and "worse" in content
    for run_id in held_out.created_ids[:3]:
        assert reverse("trajectories:detail", args=[run_id]) in content
    assert version_url(active) in content


def propose(user, version, rationale="mined and replayed"):
    data = {"kind": "procedure_version", "candidate_id": str(version.pk), "rationale": rationale}
    return post(logged_in(user), reverse("reviews:propose"), data)


def test_a_reviewer_proposes_a_ready_version_from_its_page(reviewer, mined):
    content = logged_in(reviewer).get(version_url(mined)).content.decode()
    assert "Propose for activation" in content and reverse("reviews:propose") in content
    assert "admin override will be needed" not in content  # its replay gate passed
    history = reverse("reviews:history", args=["procedure_version", mined.procedure_id])
    assert history in content

    response = propose(reviewer, mined)

    request = PromotionRequest.objects.get(kind="procedure_version", candidate_id=str(mined.pk))
    assert response.status_code == 302 and response["Location"] == reverse("reviews:item", args=[request.pk])
    assert Procedure.objects.get().active_version_id is None  # proposing moves nothing
    content = logged_in(reviewer).get(version_url(mined)).content.decode()
    assert reverse("reviews:item", args=[request.pk]) in content and "Open promotion request" in content
    assert "Propose for activation" not in content and history in content


def test_a_failed_version_may_be_proposed_with_a_note_about_the_override(operator, mined):
    failed = stored_version(mined.procedure, "lookup_policy", "x", number=2, status="failed")
    content = logged_in(operator).get(version_url(failed)).content.decode()
    assert "Propose for activation" in content and "admin override with a written reason will be needed" in content
    assert propose(operator, failed).status_code == 302
    assert PromotionRequest.objects.get().gate_snapshot["passing"] is not True


def test_the_active_and_unreplayed_versions_offer_no_proposal(reviewer, mined):
    promote_procedure_version(mined)
    assert "Propose for activation" not in logged_in(reviewer).get(version_url(mined)).content.decode()
    candidate = stored_version(mined.procedure, "lookup_policy", "y", number=2, status="candidate")
    assert "Propose for activation" not in logged_in(reviewer).get(version_url(candidate)).content.decode()


def test_viewers_cannot_propose_and_no_page_activates(viewer, admin_user, mined):
    content = logged_in(viewer).get(version_url(mined)).content.decode()
    assert "Propose for activation" not in content
    assert reverse("reviews:history", args=["procedure_version", mined.procedure_id]) in content
    assert propose(viewer, mined).status_code == 403
    response = post(logged_in(admin_user), f"/procedures/versions/{mined.pk}/activate/", {"expected_revision": 0})
    assert response.status_code == 404
    assert Procedure.objects.get().active_version_id is None
    assert not PromotionRequest.objects.exists()
    assert not AuditEvent.objects.filter(verb="procedure.activate").exists()


def test_an_unknown_version_is_404(viewer):
    assert logged_in(viewer).get(reverse("procedures:version", args=[987654])).status_code == 404


@pytest.mark.parametrize("size", [1, 5])
def test_page_queries_stay_fixed(viewer, admin_user, size, django_assert_max_num_queries):
    for n in range(size):
        procedure = Procedure.objects.create(intent=f"intent {n}", title=f"intent_{n}")
        held_out = ingest(*[refund_run() for _ in range(3)], refund_run("lookup_policy", "x", "issue_refund"))
        active = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
        promote_procedure_version(active)
        candidate = stored_version(procedure, "lookup_policy", "x", "issue_refund", number=2, status="candidate")
        offline_replay_services.replay_offline_run(
            replay=queued_replay(candidate, compared_with=active, held_out=held_out.created_ids)
        )
    client = logged_in(viewer)
    with django_assert_max_num_queries(8):
        assert client.get(LIST).status_code == 200
    with django_assert_max_num_queries(12):
        assert client.get(version_url(candidate)).status_code == 200


def test_a_running_replay_section_refreshes_itself_as_an_htmx_fragment(viewer, mined):
    candidate = stored_version(mined.procedure, "lookup_policy", "y", number=2, status="candidate")
    queued_replay(candidate, compared_with=None, held_out=mined.held_out_run_ids)
    client = logged_in(viewer)
    page = client.get(version_url(candidate)).content.decode()
    assert 'hx-trigger="every 3s"' in page
    fragment = client.get(version_url(candidate), headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="replays"') and "<html" not in fragment
    assert 'hx-trigger="every 3s"' not in client.get(version_url(mined)).content.decode()


def test_an_operator_amends_from_the_version_page_and_others_cannot(operator, viewer, mined):
    url = reverse("procedures:amend", args=[mined.pk])
    assert "Save as a new version" not in logged_in(viewer).get(version_url(mined)).content.decode()
    assert post(logged_in(viewer), url, {"preconditions": "x", "failure_exits": ""}).status_code == 403
    client = logged_in(operator)
    assert "Save as a new version" in client.get(version_url(mined)).content.decode()
    response = post(client, url, {"preconditions": "order delivered\n\ncustomer verified", "failure_exits": ""})
    amended = ProcedureVersion.objects.get(number=2)
    assert response.status_code == 302 and response["Location"] == version_url(amended)
    assert amended.preconditions == ["order delivered", "customer verified"]
    assert "customer verified" in client.get(version_url(amended)).content.decode()
