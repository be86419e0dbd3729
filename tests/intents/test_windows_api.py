"""/api/v1/intents/windows: read analyses and drift reports with intents:read; operators analyse and compare with
intents:write; every refusal answers with the Error schema and writes nothing."""

from __future__ import annotations

import pytest

from accounts.services import Actor
from intents.models import DriftReport, WindowAnalysis
from intents.windows.services import window_analyze
from tests.intents.windows_helpers import (
    DAY,
    T0,
    chosen_embedder,  # noqa: F401 (fixture)
    window_of,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("chosen_embedder")]

BASE = "/api/v1/intents/windows"
BODY = {"start": "2025-03-01T00:00:00Z", "end": "2025-03-02T00:00:00Z"}


def is_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code is not None:
        assert body["code"] == code
    return body


@pytest.fixture
def analysis(operator):
    window_of("refund an order", "refund my order", "change a flight")
    return window_analyze(actor=Actor(user=operator), start=T0, end=T0 + DAY)


def test_a_reader_lists_and_reads_analyses(api_client, make_token, viewer, analysis):
    token = make_token(viewer, "intents:read")
    listed = api_client.get(BASE, token=token)
    assert listed.status_code == 200
    item = listed.json()["items"][0]
    assert item["id"] == analysis.pk and item["clusters_count"] == 2 and item["novelty_checked"] is False
    assert "clusters" not in item
    one = api_client.get(f"{BASE}/{analysis.pk}", token=token).json()
    assert [c["cluster_id"] for c in one["clusters"]] == [c["cluster_id"] for c in analysis.clusters]
    assert {c["support"] for c in one["clusters"]} == {1, 2}
    assert one["novelty"] == []


def test_lists_are_cursor_paginated(api_client, make_token, viewer, operator):
    for k in range(3):
        window_analyze(actor=Actor(user=operator), start=T0 + k * DAY, end=T0 + (k + 1) * DAY)
    token = make_token(viewer, "intents:read")
    first = api_client.get(f"{BASE}?limit=2", token=token).json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    second = api_client.get(f"{BASE}?limit=2&cursor={first['next_cursor']}", token=token).json()
    assert len(second["items"]) == 1 and second["next_cursor"] is None
    is_error(api_client.get(f"{BASE}?cursor=nonsense", token=token), 400, "bad_cursor")


def test_an_operator_analyses_a_window(api_client, make_token, operator):
    window_of("refund an order", "book a hotel")
    response = api_client.post(BASE, {**BODY, "threshold": 0.9}, token=make_token(operator, "intents:write"))
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["candidates_count"] == 2 and body["similarity_threshold"] == 0.9
    assert body["created_by"] == operator.username
    assert WindowAnalysis.objects.get().pk == body["id"]


def test_refusals_answer_with_the_error_schema_and_write_nothing(api_client, make_token, operator, viewer, agent):
    write = make_token(operator, "intents:write")
    is_error(api_client.get(BASE), 401, "unauthorized")
    is_error(api_client.get(BASE, token="wm_not_a_token"), 401)
    is_error(api_client.get(BASE, token=make_token(viewer, "graphs:read")), 403, "missing_scope")
    is_error(api_client.post(BASE, BODY, token=make_token(operator, "intents:read")), 403, "missing_scope")
    is_error(api_client.post(BASE, BODY, token=make_token(agent, "intents:write")), 403, "forbidden")
    is_error(api_client.post(BASE, {**BODY, "end": BODY["start"]}, token=write), 422, "invalid")
    is_error(api_client.post(BASE, {"start": "2025-03-01T00:00:00", "end": "2025-03-02T00:00:00"}, token=write), 422)
    is_error(api_client.post(BASE, {**BODY, "threshold": 2}, token=write), 422, "invalid")
    far = {"start": "0008-12-24T07:14:00-18:06", "end": "2025-03-02T00:00:00Z"}
    is_error(api_client.post(BASE, far, token=write), 422, "invalid")
    is_error(api_client.post(BASE, {**BODY, "surprise": 1}, token=write), 422, "invalid")
    is_error(api_client.post(BASE, raw="{not json", token=write), 400)
    is_error(api_client.get(f"{BASE}/999999", token=make_token(viewer, "intents:read")), 404, "not_found")
    is_error(api_client.get(f"{BASE}/drift/999999", token=make_token(viewer, "intents:read")), 404, "not_found")
    assert not WindowAnalysis.objects.exists()


def test_a_window_over_the_limit_is_422(api_client, make_token, operator, settings):
    settings.WAYMARK_INTENT_WINDOW_MAX_CANDIDATES = 1
    window_of("refund an order", "book a hotel")
    response = api_client.post(BASE, BODY, token=make_token(operator, "intents:write"))
    is_error(response, 422, "window_too_large")


def test_drift_is_stored_once_and_read_back(api_client, make_token, operator, viewer, analysis):
    write = make_token(operator, "intents:write")
    body = {"before": analysis.pk, "after": analysis.pk}
    created = api_client.post(f"{BASE}/drift", body, token=write)
    assert created.status_code == 201, created.content
    report = created.json()
    assert report["jsd"] == 0 and report["matching"] == "identity"
    assert len(report["changes"]) == 2 and report["retired"] == [] and report["new"] == []
    again = api_client.post(f"{BASE}/drift", body, token=write)
    assert again.status_code == 200 and again.json()["id"] == report["id"]
    read = make_token(viewer, "intents:read")
    listed = api_client.get(f"{BASE}/drift", token=read).json()
    assert [item["id"] for item in listed["items"]] == [report["id"]]
    assert api_client.get(f"{BASE}/drift/{report['id']}", token=read).json()["digest"] == report["digest"]


def test_drift_refusals(api_client, make_token, operator, agent, analysis):
    write = make_token(operator, "intents:write")
    is_error(api_client.post(f"{BASE}/drift", {"before": analysis.pk, "after": 999999}, token=write), 404)
    is_error(
        api_client.post(
            f"{BASE}/drift", {"before": analysis.pk, "after": analysis.pk, "matching": "fuzzy"}, token=write
        ),
        422,
    )
    is_error(
        api_client.post(
            f"{BASE}/drift", {"before": analysis.pk, "after": analysis.pk, "cluster_matches": {"x": "y"}}, token=write
        ),
        422,
        "invalid",
    )
    is_error(
        api_client.post(
            f"{BASE}/drift", {"before": analysis.pk, "after": analysis.pk}, token=make_token(agent, "intents:write")
        ),
        403,
        "forbidden",
    )
    assert not DriftReport.objects.exists()


def test_medoid_matching_is_recorded_on_the_report(api_client, make_token, operator, analysis):
    window_of("refund my order", "change my flight", at=T0 + DAY, run_prefix="demo:later")
    after = window_analyze(actor=Actor(user=operator), start=T0 + DAY, end=T0 + 2 * DAY)
    response = api_client.post(
        f"{BASE}/drift",
        {"before": analysis.pk, "after": after.pk, "matching": "medoid", "match_threshold": 0.9},
        token=make_token(operator, "intents:write"),
    )
    assert response.status_code == 201
    body = response.json()
    assert body["matching"] == "medoid" and body["match_threshold"] == 0.9
    assert len(body["changes"]) == 2 and all(change["similarity"] >= 0.9 for change in body["changes"])


def test_reads_take_a_fixed_number_of_queries(api_client, make_token, viewer, operator, django_assert_max_num_queries):
    for k in range(4):
        window_of("refund an order", "book a hotel", at=T0 + k * DAY, run_prefix=f"demo:q{k}")
        window_analyze(actor=Actor(user=operator), start=T0 + k * DAY, end=T0 + (k + 1) * DAY)
    token = make_token(viewer, "intents:read")
    with django_assert_max_num_queries(4):
        assert api_client.get(BASE, token=token).status_code == 200
