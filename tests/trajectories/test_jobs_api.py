"""/api/v1/jobs: one claim / lease / answer protocol for every job kind; kinds filter, statuses, nothing written on
a bad answer, and /api/v1/replays restricted to replay jobs over the same implementation."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import Actor
from trajectories import job_services
from trajectories.jobs import register_job_kind, registered_job_kinds
from trajectories.models import Job, JobStatus, Run, Step

from .factories import run_item

pytestmark = pytest.mark.django_db
CLAIM = "/api/v1/jobs/claim"
FIRST, SECOND = "test_api_first", "test_api_second"
register_job_kind(FIRST)
register_job_kind(SECOND)


def result_url(job_id):
    return f"/api/v1/jobs/{job_id}/result"


def queue(kind, count=1, deadline=None, subject="api:1"):
    with transaction.atomic():
        return job_services.jobs_create(
            kind=kind,
            subject=subject,
            payloads=[{"task": f"{kind} case {n}", "intent": "x"} for n in range(count)],
            deadline=deadline,
        )


def assert_error(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"} and body["message"]
    if code:
        assert body["code"] == code


@pytest.fixture
def token(make_agent_token):
    return make_agent_token("evaluations:run")


def claim(api_client, token, **body):
    return api_client.post(CLAIM, {"worker": "agent-1", "lease_seconds": 60, **body}, token=token)


def test_a_claim_without_kinds_leases_the_oldest_job_of_any_kind(api_client, token):
    (first,) = queue(SECOND)
    (second,) = queue(FIRST)
    a = claim(api_client, token)
    b = claim(api_client, token)
    assert a.status_code == b.status_code == 200, (a.content, b.content)
    assert [(a.json()["id"], a.json()["kind"]), (b.json()["id"], b.json()["kind"])] == [
        (first.pk, SECOND),
        (second.pk, FIRST),
    ]
    job = a.json()
    assert job["payload"] == {"task": f"{SECOND} case 0", "intent": "x"}
    assert job["status"] == "leased" and job["lease_owner"] == "agent-1" and job["attempts"] == 1
    assert job["lease_expires_at"] and job["deadline"] is None
    assert claim(api_client, token).status_code == 204


def test_kinds_narrow_the_claim(api_client, token):
    (older,) = queue(FIRST)
    (newer,) = queue(SECOND)
    taken = claim(api_client, token, kinds=[SECOND])
    assert taken.status_code == 200 and taken.json()["id"] == newer.pk
    assert claim(api_client, token, kinds=[SECOND, SECOND]).status_code == 204
    assert claim(api_client, token, kinds=[SECOND, FIRST]).json()["id"] == older.pk


def test_the_default_offers_every_registered_kind():
    assert {FIRST, SECOND, "procedure_replay", "graph_evaluation"} <= set(registered_job_kinds())


def test_an_unknown_kind_is_422_and_leases_nothing(api_client, token):
    queue(FIRST)
    unknown = claim(api_client, token, kinds=[FIRST, "no_such_kind"])
    assert_error(unknown, 422, "unknown_kind")
    assert unknown.json()["details"]["errors"][0]["loc"] == ["body", "kinds", 1]
    assert FIRST in unknown.json()["details"]["known_kinds"]
    assert_error(claim(api_client, token, kinds=[]), 422, "invalid")
    assert_error(claim(api_client, token, kinds="procedure_replay"), 422, "invalid")
    assert_error(claim(api_client, token, lease_seconds=0), 422, "invalid")
    assert_error(claim(api_client, token, extra=1), 422, "invalid")
    assert not Job.objects.exclude(status=JobStatus.QUEUED).exists()


def test_claim_answers_204_when_nothing_is_open(api_client, token):
    response = claim(api_client, token)
    assert response.status_code == 204 and response.content == b""
    queue(FIRST, deadline=timezone.now() - timedelta(seconds=1))
    assert claim(api_client, token).status_code == 204


def test_an_answer_is_counted_once(api_client, token):
    queue(FIRST)
    job = claim(api_client, token).json()
    answer = {"run": run_item(source="mine", external_id="x")}
    first = api_client.post(result_url(job["id"]), answer, token=token)
    assert first.status_code == 201, first.content
    assert first.json()["job_id"] == job["id"] and first.json()["counted"] is True
    second = api_client.post(result_url(job["id"]), {"run": run_item(task="another answer")}, token=token)
    assert second.status_code == 200 and second.json() == {**first.json(), "counted": False}
    run = Run.objects.get()
    assert (run.source, run.external_id) == ("waymark-evaluation", f"job-{job['id']}")
    assert run.metadata["job"]["kind"] == FIRST
    assert Job.objects.get(pk=job["id"]).status == JobStatus.DONE


def test_closed_or_unknown_jobs_take_no_answer(api_client, token):
    (unclaimed,) = queue(FIRST, subject="a")
    closed = api_client.post(result_url(unclaimed.pk), {"run": run_item()}, token=token)
    assert_error(closed, 409, "job_closed")
    now = timezone.now()
    (overdue,) = queue(SECOND, deadline=now + timedelta(seconds=5), subject="b")
    job_services.job_claim(actor=Actor.system(), kind=SECOND, worker="w", lease_seconds=60, now=now)
    job_services.jobs_reap(now=now + timedelta(seconds=6))
    assert_error(api_client.post(result_url(overdue.pk), {"run": run_item()}, token=token), 409, "job_closed")
    assert_error(api_client.post(result_url(987654), {"run": run_item()}, token=token), 404, "not_found")
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"run": {"source": "a", "external_id": "b", "outcome": "great"}},
        {"run": {"steps": [{"tool": ""}]}},
        {"run": run_item(), "extra": 1},
        {"run": "not an object"},
        {},
    ],
)
def test_an_invalid_answer_writes_nothing(api_client, token, body):
    queue(FIRST)
    job = claim(api_client, token).json()
    events = AuditEvent.objects.count()
    assert_error(api_client.post(result_url(job["id"]), body, token=token), 422, "invalid")
    assert not Run.objects.exists() and not Step.objects.exists()
    assert Job.objects.get(pk=job["id"]).status == JobStatus.LEASED
    assert AuditEvent.objects.count() == events


def test_the_invalid_fields_are_named(api_client, token):
    queue(FIRST)
    job = claim(api_client, token).json()
    rejected = api_client.post(
        result_url(job["id"]), {"run": {"source": "a", "external_id": "b", "outcome": "x"}}, token=token
    )
    assert rejected.json()["details"]["errors"][0]["loc"][:3] == ["runs", 0, "outcome"]


def test_both_operations_need_a_token_with_the_scope(api_client, make_token, viewer, operator):
    (job,) = queue(FIRST)
    assert_error(api_client.post(CLAIM, {}), 401)
    assert_error(api_client.post(result_url(job.pk), {"run": run_item()}), 401)
    assert_error(api_client.post(CLAIM, {}, token="wm_not_a_token"), 401)
    lacking = make_token(operator, "trajectories:read", "procedures:read", "graphs:read")
    assert_error(api_client.post(CLAIM, {}, token=lacking), 403, "missing_scope")
    assert_error(api_client.post(result_url(job.pk), {"run": run_item()}, token=lacking), 403, "missing_scope")
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED and not Run.objects.exists()


def test_the_replay_endpoints_see_only_replay_jobs(api_client, token):
    """/api/v1/replays shares the implementation, restricted to procedure_replay jobs."""
    (job,) = queue(FIRST)
    assert api_client.post("/api/v1/replays/claim", {}, token=token).status_code == 204
    job_services.job_claim(actor=Actor.system(), kind=FIRST, worker="w", lease_seconds=60)
    answer = api_client.post(f"/api/v1/replays/{job.pk}/result", {"run": run_item()}, token=token)
    assert_error(answer, 404, "not_found")
    assert Job.objects.get(pk=job.pk).status == JobStatus.LEASED


def test_the_claim_service_takes_one_kind_or_several():
    (first,) = queue(FIRST)
    (second,) = queue(SECOND)
    agent = Actor.system()
    with pytest.raises(TypeError):
        job_services.job_claim(actor=agent, worker="w", lease_seconds=60)
    with pytest.raises(TypeError):
        job_services.job_claim(actor=agent, kind=FIRST, kinds=[SECOND], worker="w", lease_seconds=60)
    with pytest.raises(TypeError):
        job_services.job_claim(actor=agent, kinds=FIRST, worker="w", lease_seconds=60)
    assert job_services.job_claim(actor=agent, kinds=[], worker="w", lease_seconds=60) is None
    assert job_services.job_claim(actor=agent, kinds=[SECOND, FIRST], worker="w", lease_seconds=60).pk == first.pk
    assert job_services.job_claim(actor=agent, kind=SECOND, worker="w", lease_seconds=60).pk == second.pk


def queue_payloads(kind, *payloads, subject="api:match"):
    with transaction.atomic():
        return job_services.jobs_create(kind=kind, subject=subject, payloads=list(payloads))


def test_match_offers_only_jobs_whose_payload_holds_a_listed_value_for_every_key(api_client, token):
    mine, _, other_workspace, bare = queue_payloads(
        FIRST,
        {"intent": "refund request", "workspace": "support"},
        {"intent": "warranty claim", "workspace": "support"},
        {"intent": "refund request", "workspace": "lab"},
        {"task": "no intent at all"},
    )
    match = {"intent": ["refund request", "order status"], "workspace": ["support"]}
    assert claim(api_client, token, kinds=[FIRST], match=match).json()["id"] == mine.pk
    assert claim(api_client, token, kinds=[FIRST], match=match).status_code == 204
    assert claim(api_client, token, kinds=[FIRST], match={"intent": ["refund request"]}).json()["id"] == (
        other_workspace.pk
    )
    assert claim(api_client, token, kinds=[FIRST]).json()["id"] != bare.pk  # the warranty claim, oldest left
    assert Job.objects.get(pk=bare.pk).status == JobStatus.QUEUED


@pytest.mark.parametrize(
    "match",
    [
        {},
        {"intent": []},
        {"Intent": ["x"]},
        {"payload__intent": ["x"]},
        {"a__b": ["x"]},
        {"intent": [{"nested": 1}]},
        {f"k{n}": ["x"] for n in range(11)},
        {"intent": ["x"] * 101},
        {"intent": "refund request"},
    ],
)
def test_a_bad_match_is_refused_and_claims_nothing(api_client, token, match):
    queue_payloads(FIRST, {"intent": "x"})
    assert_error(claim(api_client, token, kinds=[FIRST], match=match), 422)
    assert not Job.objects.filter(status=JobStatus.LEASED).exists()
