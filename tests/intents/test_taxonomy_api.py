"""/api/v1/intents/taxonomy: the active version with a strong ETag (304 on If-None-Match), every version in cursor
pages, and reviewers' judgments of candidates over the API (blinded, one per reviewer, never the proposer's)."""

from __future__ import annotations

import pytest

from accounts.roles import Role
from intents.models import IntentJudgment
from tests.factories import user_with
from tests.intents.taxonomy_fixtures import activate_draft, judge, make_candidate, make_run, rob  # noqa: F401

pytestmark = pytest.mark.django_db

BASE = "/api/v1/intents/taxonomy"


def is_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code is not None:
        assert body["code"] == code, body
    return body


@pytest.fixture
def read(make_token, viewer):
    return make_token(viewer, "intents:read")


@pytest.fixture
def outsider_token(make_token, django_user_model):
    user = user_with(Role.REVIEWER, username="gone")
    token = make_token(user, "intents:read", "intents:write")
    user.is_active = False
    user.save(update_fields=["is_active"])
    return token


@pytest.fixture
def first_version(operator, reviewer, rob):  # noqa: F811 (fixture)
    """Version 1, active: one intent from a candidate judged valid by two reviewers, approved by both."""
    runs = [make_run(1), make_run(2)]
    judge(make_candidate("reset a password", runs), "valid", reviewer, rob)
    version, _ = activate_draft(operator, [reviewer, rob])
    version.refresh_from_db()
    return version


def second_version(operator, reviewer, rob):  # noqa: F811 (fixture)
    judge(make_candidate("book a hotel", [make_run(3)]), "valid", reviewer, rob)
    version, _ = activate_draft(operator, [reviewer, rob])
    version.refresh_from_db()
    return version


# --- the active version ----------------------------------------------------------------------------------------------
def test_no_active_taxonomy_is_404_with_the_error_schema(api_client, read):
    is_error(api_client.get(f"{BASE}/active", token=read), 404, "no_active_taxonomy")
    listed = api_client.get(f"{BASE}/versions", token=read)
    assert listed.status_code == 200 and listed.json() == {"items": [], "next_cursor": None}
    is_error(api_client.get(f"{BASE}/versions/1", token=read), 404, "not_found")


def test_the_active_version_carries_a_strong_etag_and_its_number(api_client, read, first_version):
    response = api_client.get(f"{BASE}/active", token=read)
    assert response.status_code == 200, response.content
    assert response["ETag"] == f'"{first_version.digest}"'
    assert response["X-Waymark-Revision"] == "1"
    assert response["Cache-Control"] == "no-cache"
    body = response.json()
    assert body["number"] == 1 and body["digest"] == first_version.digest and body["is_active"] is True
    assert body["parent_number"] is None and body["created_by"] == "otto"
    assert body["intents"] == first_version.document["intents"]
    (intent,) = body["intents"]
    assert intent["label"] == "reset a password" and intent["support"] == 2
    assert intent["intent_id"].startswith("intent:")
    assert [change["change"] for change in body["changes"]] == [c["change"] for c in first_version.changes]


def test_if_none_match_answers_304_until_a_new_version_is_active(
    api_client,
    read,
    first_version,
    operator,
    reviewer,
    rob,  # noqa: F811 (fixture)
):
    etag = f'"{first_version.digest}"'
    for header in (etag, f"W/{etag}", f'"sha256:other", {etag}', "*"):
        unchanged = api_client.get(f"{BASE}/active", token=read, **{"If-None-Match": header})
        assert unchanged.status_code == 304, header
        assert unchanged.content == b""
        assert unchanged["ETag"] == etag and unchanged["X-Waymark-Revision"] == "1"
        assert unchanged["X-Content-Type-Options"] == "nosniff"  # only a per-step call's 304 leaves them out
    assert api_client.get(f"{BASE}/active", token=read, **{"If-None-Match": '"sha256:other"'}).status_code == 200

    newer = second_version(operator, reviewer, rob)
    changed = api_client.get(f"{BASE}/active", token=read, **{"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed["ETag"] == f'"{newer.digest}"' != etag and changed["X-Waymark-Revision"] == "2"
    assert changed.json()["parent_number"] == 1
    assert {i["label"] for i in changed.json()["intents"]} == {"reset a password", "book a hotel"}


def test_versions_are_paged_newest_first_and_read_one_by_one(
    api_client,
    read,
    first_version,
    operator,
    reviewer,
    rob,  # noqa: F811 (fixture)
):
    newer = second_version(operator, reviewer, rob)
    first = api_client.get(f"{BASE}/versions?limit=1", token=read).json()
    assert [item["number"] for item in first["items"]] == [2] and first["next_cursor"]
    assert first["items"][0]["is_active"] is True and first["items"][0]["digest"] == newer.digest
    assert "intents" not in first["items"][0]
    second = api_client.get(f"{BASE}/versions?limit=1&cursor={first['next_cursor']}", token=read).json()
    assert [item["number"] for item in second["items"]] == [1] and second["next_cursor"] is None
    assert second["items"][0]["is_active"] is False

    old = api_client.get(f"{BASE}/versions/1", token=read).json()
    assert old["digest"] == first_version.digest and old["is_active"] is False
    assert old["intents"] == first_version.document["intents"]
    assert api_client.get(f"{BASE}/versions/2", token=read).json()["parent_number"] == 1
    is_error(api_client.get(f"{BASE}/versions/99", token=read), 404, "not_found")
    is_error(api_client.get(f"{BASE}/versions/0", token=read), 422, "invalid")
    is_error(api_client.get(f"{BASE}/versions?cursor=nonsense", token=read), 400, "bad_cursor")
    is_error(api_client.get(f"{BASE}/versions?limit=0", token=read), 422, "invalid")


def test_reads_refuse_missing_tokens_scopes_and_outsiders(
    api_client, make_token, viewer, outsider_token, first_version
):
    for path in ("/active", "/versions", "/versions/1", "/queue"):
        is_error(api_client.get(BASE + path), 401, "unauthorized")
        is_error(api_client.get(BASE + path, token=outsider_token), 401, "unauthorized")
        is_error(api_client.get(BASE + path, token=make_token(viewer, "graphs:read")), 403, "missing_scope")


def test_reads_take_a_fixed_number_of_queries(
    api_client,
    read,
    first_version,
    operator,
    reviewer,
    rob,  # noqa: F811 (fixture)
    django_assert_num_queries,
):
    api_client.get(f"{BASE}/active", token=read)  # the token is verified once, then served from the token cache
    # One query for the read, whatever the number of versions and intents.
    with django_assert_num_queries(1):
        assert api_client.get(f"{BASE}/active", token=read).status_code == 200
    with django_assert_num_queries(2):
        assert api_client.get(f"{BASE}/versions", token=read).status_code == 200
    with django_assert_num_queries(2):
        assert api_client.get(f"{BASE}/versions/1", token=read).status_code == 200
    second_version(operator, reviewer, rob)
    with django_assert_num_queries(1):
        assert api_client.get(f"{BASE}/active", token=read).status_code == 200
    with django_assert_num_queries(1):
        etag = f'"{first_version.digest}"'
        assert api_client.get(f"{BASE}/active", token=read, **{"If-None-Match": etag}).status_code == 200
    with django_assert_num_queries(2):
        assert len(api_client.get(f"{BASE}/versions", token=read).json()["items"]) == 2


# --- judgments -------------------------------------------------------------------------------------------------------
@pytest.fixture
def candidate(db):
    return make_candidate("cancel a subscription", [make_run(7)])


def test_a_reviewer_judges_and_then_sees_every_judgment(
    api_client,
    make_token,
    reviewer,
    rob,  # noqa: F811 (fixture)
    candidate,
):
    judge(candidate, "invalid", rob)
    token = make_token(reviewer, "intents:read", "intents:write")
    path = f"{BASE}/candidates/{candidate.candidate_id}/judgments"
    blinded = api_client.get(path, token=token).json()
    # sealed means absent: not even how many judgments there are, to a reviewer who may still judge (issue 24)
    assert blinded == {"candidate_id": candidate.candidate_id, "count": None, "mine": None, "judgments": None}
    operators = api_client.get(path, token=make_token(user_with(Role.OPERATOR), "intents:read")).json()
    assert operators["count"] == 1 and operators["judgments"] is None  # cannot judge: the count, not the verdicts

    body = {"candidate_id": candidate.candidate_id, "verdict": "valid", "comment": "a real intent"}
    response = api_client.post(f"{BASE}/judgments", body, token=token)
    assert response.status_code == 201, response.content
    seen = response.json()
    assert seen["count"] == 2 and seen["mine"]["verdict"] == "valid" and seen["mine"]["reviewer"] == "rita"
    assert [(j["reviewer"], j["verdict"]) for j in seen["judgments"]] == [("rob", "invalid"), ("rita", "valid")]
    assert seen["mine"]["comment"] == "a real intent" and seen["mine"]["merge_into"] is None


def test_a_merge_names_an_active_intent(
    api_client,
    make_token,
    first_version,
    candidate,
    rob,  # noqa: F811 (fixture)
):
    token = make_token(rob, "intents:write")
    body = {"candidate_id": candidate.candidate_id, "verdict": "merge"}
    is_error(api_client.post(f"{BASE}/judgments", body, token=token), 422, "merge_target_required")
    is_error(
        api_client.post(f"{BASE}/judgments", {**body, "merge_into": "intent:nope"}, token=token),
        422,
        "unknown_merge_target",
    )
    target = first_version.document["intents"][0]["intent_id"]
    is_error(
        api_client.post(f"{BASE}/judgments", {**body, "verdict": "valid", "merge_into": target}, token=token),
        422,
        "invalid",
    )
    assert not IntentJudgment.objects.filter(candidate=candidate).exists()
    response = api_client.post(f"{BASE}/judgments", {**body, "merge_into": target}, token=token)
    assert response.status_code == 201, response.content
    assert response.json()["mine"]["merge_into"] == target


def test_judgment_refusals_answer_with_the_error_schema_and_write_nothing(
    api_client,
    make_token,
    reviewer,
    agent,
    outsider_token,
    candidate,
):
    body = {"candidate_id": candidate.candidate_id, "verdict": "valid"}
    is_error(api_client.post(f"{BASE}/judgments", body), 401, "unauthorized")
    is_error(api_client.post(f"{BASE}/judgments", body, token=outsider_token), 401, "unauthorized")
    is_error(
        api_client.post(f"{BASE}/judgments", body, token=make_token(reviewer, "intents:read")), 403, "missing_scope"
    )
    is_error(
        api_client.post(f"{BASE}/judgments", body, token=make_token(agent, "intents:write")), 403, "not_a_reviewer"
    )
    write = make_token(reviewer, "intents:write")
    is_error(
        api_client.post(f"{BASE}/judgments", {**body, "candidate_id": "intent:none"}, token=write),
        404,
        "unknown_candidate",
    )
    read = make_token(reviewer, "intents:read")
    for unknown in ("intent:none", candidate.candidate_id + "x" * 40):
        is_error(api_client.get(f"{BASE}/candidates/{unknown}/judgments", token=read), 404, "unknown_candidate")
    is_error(api_client.post(f"{BASE}/judgments", {**body, "verdict": "maybe"}, token=write), 422, "invalid")
    is_error(api_client.post(f"{BASE}/judgments", {**body, "surprise": 1}, token=write), 422, "invalid")
    is_error(api_client.post(f"{BASE}/judgments", raw="{not json", token=write), 400)
    # a NUL (PostgreSQL text cannot hold one) in any text field: a 422, never a 500 (found by the contract fuzzer)
    for field, value in (("candidate_id", "h\x00"), ("merge_into", "intent\x00x"), ("comment", "fine\x00")):
        nul = {**body, "verdict": "merge" if field == "merge_into" else "valid", field: value}
        is_error(api_client.post(f"{BASE}/judgments", nul, token=write), 422, "invalid")
    assert not IntentJudgment.objects.exists()

    assert api_client.post(f"{BASE}/judgments", body, token=write).status_code == 201
    is_error(api_client.post(f"{BASE}/judgments", {**body, "verdict": "invalid"}, token=write), 409, "already_judged")
    assert IntentJudgment.objects.get().verdict == "valid"


def test_the_proposer_cannot_judge_their_own_candidate(api_client, make_token, reviewer):
    mine = make_candidate("renew a passport", [make_run(9)], source="client:1", by=reviewer)
    response = api_client.post(
        f"{BASE}/judgments",
        {"candidate_id": mine.candidate_id, "verdict": "valid"},
        token=make_token(reviewer, "intents:write"),
    )
    is_error(response, 403, "proposer_cannot_judge")
    assert not IntentJudgment.objects.exists()


def test_the_queue_lists_what_waits_for_a_reviewer(api_client, make_token, reviewer, viewer, candidate):
    queue = api_client.get(f"{BASE}/queue", token=make_token(reviewer, "intents:read")).json()
    assert [item["candidate_id"] for item in queue["items"]] == [candidate.candidate_id]
    assert queue["total"] == 1 and "judgment_count" not in queue["items"][0]  # nothing of others' (issue 24)
    assert queue["items"][0]["promoted_alert"] is False
    assert api_client.get(f"{BASE}/queue", token=make_token(viewer, "intents:read")).json() == {
        "items": [],
        "total": 0,
    }
