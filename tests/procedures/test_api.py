"""/api/v1/procedures and /api/v1/replays: statuses for owner, read-only and outsider, ETag/304, bounded queries."""

import pytest

from accounts.services import Actor
from procedures.mining import services as mining_services
from procedures.models import ProcedureVersion, ReplayRun
from tests.promote import promote_procedure_version
from trajectories.models import Job, Run

from .factories import REFUND, refund_run, refund_runs, stored_version

pytestmark = pytest.mark.django_db
LIST = "/api/v1/procedures"
MINE = "/api/v1/procedures/mine"
CLAIM = "/api/v1/replays/claim"


def result_url(job_id):
    return f"/api/v1/replays/{job_id}/result"


@pytest.fixture
def active(admin_user, operator, django_capture_on_commit_callbacks):
    refund_runs()
    with django_capture_on_commit_callbacks(execute=True):
        version = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND).version
    promote_procedure_version(version)
    return ProcedureVersion.objects.get(pk=version.pk)


def assert_error(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"} and body["message"]
    if code:
        assert body["code"] == code


def test_it_lists_active_versions_with_a_strong_etag_and_answers_304(api_client, make_token, viewer, active):
    token = make_token(viewer, "procedures:read")
    response = api_client.get(f"{LIST}?intent=Refund Request", token=token)
    assert response.status_code == 200
    etag = response["ETag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    assert response["X-Waymark-Revision"] == active.content_revision
    (item,) = response.json()["items"]
    assert item["intent"] == "refund request" and item["active_version"]["number"] == 1
    assert [s["tool"] for s in item["active_version"]["steps"]] == ["lookup_policy", "issue_refund"]
    again = api_client.get(f"{LIST}?intent=refund_request", token=token, **{"If-None-Match": etag})
    assert again.status_code == 304 and again["ETag"] == etag and again.content == b""
    assert "Content-Type" not in again  # no body to describe
    other = api_client.get(f"{LIST}?intent=cancel_order", token=token, **{"If-None-Match": etag})
    assert other.status_code == 200 and other.json() == {"items": []}


def test_the_etag_changes_when_the_active_version_moves(api_client, make_token, viewer, admin_user, active):
    token = make_token(viewer, "procedures:read")
    before = api_client.get(LIST, token=token)["ETag"]
    newer = stored_version(active.procedure, "lookup_policy", "confirm", "issue_refund", number=2)
    promote_procedure_version(newer)
    assert api_client.get(LIST, token=token, **{"If-None-Match": before}).status_code == 200


def test_reading_needs_a_valid_token_with_the_scope(api_client, make_token, viewer, active):
    assert_error(api_client.get(LIST), 401, "unauthorized")
    assert_error(api_client.get(LIST, token="wm_nope_nope"), 401)
    assert_error(api_client.get(LIST, token=make_token(viewer, "trajectories:read")), 403, "missing_scope")
    assert api_client.get(LIST, token=make_token(viewer, "procedures:read")).status_code == 200


def test_an_inactive_users_token_is_refused(api_client, make_token, viewer, active):
    token = make_token(viewer, "procedures:read")
    viewer.is_active = False
    viewer.save()
    assert_error(api_client.get(LIST, token=token), 401)


def test_a_procedure_and_its_versions(api_client, make_token, viewer, active):
    token = make_token(viewer, "procedures:read")
    procedure = api_client.get(f"{LIST}/{active.procedure_id}", token=token)
    assert procedure.status_code == 200 and procedure.json()["active_version"]["id"] == active.pk
    versions = api_client.get(f"{LIST}/{active.procedure_id}/versions", token=token)
    assert versions.status_code == 200
    (version,) = versions.json()["items"]
    assert version["status"] == "active" and version["replays"][0]["passed"] is True
    assert version["replays"][0]["gate_report"]["checks"]
    assert_error(api_client.get(f"{LIST}/987654", token=token), 404, "not_found")
    assert_error(api_client.get(f"{LIST}/987654/versions", token=token), 404)
    assert_error(api_client.get(f"{LIST}/abc", token=token), 422)


@pytest.mark.parametrize("versions", [1, 6])
def test_version_list_queries_stay_bounded(
    api_client, make_token, viewer, active, versions, django_assert_max_num_queries
):
    for number in range(2, versions + 1):
        stored_version(active.procedure, "lookup_policy", f"t{number}", number=number)
    token = make_token(viewer, "procedures:read")
    with django_assert_max_num_queries(6):
        assert api_client.get(f"{LIST}/{active.procedure_id}/versions", token=token).status_code == 200
    with django_assert_max_num_queries(6):  # the body built: +2 for the certificates and the coverage flags
        assert api_client.get(LIST, token=token).status_code == 200


def test_an_operator_mines_over_the_api(api_client, make_token, operator, django_capture_on_commit_callbacks):
    refund_runs()
    token = make_token(operator, "procedures:mine")
    with django_capture_on_commit_callbacks(execute=True):
        created = api_client.post(MINE, {"intent": REFUND}, token=token)
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["created"] is True and body["version"]["number"] == 1 and len(body["replay_ids"]) == 1
    again = api_client.post(MINE, {"intent": REFUND, "seed": 17, "held_out_share": 0.3}, token=token)
    assert again.status_code == 200 and again.json()["created"] is False
    assert ProcedureVersion.objects.count() == 1


def test_mining_refusals_are_clear_and_write_nothing(api_client, make_token, operator, viewer, admin_user):
    refund_runs(successes=1, failures=0)
    token = make_token(operator, "procedures:mine")
    assert_error(api_client.post(MINE, {"intent": REFUND}, token=token), 422, "cannot_mine")
    assert_error(api_client.post(MINE, {"intent": REFUND, "extra": 1}, token=token), 422, "invalid")
    assert_error(api_client.post(MINE, {"intent": REFUND, "held_out_share": 1.5}, token=token), 422, "invalid")
    assert_error(api_client.post(MINE, {"intent": "  "}, token=token), 422)
    assert_error(api_client.post(MINE, {"intent": REFUND}, token=make_token(viewer, "procedures:read")), 403)
    assert_error(api_client.post(MINE, {"intent": REFUND}), 401)
    assert not ProcedureVersion.objects.exists()


def test_a_token_whose_user_lost_the_operator_role_cannot_mine(api_client, make_token, operator):
    refund_runs()
    token = make_token(operator, "procedures:mine")
    operator.groups.clear()
    assert_error(api_client.post(MINE, {"intent": REFUND}, token=token), 403)
    assert not ProcedureVersion.objects.exists()


@pytest.fixture
def live_replay(operator, django_capture_on_commit_callbacks):
    refund_runs(successes=10, failures=0)
    with django_capture_on_commit_callbacks(execute=True):
        result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    return result.version.replays.get(mode="live")


def test_agents_claim_replay_jobs_and_answer_them(api_client, make_agent_token, live_replay):
    token = make_agent_token("evaluations:run")
    claimed = api_client.post(CLAIM, {"worker": "agent-1", "lease_seconds": 60}, token=token)
    assert claimed.status_code == 200, claimed.content
    job = claimed.json()
    assert job["kind"] == "procedure_replay" and job["lease_owner"] == "agent-1"
    assert [s["tool"] for s in job["payload"]["procedure"]["steps"]] == ["lookup_policy", "issue_refund"]
    answer = {"run": refund_run(task=job["payload"]["task"])}
    first = api_client.post(result_url(job["id"]), answer, token=token)
    assert first.status_code == 201 and first.json()["counted"] is True
    second = api_client.post(result_url(job["id"]), answer, token=token)
    assert second.status_code == 200 and second.json() == {**first.json(), "counted": False}
    assert Run.objects.filter(source="waymark-evaluation").count() == 1


def test_bad_replay_results_are_rejected_with_nothing_written(api_client, make_agent_token, live_replay):
    token = make_agent_token("evaluations:run")
    job = api_client.post(CLAIM, {}, token=token).json()
    runs = Run.objects.count()
    bad = {"run": {"source": "a", "external_id": "b", "outcome": "great"}}
    rejected = api_client.post(result_url(job["id"]), bad, token=token)
    assert_error(rejected, 422, "invalid")
    assert rejected.json()["details"]["errors"][0]["loc"][:2] == ["runs", 0]
    assert_error(api_client.post(result_url(job["id"]), {"run": refund_run(), "x": 1}, token=token), 422)
    assert_error(api_client.post(result_url(job["id"]), {}, token=token), 422)
    assert Run.objects.count() == runs and Job.objects.get(pk=job["id"]).status == "leased"


def test_replay_endpoints_need_the_scope_and_a_known_job(api_client, make_token, make_agent_token, viewer, live_replay):
    assert_error(api_client.post(CLAIM, {}), 401)
    assert_error(api_client.post(CLAIM, {}, token=make_token(viewer, "procedures:read")), 403)
    token = make_agent_token("evaluations:run")
    assert_error(api_client.post(CLAIM, {"lease_seconds": 0}, token=token), 422)
    assert_error(api_client.post(result_url(987654), {"run": refund_run()}, token=token), 404)
    unclaimed = Job.objects.order_by("-id").first()
    assert_error(api_client.post(result_url(unclaimed.pk), {"run": refund_run()}, token=token), 409, "job_closed")


def test_an_inactive_agents_evaluation_token_is_refused(api_client, make_token, agent, live_replay):
    token = make_token(agent, "evaluations:run")
    agent.is_active = False
    agent.save()
    assert_error(api_client.post(CLAIM, {}, token=token), 401)
    job = Job.objects.order_by("id").first()
    assert_error(api_client.post(result_url(job.pk), {"run": refund_run()}, token=token), 401)
    assert not Job.objects.exclude(status="queued").exists()


def test_claim_answers_204_when_no_job_is_open(api_client, make_agent_token, db):
    response = api_client.post(CLAIM, {}, token=make_agent_token("evaluations:run"))
    assert response.status_code == 204 and ReplayRun.objects.count() == 0
