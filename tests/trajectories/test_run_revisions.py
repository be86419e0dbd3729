"""Runs say what they ran under (issue 27, item 2): the ingest stores the procedure version's content revision a run
followed beside its graph workspace and revision, by either writer; the runs API returns it and the run page shows
it; a revision the ingest cannot store as an identifier is refused naming the field, and nothing of the batch is
written."""

import hashlib

import pytest
from django.urls import reverse

from accounts.models import AuditEvent
from tests.conftest import logged_in
from trajectories import services
from trajectories.models import Run, Step
from trajectories.schemas import RunIn
from trajectories.selectors import run_as_item

from .factories import ingest, run_item

pytestmark = pytest.mark.django_db
URL = "/api/v1/trajectories"
PROCEDURE_REVISION = hashlib.sha256(b"refund_request v3").hexdigest()
GRAPH_DIGEST = hashlib.sha256(b"support graph #4").hexdigest()


@pytest.fixture
def writer(make_agent_token):
    return make_agent_token("trajectories:write", "trajectories:read")


def under_both(**overrides):
    return run_item(
        graph_workspace="support", graph_revision=GRAPH_DIGEST, procedure_revision=PROCEDURE_REVISION, **overrides
    )


def test_the_ingest_stores_the_procedure_revision_and_the_api_returns_it(api_client, writer):
    response = api_client.post(
        URL, {"runs": [under_both(external_id="pinned"), run_item(external_id="bare")]}, token=writer
    )
    assert response.status_code == 201, response.content
    pinned = Run.objects.get(external_id="pinned")
    assert (pinned.graph_workspace, pinned.graph_revision, pinned.procedure_revision) == (
        "support",
        GRAPH_DIGEST,
        PROCEDURE_REVISION,
    )
    assert Run.objects.get(external_id="bare").procedure_revision == ""

    detail = api_client.get(f"{URL}/{pinned.pk}", token=writer).json()
    assert (detail["graph_revision"], detail["procedure_revision"]) == (GRAPH_DIGEST, PROCEDURE_REVISION)
    listed = {item["external_id"]: item for item in api_client.get(URL, token=writer).json()["items"]}
    assert listed["pinned"]["procedure_revision"] == PROCEDURE_REVISION and listed["bare"]["procedure_revision"] == ""


def test_the_revision_is_stripped_like_the_graph_revision():
    (run_id,) = ingest(run_item(procedure_revision=f"  {PROCEDURE_REVISION}\n", graph_revision=" r1 ")).created_ids
    stored = Run.objects.get(pk=run_id)
    assert (stored.procedure_revision, stored.graph_revision) == (PROCEDURE_REVISION, "r1")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x" * 101, "at most 100 characters"),
        ("abc\u200bdef", "invisible"),
        ("abc\u202edef", ""),
        ("abc\x00def", ""),
        (5, "string"),
        (["abc"], "string"),
    ],
)
def test_a_bad_procedure_revision_answers_422_naming_the_field_and_writes_nothing(api_client, writer, value, message):
    runs = [under_both(), run_item(procedure_revision=value)]
    response = api_client.post(URL, {"runs": runs}, token=writer)
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["code"] == "invalid"
    (error,) = body["details"]["errors"]
    assert error["loc"] == ["runs", 1, "procedure_revision"]
    assert message.lower() in error["msg"].lower()
    assert not Run.objects.exists() and not Step.objects.exists()
    assert not AuditEvent.objects.filter(verb="trajectories.ingest").exists()


@pytest.mark.postgres
@pytest.mark.parametrize("writer_path", ["copy", "orm"])
def test_both_writers_store_the_procedure_revision(monkeypatch, writer_path):
    calls = []
    real = services.copy_ingest.insert_runs

    def spy(**kwargs):
        calls.append(kwargs["run_columns"])
        return real(**kwargs)

    monkeypatch.setattr(services, "_uses_copy", lambda: writer_path == "copy")
    monkeypatch.setattr(services.copy_ingest, "insert_runs", spy)
    ingest(under_both(external_id="a"), run_item(external_id="b"))

    assert bool(calls) == (writer_path == "copy")
    assert all("procedure_revision" in columns for columns in calls)
    stored = dict(Run.objects.values_list("external_id", "procedure_revision"))
    assert stored == {"a": PROCEDURE_REVISION, "b": ""}


def test_a_stored_run_in_the_ingest_format_keeps_its_revisions():
    (run_id,) = ingest(under_both()).created_ids
    item = run_as_item(Run.objects.prefetch_related("steps").get(pk=run_id))
    assert (item["graph_revision"], item["procedure_revision"]) == (GRAPH_DIGEST, PROCEDURE_REVISION)
    assert RunIn.model_validate(item).procedure_revision == PROCEDURE_REVISION


def test_the_run_page_shows_the_procedure_revision_beside_the_graph_revision(viewer):
    (pinned,) = ingest(under_both()).created_ids
    (bare,) = ingest(run_item()).created_ids
    content = logged_in(viewer).get(reverse("trajectories:detail", args=[pinned])).content.decode()
    graph_at = content.index(f"<code>{GRAPH_DIGEST}</code>")
    procedure_at = content.index(f"<dt>Procedure</dt><dd>revision <code>{PROCEDURE_REVISION}</code></dd>")
    assert graph_at < procedure_at < content.index("<dt>Started</dt>")

    content = logged_in(viewer).get(reverse("trajectories:detail", args=[bare])).content.decode()
    assert "<dt>Procedure</dt><dd>–</dd>" in content


def test_a_revision_written_without_naming_the_column_is_empty():
    """The column has a database default: writers that name their columns (the benchmarks' COPY) need not know it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO trajectories_run (source, external_id, task, intent, outcome, graph_workspace, graph_revision,"
            " metadata, created_at, step_count, total_tokens, cost, tools, search_document)"
            " VALUES ('raw', 'r-1', '', '', 'unknown', '', '', '{}', CURRENT_TIMESTAMP, 0, 0, 0, '[]', '')"
        )
    assert Run.objects.get(source="raw").procedure_revision == ""
