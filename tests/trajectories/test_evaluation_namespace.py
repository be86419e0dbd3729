"""The evaluation namespace is written only by the answer of a claimed job (issue 30, finding 1): the ingest API, OTLP
and the importer refuse a "waymark-" source and the job protocol's "job-<digits>" ids, naming them, and write
nothing; a run that holds a job's identity without being its answer is never counted; the answer and the job's
closing are one transaction."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client

from accounts.models import AuditEvent
from accounts.services import Actor
from otlp.models import Trace
from tests.otlp.agents import OTLP_PATH, genai_agent, protobuf_body
from trajectories import job_services, services
from trajectories.choices import EVALUATION_SOURCE
from trajectories.jobs import register_job_kind
from trajectories.models import Job, JobStatus, Run, RunTotal

from .factories import run_item

pytestmark = pytest.mark.django_db
KIND = "test_namespace"
register_job_kind(KIND)
INGEST = "/api/v1/trajectories"


@pytest.fixture
def writer(make_agent_token):
    return make_agent_token("trajectories:write")


def refused(api_client, token, *items):
    response = api_client.post(INGEST, {"runs": list(items)}, token=token)
    assert response.status_code == 422, response.content
    return [(error["loc"], error["type"]) for error in response.json()["details"]["errors"]]


@pytest.mark.parametrize(
    "source",
    [
        "waymark-evaluation",
        "  waymark-evaluation  ",  # stripped before it is stored
        "Waymark-Evaluation",
        "WAYMARK-anything",
        "ｗａｙｍａｒｋ-evaluation",  # full-width letters
        "waymark‐evaluation",  # U+2010 hyphen
        "waymark－evaluation",  # full-width hyphen-minus
    ],
)
def test_the_ingest_refuses_every_spelling_of_a_waymark_source(api_client, writer, source):
    assert refused(api_client, writer, run_item(source=source)) == [(["runs", 0, "source"], "reserved_source")]
    assert not Run.objects.exists()


@pytest.mark.parametrize("external_id", ["job-1", "job-000", "JOB-77", "job-１２", " job-5 "])
def test_the_ingest_refuses_the_job_protocols_id_shape_under_any_source(api_client, writer, external_id):
    errors = refused(api_client, writer, run_item(source="my-agent", external_id=external_id))
    assert errors == [(["runs", 0, "external_id"], "reserved_external_id")]


@pytest.mark.parametrize("source,external_id", [("my-waymark-agent", "job-1a"), ("waymark", "jobs-1"), ("w", "job-")])
def test_names_that_only_resemble_the_namespace_are_accepted(api_client, writer, source, external_id):
    response = api_client.post(INGEST, {"runs": [run_item(source=source, external_id=external_id)]}, token=writer)
    assert response.status_code == 201, response.content


def test_one_reserved_run_refuses_the_whole_batch_and_the_message_names_it(api_client, writer):
    response = api_client.post(
        INGEST, {"runs": [run_item(), run_item(source=EVALUATION_SOURCE, external_id="job-3")]}, token=writer
    )
    assert response.status_code == 422
    errors = response.json()["details"]["errors"]
    assert [e["loc"] for e in errors] == [["runs", 1, "source"], ["runs", 1, "external_id"]]
    assert "'waymark-evaluation' is reserved" in errors[0]["msg"] and "/api/v1/jobs/{id}/result" in errors[0]["msg"]
    assert not Run.objects.exists() and not RunTotal.objects.exists()
    assert not AuditEvent.objects.filter(verb="trajectories.ingest").exists()


def test_otlp_refuses_a_waymark_service_name_and_stores_no_run(make_agent_token):
    token = make_agent_token("trajectories:write")
    body = protobuf_body(genai_agent(service=EVALUATION_SOURCE))
    response = Client().generic(
        "POST", OTLP_PATH, body, content_type="application/x-protobuf", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.content  # OTLP's partial success: the spans are rejected
    assert not Run.objects.exists()
    assert Trace.objects.get().status == "discarded"


def test_the_importer_refuses_a_file_holding_evaluation_runs(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(
        json.dumps(run_item()) + "\n" + json.dumps(run_item(source=EVALUATION_SOURCE, external_id="run-9")) + "\n"
    )
    with pytest.raises(CommandError, match=r"runs\[1\]\.source: the source 'waymark-evaluation' is reserved"):
        call_command("import_trajectories", str(path), "--format", "jsonl")
    assert not Run.objects.exists()
    call_command("import_trajectories", str(path), "--format", "jsonl", "--source", "imported", stdout=io.StringIO())
    assert Run.objects.filter(source="imported").count() == 2


def queued_and_claimed(actor: Actor) -> Job:
    with transaction.atomic():
        job_services.jobs_create(kind=KIND, subject="ns:1", payloads=[{"task": "t"}])
    return job_services.job_claim(actor=actor, kind=KIND, worker="w", lease_seconds=60)


def test_a_run_stored_under_a_jobs_name_outside_the_protocol_is_never_counted(api_client, make_agent_token):
    token = make_agent_token("evaluations:run")
    with transaction.atomic():
        (job,) = job_services.jobs_create(kind=KIND, subject="ns:1", payloads=[{"task": "t"}])
    # A run left by an older release that did not refuse the namespace (written here behind the services' back).
    planted = Run.objects.create(source=EVALUATION_SOURCE, external_id=f"job-{job.pk}", outcome="success")
    assert api_client.post("/api/v1/jobs/claim", {"kinds": [KIND]}, token=token).json()["id"] == job.pk
    response = api_client.post(f"/api/v1/jobs/{job.pk}/result", {"run": run_item(outcome="failure")}, token=token)
    assert response.status_code == 409 and response.json()["code"] == "answer_taken", response.content
    job.refresh_from_db()
    assert job.status == JobStatus.LEASED and job.result_run_id is None
    assert Run.objects.filter(source=EVALUATION_SOURCE).get() == planted
    assert job_services.answering_agents("ns:1") == []


def test_the_answer_and_the_jobs_closing_are_one_transaction(monkeypatch):
    job = queued_and_claimed(Actor.system())

    def audit_fails(*args, **kwargs):
        if kwargs.get("verb") == "job.answer":
            raise RuntimeError("the database went away")
        return real_audit(*args, **kwargs)

    real_audit = job_services.audit_record
    monkeypatch.setattr(job_services, "audit_record", audit_fails)
    with pytest.raises(RuntimeError):
        job_services.job_complete(job=job, run_items=[run_item()])
    assert not Run.objects.exists(), "the answer's run outlived its job's closing"
    assert Job.objects.get(pk=job.pk).status == JobStatus.LEASED
    monkeypatch.undo()
    answer = job_services.job_complete(job=job, run_items=[run_item()])
    assert answer.counted and Run.objects.get().pk == answer.run_id


def test_the_answer_writer_stores_nothing_but_a_job_answers_identity():
    with transaction.atomic(), pytest.raises(ValueError, match="stored under"):
        services.run_record_job_answer(actor=Actor.system(), run=services.validate_job_answer(run_item()))


@pytest.mark.parametrize("field", ["intent", "graph_workspace", "graph_revision"])
def test_names_shown_as_ids_refuse_direction_changing_characters(api_client, writer, field):
    assert refused(api_client, writer, run_item(**{field: "refund\u202etseuqer"})) == [
        (["runs", 0, field], "value_error")
    ]
    ok = api_client.post(INGEST, {"runs": [run_item(**{field: "refund request"})]}, token=writer)
    assert ok.status_code == 201
