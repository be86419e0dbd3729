"""/api/v1/intents with every refusal: scopes, bad items (named), dimension mismatches, conflicts; nothing partial."""

from __future__ import annotations

import json

import pytest

from accounts.models import AuditEvent
from intents.models import Embedding, IntentCandidateRecord
from tests.intents.helpers import intent_row, stored_runs, tid

pytestmark = pytest.mark.django_db

CANDIDATES = "/api/v1/intents/candidates"
VECTORS = "/api/v1/intents/vectors"


@pytest.fixture
def writer(agent, make_token):
    """An agent identity's token: agents post their own labels (a person without a role only reads)."""
    return make_token(agent, "intents:write", "intents:read")


def assert_error(response, status: int, code: str | None = None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code:
        assert body["code"] == code
    return body


def test_reading_and_writing_need_a_token_with_the_scope(api_client, viewer, make_token):
    assert_error(api_client.get(CANDIDATES), 401, "unauthorized")
    wrong = make_token(viewer, "trajectories:read")
    assert_error(api_client.get(CANDIDATES, token=wrong), 403, "missing_scope")
    reader = make_token(viewer, "intents:read")
    assert_error(api_client.post(CANDIDATES, {"intents": []}, token=reader), 403, "missing_scope")
    assert_error(api_client.post(VECTORS, {"embedder": "x", "items": []}, token=reader), 403, "missing_scope")


def test_a_client_posts_its_own_intents_and_reads_them_back(api_client, agent, writer):
    first, second = stored_runs(2)
    rows = [
        intent_row(first, "Refund an order", kind="declared"),
        {**intent_row(second, "refund an order"), "evidence": [{"trajectory_id": tid(second), "start": "0", "end": 1}]},
    ]
    response = api_client.post(CANDIDATES, {"intents": rows}, token=writer)
    assert response.status_code == 201, response.content
    body = response.json()
    assert len(body["created"]) == 2 and body["existing"] == []
    item = body["items"][0]
    assert item["source"] == "client" and item["submitted_by"] == agent.username
    assert item["evidence"] == [{"run_id": first.pk, "trajectory_id": tid(first), "start": 0, "end": 1}]
    again = api_client.post(CANDIDATES, {"intents": rows}, token=writer).json()
    assert again["created"] == [] and sorted(again["existing"]) == sorted(body["created"])
    assert IntentCandidateRecord.objects.count() == 2
    assert Embedding.objects.filter(embedder="test-embedder-v1").count() == 2
    assert AuditEvent.objects.filter(verb="intent_candidates.submit").count() == 2
    listed = api_client.get(CANDIDATES + "?limit=1", token=writer).json()
    assert len(listed["items"]) == 1 and listed["next_cursor"]
    rest = api_client.get(f"{CANDIDATES}?limit=1&cursor={listed['next_cursor']}", token=writer).json()
    assert rest["next_cursor"] is None and rest["items"][0]["candidate_id"] != listed["items"][0]["candidate_id"]
    filtered = api_client.get(CANDIDATES + "?kind=declared", token=writer).json()
    assert [item["kind"] for item in filtered["items"]] == ["declared"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"intent": "  ", "evidence": "E"}, "trajectory intent is required"),
        ({"intent": "x", "kind": "Declared", "evidence": "E"}, "kind is invalid"),
        ({"intent": "x", "evidence": []}, "non-empty list"),
        ({"intent": "x", "evidence": ["a"]}, "must be objects"),
        ({"intent": "x", "evidence": [{"trajectory_id": "nope:1", "start": 0, "end": 0}]}, "unknown trajectory"),
        ({"intent": "x", "evidence": [{"trajectory_id": "T", "start": 0}]}, "must be integers"),
        ({"intent": "x", "evidence": [{"trajectory_id": "T", "start": 0, "end": 5}]}, "outside the trajectory"),
        ({"intent": "x", "evidence": "E", "limitations": [1]}, "limitations must be strings"),
        ({"intent": "x", "evidence": "E", "confidence": 0.9}, "unknown fields: confidence"),
    ],
)
def test_a_bad_item_is_named_and_nothing_is_written(api_client, writer, bad, message):
    (stored,) = stored_runs(1)
    good_evidence = [{"trajectory_id": tid(stored), "start": 0, "end": 1}]
    item = dict(bad)
    if item.get("evidence") == "E":
        item["evidence"] = good_evidence
    for evidence in item.get("evidence", []) if isinstance(item.get("evidence"), list) else []:
        if isinstance(evidence, dict) and evidence.get("trajectory_id") == "T":
            evidence["trajectory_id"] = tid(stored)
    rows = [intent_row(stored, "fine"), item]
    body = assert_error(api_client.post(CANDIDATES, {"intents": rows}, token=writer), 422, "invalid")
    assert message in body["message"] and body["details"]["index"] == 1
    assert not IntentCandidateRecord.objects.exists() and not Embedding.objects.exists()


def test_the_body_shape_is_checked(api_client, writer):
    assert_error(api_client.post(CANDIDATES, {"intents": []}, token=writer), 422)
    assert_error(api_client.post(CANDIDATES, {"intents": [{}], "extra": 1}, token=writer), 422)
    assert_error(api_client.post(CANDIDATES, raw="{not json", token=writer), 400)
    assert_error(api_client.get(CANDIDATES + "?cursor=zzz", token=writer), 400, "bad_cursor")
    assert_error(api_client.get(CANDIDATES + "?kind=other", token=writer), 422)


def test_a_client_posts_vectors_once_per_text(api_client, agent, writer):
    items = [{"text": "refund an order", "vector": [0.1, 0.2, 0.3]}, {"text": "cancel", "vector": [1, 0, 0]}]
    response = api_client.post(VECTORS, {"embedder": "mini-lm.v2", "items": items}, token=writer)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body == {"embedder": f"client:{agent.pk}:mini-lm.v2", "dimensions": 3, "created": 2, "existing": 0}
    again = api_client.post(VECTORS, {"embedder": "mini-lm.v2", "items": items[:1]}, token=writer).json()
    assert (again["created"], again["existing"]) == (0, 1)
    stored = Embedding.objects.get(embedder=body["embedder"], text="refund an order")
    assert stored.as_array().tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert stored.submitted_by == agent


def test_vectors_refusals_write_nothing(api_client, writer):
    def post(embedder, items):
        return api_client.post(VECTORS, {"embedder": embedder, "items": items}, token=writer)

    assert post("m", [{"text": "a", "vector": [1, 2]}]).status_code == 201
    body = assert_error(post("m", [{"text": "b", "vector": [1, 2, 3]}]), 422, "invalid")
    assert "2-dimensional" in body["message"]
    body = assert_error(post("n", [{"text": "a", "vector": [1, 2]}, {"text": "b", "vector": [1]}]), 422)
    assert body["details"]["index"] == 1
    assert_error(post("n", [{"text": "a", "vector": [0, 0]}]), 422)
    assert_error(post("n", [{"text": "a", "vector": [1e300, 1]}]), 422)
    assert_error(post("bad name!", [{"text": "a", "vector": [1]}]), 422)
    assert_error(post("n", [{"text": "  ", "vector": [1]}]), 422)
    body = assert_error(post("n", [{"text": "a\x00b", "vector": [1, 2]}]), 422)  # PostgreSQL text cannot hold NUL
    assert "NUL" in json.dumps(body)
    assert_error(post("n", [{"text": "a", "vector": [1]}, {"text": "a", "vector": [2]}]), 422)
    assert_error(post("n", [{"text": "a", "vector": ["x"]}]), 422)
    assert_error(post("n", []), 422)
    body = assert_error(post("m", [{"text": "c", "vector": [1, 1]}, {"text": "a", "vector": [9, 9]}]), 409)
    assert body["code"] == "vector_conflict" and body["details"]["index"] == 1
    assert Embedding.objects.count() == 1


def test_two_clients_never_share_an_embedder_space(api_client, agent, reviewer, make_token):
    one = make_token(agent, "intents:write")
    two = make_token(reviewer, "intents:write")
    first = api_client.post(VECTORS, {"embedder": "m", "items": [{"text": "a", "vector": [1, 2]}]}, token=one)
    assert first.status_code == 201
    response = api_client.post(VECTORS, {"embedder": "m", "items": [{"text": "a", "vector": [3, 4, 5]}]}, token=two)
    assert response.status_code == 201
    assert Embedding.objects.count() == 2


def test_the_openapi_document_lists_the_intents_operations(api_client):
    paths = api_client.get("/api/v1/openapi.json").json()["paths"]
    assert {"get", "post"} <= set(paths["/api/v1/intents/candidates"])
    assert "post" in paths["/api/v1/intents/vectors"]


def test_a_read_only_teammate_posts_no_labels_nor_vectors(api_client, viewer, make_token):
    """Issue 24: the read-only role writes nothing; intents:write is for agents, reviewers and operators."""
    from accounts.roles import RoleRequired
    from accounts.services import Actor
    from intents.services import intent_candidates_submit, intent_vectors_submit

    with pytest.raises(ValueError, match="intents:write needs the reviewer or operator role or an agent identity"):
        make_token(viewer, "intents:write")
    (run,) = stored_runs(1)
    for call in (
        lambda: intent_candidates_submit(actor=Actor(user=viewer), rows=[intent_row(run, "Refund an order")]),
        lambda: intent_vectors_submit(actor=Actor(user=viewer), embedder="m", items=[{"text": "a", "vector": [1]}]),
    ):
        with pytest.raises(RoleRequired) as refused:
            call()
        assert refused.value.status == 403
    assert not IntentCandidateRecord.objects.exists() and not Embedding.objects.exists()


def test_an_evaluation_run_is_no_evidence(api_client, writer):
    """A client's labels must cite production runs: a live replay's run is unknown here."""
    from trajectories.choices import EVALUATION_SOURCE

    (replayed,) = stored_runs(1, source=EVALUATION_SOURCE, external_id="job-1")
    body = assert_error(
        api_client.post(CANDIDATES, {"intents": [intent_row(replayed, "Refund an order")]}, token=writer), 422
    )
    assert "unknown trajectory" in body["message"]
    assert not IntentCandidateRecord.objects.exists()
