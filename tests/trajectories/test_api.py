"""/api/v1/trajectories: every status of ingest, list and detail, for an owner, a reader and an outsider."""

import json

import pytest

from accounts.models import AuditEvent
from trajectories.models import Run, Step

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.django_db
URL = "/api/v1/trajectories"


@pytest.fixture
def writer(make_agent_token):
    return make_agent_token("trajectories:write", "trajectories:read")


@pytest.fixture
def reader(viewer, make_token):
    return make_token(viewer, "trajectories:read")


def assert_error(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code:
        assert body["code"] == code
    return body


def test_it_ingests_a_batch_and_answers_201(api_client, writer):
    response = api_client.post(URL, {"runs": [run_item(), run_item()]}, token=writer)
    assert response.status_code == 201
    body = response.json()
    assert body["created"] == 2 and body["existing"] == 0 and len(body["created_ids"]) == 2
    assert Run.objects.count() == 2 and Step.objects.count() == 4
    event = AuditEvent.objects.get(verb="trajectories.ingest")
    assert event.actor_token is not None


def test_resending_a_batch_answers_200_and_creates_nothing(api_client, writer):
    batch = {"runs": [run_item(), run_item()]}
    first = api_client.post(URL, batch, token=writer).json()
    response = api_client.post(URL, batch, token=writer)
    assert response.status_code == 200
    assert response.json() == {"created": 0, "existing": 2, "created_ids": [], "existing_ids": first["created_ids"]}
    assert Run.objects.count() == 2 and AuditEvent.objects.filter(verb="trajectories.ingest").count() == 1


@pytest.mark.parametrize("raw", ["{not json", "", '{"runs": [NaN]}', "\xff"])
def test_malformed_json_answers_400_and_writes_nothing(api_client, writer, raw):
    assert_error(api_client.post(URL, raw=raw.encode("latin-1"), token=writer), 400, "malformed_json")
    assert Run.objects.count() == 0


def test_a_schema_violation_answers_422_naming_index_and_field(api_client, writer):
    runs = [run_item(), run_item(), run_item(), run_item(steps=[{"arguments": {}}])]
    body = assert_error(api_client.post(URL, {"runs": runs}, token=writer), 422, "invalid")
    assert body["details"]["errors"][0]["loc"] == ["runs", 3, "steps", 0, "tool"]
    assert body["details"]["errors"][0]["msg"]
    assert Run.objects.count() == 0 and Step.objects.count() == 0


@pytest.mark.parametrize(
    ("payload", "loc"),
    [
        ([], []),
        ({"runs": {}}, ["runs"]),
        ({"runs": [], "extra": 1}, ["extra"]),
        ({"runs": [run_item(extra_field=1)]}, ["runs", 0, "extra_field"]),
        ({"runs": [run_item(steps=[step_item(cost=-1)])]}, ["runs", 0, "steps", 0, "cost"]),
    ],
)
def test_other_shape_errors_answer_422(api_client, writer, payload, loc):
    body = assert_error(api_client.post(URL, payload, token=writer), 422, "invalid")
    assert body["details"]["errors"][0]["loc"] == loc


def test_too_many_runs_answers_422(api_client, writer, settings):
    settings.WAYMARK_INGEST_MAX_RUNS = 2
    body = assert_error(api_client.post(URL, {"runs": [run_item() for _ in range(3)]}, token=writer), 422)
    assert body["details"]["errors"][0]["loc"] == ["runs"]
    assert Run.objects.count() == 0


def test_an_oversized_body_answers_413_and_writes_nothing(api_client, writer, settings):
    settings.WAYMARK_INGEST_MAX_BYTES = 2000
    batch = {"runs": [run_item(task="t" * 3000)]}
    body = assert_error(api_client.post(URL, batch, token=writer), 413, "payload_too_large")
    assert body["details"] == {"max_bytes": 2000}
    assert Run.objects.count() == 0


def test_a_declared_content_length_over_the_limit_answers_413(api_client, writer, settings):
    settings.WAYMARK_INGEST_MAX_BYTES = 100
    response = api_client.client.generic(
        "POST",
        URL,
        b'{"runs": []}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {writer}"},
        CONTENT_LENGTH="5000",
    )
    assert_error(response, 413)


def test_an_empty_batch_answers_200(api_client, writer):
    response = api_client.post(URL, {"runs": []}, token=writer)
    assert response.status_code == 200 and response.json()["created"] == 0


@pytest.mark.parametrize("token", [None, "wm_nope_nothing", "garbage"])
def test_ingest_without_a_valid_token_answers_401(api_client, token):
    assert_error(api_client.post(URL, {"runs": [run_item()]}, token=token), 401, "unauthorized")
    assert Run.objects.count() == 0


def test_ingest_with_a_read_only_token_answers_403(api_client, reader):
    assert_error(api_client.post(URL, {"runs": [run_item()]}, token=reader), 403)
    assert Run.objects.count() == 0


def test_a_deactivated_users_token_answers_401(api_client, make_token):
    from accounts.services import Actor, agent_create

    user = agent_create(actor=Actor.system(), name="leaver")
    token = make_token(user, "trajectories:write", "trajectories:read")
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert_error(api_client.post(URL, {"runs": [run_item()]}, token=token), 401)
    assert_error(api_client.get(URL, token=token), 401)


def test_a_reader_lists_runs_newest_first_with_cursor_pages(api_client, reader):
    ids = ingest(*[run_item() for _ in range(5)]).created_ids
    first = api_client.get(f"{URL}?limit=2", token=reader).json()
    assert [r["id"] for r in first["items"]] == ids[::-1][:2]
    second = api_client.get(f"{URL}?limit=2&cursor={first['next_cursor']}", token=reader).json()
    third = api_client.get(f"{URL}?limit=2&cursor={second['next_cursor']}", token=reader).json()
    assert [r["id"] for r in second["items"] + third["items"]] == ids[::-1][2:]
    assert third["next_cursor"] is None


def test_list_filters(api_client, reader):
    ingest(
        run_item(external_id="a", outcome="failure", task="Refund the blue shoes", intent="refund_request"),
        run_item(external_id="b", source="other", intent="cancel_order", steps=[step_item("cancel_order")]),
        run_item(external_id="c", steps=[step_item("notify")]),
    )

    def external_ids(query):
        response = api_client.get(f"{URL}?{query}", token=reader)
        assert response.status_code == 200, response.content
        return sorted(r["external_id"] for r in response.json()["items"])

    assert external_ids("outcome=failure") == ["a"]
    assert external_ids("source=other") == ["b"]
    assert external_ids("intent=cancel_order") == ["b"]
    assert external_ids("tool=notify") == ["c"]
    assert external_ids("tool=%20Cancel_Order") == ["b"]  # the filter is normalized like stored tool names
    assert external_ids("tool=issue_refund") == ["a"]
    assert external_ids("q=blue%20SHOES") == ["a"]
    assert external_ids("outcome=success&source=test-agent") == ["c"]


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "outcome=won", "limit=many"])
def test_bad_list_parameters_answer_422(api_client, reader, query):
    assert_error(api_client.get(f"{URL}?{query}", token=reader), 422)


@pytest.mark.parametrize("cursor", ["nonsense", "cnVuOng", "!!"])
def test_a_cursor_we_did_not_issue_answers_400(api_client, reader, cursor):
    assert_error(api_client.get(f"{URL}?cursor={cursor}", token=reader), 400, "bad_cursor")


def test_reading_needs_the_read_scope(api_client, make_agent_token):
    token = make_agent_token("trajectories:write")
    assert_error(api_client.get(URL, token=token), 403)
    assert_error(api_client.get(f"{URL}/1", token=token), 403)
    assert_error(api_client.get(URL), 401)
    assert_error(api_client.get(f"{URL}/1"), 401)


@pytest.mark.parametrize("who", ["writer", "reader"])
def test_owner_and_reader_open_a_run_with_its_steps(request, api_client, who):
    reader = request.getfixturevalue(who)
    run_id = ingest(run_item(steps=[step_item("lookup_policy"), step_item("issue_refund", ok=False)])).created_ids[0]
    response = api_client.get(f"{URL}/{run_id}", token=reader)
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == run_id and body["metadata"] == {"model": "demo"}
    assert [(s["ordinal"], s["tool"], s["ok"]) for s in body["steps"]] == [
        (0, "lookup_policy", True),
        (1, "issue_refund", False),
    ]


@pytest.mark.parametrize("run_id", ["999999", "99999999999999999999999"])
def test_an_unknown_run_answers_404(api_client, reader, run_id):
    assert_error(api_client.get(f"{URL}/{run_id}", token=reader), 404, "not_found")


@pytest.mark.parametrize("size", [3, 30])
def test_list_and_detail_cost_a_fixed_number_of_queries(api_client, reader, django_assert_max_num_queries, size):
    ids = ingest(*[run_item() for _ in range(size)]).created_ids
    with django_assert_max_num_queries(3):  # token, (last-used update), runs
        assert len(api_client.get(f"{URL}?limit=200", token=reader).json()["items"]) == size
    with django_assert_max_num_queries(3):  # token, run, steps
        assert api_client.get(f"{URL}/{ids[0]}", token=reader).status_code == 200


@pytest.mark.parametrize("size", [3, 30])
def test_ingest_costs_a_fixed_number_of_queries(api_client, writer, django_assert_max_num_queries, size):
    with django_assert_max_num_queries(10):
        assert api_client.post(URL, {"runs": [run_item() for _ in range(size)]}, token=writer).status_code == 201


def test_the_openapi_contract_documents_the_ingest_body_and_statuses(api_client):
    schema = api_client.get("/api/v1/openapi.json").json()
    post = schema["paths"]["/api/v1/trajectories"]["post"]
    body_schema = post["requestBody"]["content"]["application/json"]["schema"]
    assert "runs" in body_schema["properties"] and "$defs" not in json.dumps(body_schema)
    assert {"200", "201", "400", "401", "403", "413", "422"} <= set(post["responses"])
    detail = schema["paths"]["/api/v1/trajectories/{run_id}"]["get"]
    assert {"200", "401", "403", "404"} <= set(detail["responses"])


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        ('{"runs": [{"source": "s", "external_id": "e", "task": "a\\u0000b"}]}', ["runs", 0, "task"]),
        ('{"runs": [{"source": "s", "external_id": "e", "metadata": {"k": 1e400}}]}', ["runs", 0, "metadata"]),
        ('{"runs": [{"source": "s", "external_id": "e", "metadata": {"k\\u0000": 1}}]}', ["runs", 0, "metadata"]),
        (
            '{"runs": [{"source": "s", "external_id": "e", "started_at": "0001-01-01T00:00:00+01:00"}]}',
            ["runs", 0, "started_at"],
        ),
        (
            '{"runs": [{"source": "s", "external_id": "e", "metadata": ' + "[" * 40 + "]" * 40 + "}]}",
            ["runs", 0, "metadata"],
        ),
    ],
)
def test_values_the_database_cannot_hold_answer_422_not_500(api_client, writer, raw, loc):
    body = assert_error(api_client.post(URL, raw=raw.encode(), token=writer), 422)
    assert body["details"]["errors"][0]["loc"] == loc
    assert Run.objects.count() == 0


def test_json_nested_beyond_the_parser_answers_400(api_client, writer):
    raw = '{"runs": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert_error(api_client.post(URL, raw=raw.encode(), token=writer), 400, "malformed_json")


@pytest.mark.parametrize("query", ["source=%00", "q=a%00b", "cursor=%00"])
def test_nul_characters_in_list_parameters_answer_422(api_client, reader, query):
    assert_error(api_client.get(f"{URL}?{query}", token=reader), 422)


def test_any_utc_offset_is_accepted_and_stored_in_utc(api_client, writer):
    """ISO 8601 allows offsets PostgreSQL refuses (beyond ±15:59); times are converted to UTC before storage."""
    raw = '{"runs": [{"source": "s", "external_id": "e", "started_at": "4542-03-21T23:19:58+23:20"}]}'
    response = api_client.post(URL, raw=raw.encode(), token=writer)
    assert response.status_code == 201, response.content
    started = Run.objects.get().started_at
    assert started.utcoffset().total_seconds() == 0
    assert started.isoformat() == "4542-03-20T23:59:58+00:00"


def test_a_cursor_with_non_ascii_digits_answers_400(api_client, reader):
    import base64

    odd = base64.urlsafe_b64encode("run:²".encode()).decode().rstrip("=")
    response = api_client.get(f"{URL}?cursor={odd}", token=reader)
    assert response.status_code == 400
