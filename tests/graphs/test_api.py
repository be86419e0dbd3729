"""/api/v1/graphs: active graph with ETag/304, revisions, guidance (raw and generative); the pointer moves only by a
promotion through reviews (POST /api/v1/promotions…), never through this router."""

import pytest

from accounts.roles import Role
from graphs import services
from graphs.core import START, Graph
from graphs.models import Revision
from llm.models import ModelCall
from reviews.models import PromotionRequest, PromotionStatus
from tests.factories import user_with
from tests.graphs.factories import SYSTEM, make_demo_workspace, make_empty_workspace, make_workspace
from tests.helpers.graphs import big_graph
from tests.promote import promote_graph_revision

pytestmark = pytest.mark.django_db

BASE = "/api/v1/graphs"
DEMO = f"{BASE}/two-hop-qa"


@pytest.fixture
def reader(operator, make_token):
    return make_token(operator, "graphs:read", "graphs:guide")


@pytest.fixture
def unscoped(viewer, make_token):
    """A read-only teammate's token without the graphs scopes."""
    return make_token(viewer, "trajectories:read")


@pytest.fixture
def outsider_token(make_token, django_user_model):
    user = django_user_model.objects.create_user("gone", password="x")
    token = make_token(user, "graphs:read", "graphs:guide")
    user.is_active = False
    user.save(update_fields=["is_active"])
    return token


@pytest.fixture
def proposer_token(make_token):
    return make_token(user_with(Role.REVIEWER), "reviews:judge")


@pytest.fixture
def judge_token(make_token):
    return make_token(user_with(Role.REVIEWER), "reviews:judge")


@pytest.fixture
def demo():
    return make_demo_workspace()


def assert_error(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code:
        assert body["code"] == code
    return body


def active_rev(workspace):
    workspace.refresh_from_db()
    return workspace.active_revision


# -- list ------------------------------------------------------------------------------------------------------------


def test_it_lists_workspaces_with_their_active_revision_and_head(api_client, reader, demo):
    make_empty_workspace("bare")
    body = api_client.get(BASE, token=reader).json()
    by_slug = {item["slug"]: item for item in body["items"]}
    assert by_slug["bare"]["active"] is None and by_slug["bare"]["head"] is None
    qa = by_slug["two-hop-qa"]
    assert qa["active"]["seq"] == 1 and qa["head"] == {"seq": 1, "digest": qa["active"]["digest"]}
    assert qa["active"]["meta"]["origin"] == "accepted"


@pytest.mark.parametrize("path", ["", "/two-hop-qa/active", "/two-hop-qa/revisions", "/two-hop-qa/revisions/0"])
def test_reads_refuse_a_missing_token_an_unscoped_token_and_an_outsider(
    api_client, unscoped, outsider_token, demo, path
):
    assert_error(api_client.get(BASE + path), 401, "unauthorized")
    assert_error(api_client.get(BASE + path, token=outsider_token), 401)
    assert_error(api_client.get(BASE + path, token=unscoped), 403, "missing_scope")


# -- active ----------------------------------------------------------------------------------------------------------


def test_the_active_graph_carries_a_strong_etag_and_answers_304(api_client, reader, demo):
    revision = active_rev(demo)
    response = api_client.get(f"{DEMO}/active", token=reader)
    assert response.status_code == 200
    assert response["ETag"] == f'"{revision.digest}"'
    assert response["X-Waymark-Revision"] == "1"
    assert response["Cache-Control"] == "no-cache"
    body = response.json()
    assert (body["seq"], body["digest"], body["meta"]["origin"]) == (1, revision.digest, "accepted")
    assert body["graph"] == Graph.from_document(revision.document).to_refiner_json()
    again = api_client.get(f"{DEMO}/active", token=reader, **{"If-None-Match": response["ETag"]})
    assert again.status_code == 304 and again.content == b""
    assert again["ETag"] == response["ETag"] and "Content-Type" not in again  # no body to describe
    stale = api_client.get(f"{DEMO}/active", token=reader, **{"If-None-Match": '"0000"'})
    assert stale.status_code == 200


def test_the_active_graph_follows_the_pointer_when_a_promotion_moves_it(api_client, reader, demo):
    first = api_client.get(f"{DEMO}/active", token=reader)
    skeleton = Revision.objects.get(workspace=demo, kind=Revision.Kind.GRAPH, seq=0)
    promote_graph_revision(skeleton)  # the cached card is dropped on commit
    second = api_client.get(f"{DEMO}/active", token=reader, **{"If-None-Match": first["ETag"]})
    assert second.status_code == 200 and second.json()["seq"] == 0
    assert second["ETag"] != first["ETag"]


def test_no_active_graph_and_an_unknown_workspace_answer_404(api_client, reader):
    make_empty_workspace("bare")
    assert_error(api_client.get(f"{BASE}/bare/active", token=reader), 404, "no_active_graph")
    assert_error(api_client.get(f"{BASE}/nope/active", token=reader), 404, "not_found")


# -- revisions -------------------------------------------------------------------------------------------------------


def test_revisions_come_in_cursor_pages_newest_first(api_client, reader, demo):
    page = api_client.get(f"{DEMO}/revisions?limit=1", token=reader).json()
    assert [r["seq"] for r in page["items"]] == [1]
    rest = api_client.get(f"{DEMO}/revisions?limit=1&cursor={page['next_cursor']}", token=reader).json()
    assert [r["seq"] for r in rest["items"]] == [0] and rest["next_cursor"] is None
    assert_error(api_client.get(f"{DEMO}/revisions?cursor=bogus", token=reader), 400, "bad_cursor")
    assert_error(api_client.get(f"{DEMO}/revisions?limit=0", token=reader), 422, "invalid")


def test_a_revision_is_found_by_seq_by_digest_and_by_unique_prefix(api_client, reader, demo):
    revision = Revision.objects.get(workspace=demo, seq=0)
    for ref in ("0", revision.digest, revision.digest[:8]):
        body = api_client.get(f"{DEMO}/revisions/{ref}", token=reader).json()
        assert (body["seq"], body["digest"]) == (0, revision.digest)
        assert [n["id"] for n in body["graph"]["nodes"]] == ["End", "Start"]
    assert_error(api_client.get(f"{DEMO}/revisions/7", token=reader), 404)
    assert_error(api_client.get(f"{DEMO}/revisions/zz-top", token=reader), 422, "invalid_revision")
    assert_error(api_client.get(f"{BASE}/nope/revisions/0", token=reader), 404)


# -- guidance --------------------------------------------------------------------------------------------------------


def test_raw_guidance_localizes_on_the_last_action_and_never_calls_a_model(api_client, reader, demo):
    payload = {"query": "Which country?", "steps": [{"action": "search", "args": {"q": "x"}}], "mode": "raw_subgraph"}
    response = api_client.post(f"{DEMO}/guidance", payload, token=reader)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["node_id"] == "search" and body["used_full_graph"] is False and body["mode"] == "raw_subgraph"
    assert body["text"].startswith("Active Cognitive Node: [search] (Type: ACTION)")
    assert "[search] → [read]" in body["text"] and "[read] → [search]" in body["text"]
    assert len(body["subgraph_digest"]) == 64
    assert body["revision"] == active_rev(demo).digest
    assert not ModelCall.objects.exists()


def test_an_unknown_action_falls_back_to_the_full_graph(api_client, reader, demo):
    payload = {"query": "q", "steps": [{"action": "browse"}], "mode": "raw_subgraph"}
    body = api_client.post(f"{DEMO}/guidance", payload, token=reader).json()
    assert body["node_id"] is None and body["used_full_graph"] is True and body["subgraph_digest"] is None
    assert body["text"].startswith("Complete Procedural Graph: 5 nodes, 5 transitions")


def test_a_pinned_revision_answers_from_that_graph(api_client, reader, demo):
    skeleton_rev = Revision.objects.get(workspace=demo, seq=0)
    for ref in ("0", skeleton_rev.digest):
        payload = {"query": "q", "steps": [], "mode": "raw_subgraph", "revision": ref}
        body = api_client.post(f"{DEMO}/guidance", payload, token=reader).json()
        assert body["revision"] == skeleton_rev.digest and body["node_id"] == START
        assert "[Start] → [End]" in body["text"]
    missing = {"query": "q", "mode": "raw_subgraph", "revision": "9"}
    assert_error(api_client.post(f"{DEMO}/guidance", missing, token=reader), 404)


def test_generative_guidance_calls_the_model_once_and_records_it(api_client, reader, demo):
    payload = {"query": "Who is Alice Martin?", "steps": [{"action": "search", "observation": "Alice Martin"}]}
    response = api_client.post(f"{DEMO}/guidance", payload, token=reader)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["mode"] == "generative_subgraph" and body["text"].startswith("Demo guidance (scripted model)")
    call = ModelCall.objects.get()
    assert (call.role, call.status, call.subject_type, call.subject_id) == (
        "guidance",
        "succeeded",
        "graphs.workspace",
        str(demo.pk),
    )
    assert "two-hop question answering over a small corpus" in call.request_preview
    assert "[search] → [read]" in call.request_preview


def test_mode_none_returns_empty_text(api_client, reader, demo):
    body = api_client.post(f"{DEMO}/guidance", {"mode": "none"}, token=reader).json()
    assert body == {
        "text": "",
        "node_id": START,
        "used_full_graph": False,
        "subgraph_digest": None,
        "mode": "none",
        "revision": active_rev(demo).digest,
    }


@pytest.mark.parametrize(
    "payload",
    [
        {"hops": 0},
        {"hops": 7},
        {"window": -1},
        {"window": 51},
        {"mode": "psychic"},
        {"steps": [{"action": "search"}] * 501},
        {"query": "x" * 8001},
        {"steps": [{"action": ""}]},
        {"steps": [{"action": "a", "colour": "red"}]},
        {"surprise": True},
        {"revision": "not a ref!"},
    ],
)
def test_bad_guidance_input_answers_422(api_client, reader, demo, payload):
    response = api_client.post(f"{DEMO}/guidance", {"mode": "raw_subgraph", **payload}, token=reader)
    assert_error(response, 422)
    assert not ModelCall.objects.exists()


def test_guidance_refuses_outsiders_and_tokens_without_the_guide_scope(
    api_client, outsider_token, demo, viewer, make_token
):
    read_only = make_token(viewer, "graphs:read")
    assert_error(api_client.post(f"{DEMO}/guidance", {}), 401)
    assert_error(api_client.post(f"{DEMO}/guidance", {}, token=outsider_token), 401)
    assert_error(api_client.post(f"{DEMO}/guidance", {}, token=read_only), 403, "missing_scope")


def test_guidance_without_an_active_graph_or_workspace_answers_404(api_client, reader):
    make_empty_workspace("bare")
    assert_error(api_client.post(f"{BASE}/bare/guidance", {"mode": "raw_subgraph"}, token=reader), 404)
    assert_error(api_client.post(f"{BASE}/nope/guidance", {"mode": "raw_subgraph"}, token=reader), 404)


def test_malformed_json_guidance_never_answers_500(api_client, reader, demo):
    response = api_client.post(f"{DEMO}/guidance", raw=b"{nope", token=reader)
    assert response.status_code in (400, 422)


# -- moving the pointer: only through reviews ------------------------------------------------------------------------


def test_a_stale_promotion_of_a_graph_revision_answers_409_over_the_judgments_api(
    api_client, demo, proposer_token, judge_token
):
    skeleton = Revision.objects.get(workspace=demo, kind=Revision.Kind.GRAPH, seq=0)
    proposed = api_client.post(
        "/api/v1/promotions",
        {"kind": "graph_revision", "candidate_id": str(skeleton.pk), "rationale": "back to the seed"},
        token=proposer_token,
    )
    assert proposed.status_code == 201, proposed.content
    head = active_rev(demo)
    newer = services.graph_append_accepted(
        actor=SYSTEM, workspace=demo, graph=big_graph(3), expected_head=head.digest, meta={"validation_score": 0.9}
    )
    # The pointer moved since the request was proposed (judged before the winner's after-commit sweep supersedes it).
    promote_graph_revision(newer, on_commit=False)

    response = api_client.post(
        f"/api/v1/promotions/{proposed.json()['id']}/judgments", {"verdict": "approve"}, token=judge_token
    )

    body = assert_error(response, 409, "stale")
    assert "stale" in body["message"]
    assert active_rev(demo).pk == newer.pk
    assert PromotionRequest.objects.get(pk=proposed.json()["id"]).status == PromotionStatus.SUPERSEDED


def test_no_graphs_operation_moves_the_pointer(api_client, demo, make_token, admin_user):
    token = make_token(admin_user, "reviews:judge", "graphs:read", "graphs:guide")
    response = api_client.post(f"{DEMO}/active", {"revision": "0", "expected_active": "1"}, token=token)
    assert response.status_code == 405
    assert active_rev(demo).seq == 1
    assert not any(
        "post" in operations and path.endswith("/active")
        for path, operations in api_client.get("/api/v1/openapi.json").json()["paths"].items()
    )


# -- query counts ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [3, 300])
def test_the_api_costs_a_fixed_number_of_queries(api_client, reader, django_assert_max_num_queries, size):
    for n in range(size // 100 + 2):
        make_workspace(f"ws{n}", graph=big_graph(size).to_refiner_json())
    with django_assert_max_num_queries(3):  # token, last use, workspaces
        assert api_client.get(BASE, token=reader).status_code == 200
    with django_assert_max_num_queries(4):  # token, last use, card, document
        assert api_client.get(f"{BASE}/ws0/active", token=reader).status_code == 200
    with django_assert_max_num_queries(4):  # token, last use, workspace, revisions
        assert api_client.get(f"{BASE}/ws0/revisions", token=reader).status_code == 200
    payload = {"steps": [{"action": "t1"}], "mode": "raw_subgraph"}
    with django_assert_max_num_queries(2):  # warm: the token only
        assert api_client.post(f"{BASE}/ws0/guidance", payload, token=reader).status_code == 200
        assert api_client.post(f"{BASE}/ws0/guidance", payload, token=reader).status_code == 200


def test_generative_guidance_with_a_failing_model_answers_503(api_client, reader, demo, monkeypatch):
    """A scripted model with no replies left stands for a provider that does not answer."""
    from graphs import guidance
    from llm.core import ScriptedChatModel
    from llm.recording import RecordedChatModel

    exhausted = RecordedChatModel(ScriptedChatModel([]), "guidance", subject=("graphs.workspace", demo.pk))
    monkeypatch.setattr(guidance, "guidance_model", lambda workspace_id: exhausted)
    response = api_client.post(f"{DEMO}/guidance", {"query": "q"}, token=reader)
    assert_error(response, 503, "model_unavailable")
    assert ModelCall.objects.get().status == "failed"


def test_odd_refs_cursors_and_slugs_are_answered_never_500(api_client, reader, demo):
    import base64

    odd_cursor = base64.urlsafe_b64encode("seq:²".encode()).decode().rstrip("=")
    assert_error(api_client.get(f"{DEMO}/revisions?cursor={odd_cursor}", token=reader), 400, "bad_cursor")
    assert_error(api_client.get(f"{DEMO}/revisions/%C2%B2", token=reader), 422, "invalid_revision")
    payload = {"mode": "raw_subgraph", "revision": "٣"}
    assert_error(api_client.post(f"{DEMO}/guidance", payload, token=reader), 422, "invalid_revision")
    assert_error(api_client.get(f"{BASE}/%E2%94%BB%E2%94%81/active", token=reader), 404)
    assert_error(api_client.post(f"{BASE}/{'x' * 101}/guidance", {"mode": "raw_subgraph"}, token=reader), 404)


# -- generative guidance when the model's reply is not an answer (issue 25, item 4) ----------------------------------


@pytest.mark.parametrize(
    "kind", ["html", "not_json", "not_a_message", "empty", "max_tokens", "overloaded", "rate_limited"]
)
def test_a_reply_that_is_not_an_answer_is_a_503_with_retry_after_never_a_500_or_guidance(
    api_client, reader, demo, monkeypatch, kind
):
    """The real Anthropic adapter behind a stand-in provider (HTTP mocked), through the per-step view and ninja."""
    from graphs import guidance
    from llm.recording import RecordedChatModel
    from tests.llm.stand_in import stand_in_model

    model = RecordedChatModel(stand_in_model(kind), "guidance", subject=("graphs.workspace", demo.pk))
    monkeypatch.setattr(guidance, "guidance_model", lambda workspace_id: model)
    payload = {"query": "Who is Alice Martin?", "steps": [{"action": "search", "observation": "Alice Martin"}]}
    response = api_client.post(f"{DEMO}/guidance", payload, token=reader)
    body = assert_error(response, 503, "model_unavailable")
    assert int(response["Retry-After"]) >= 1
    assert body["details"]["reason"] == ModelCall.objects.get().diagnostics["kind"]
    assert body["details"]["retry_after"] == int(response["Retry-After"])
    assert "text" not in body  # nothing of the reply is served as guidance
    call = ModelCall.objects.get()
    assert (call.role, call.status) == ("guidance", "failed")
    assert call.diagnostics and call.error


def test_a_rate_limited_provider_passes_its_retry_after_on(api_client, reader, demo, monkeypatch):
    from graphs import guidance
    from llm.recording import RecordedChatModel
    from tests.llm.stand_in import StandIn, rate_limited

    model = RecordedChatModel(StandIn(lambda: rate_limited(retry_after=42)).model(), "guidance")
    monkeypatch.setattr(guidance, "guidance_model", lambda workspace_id: model)
    response = api_client.post(f"{DEMO}/guidance", {"query": "q"}, token=reader)
    assert_error(response, 503, "model_unavailable")
    assert response["Retry-After"] == "42"


def test_a_reply_cut_at_max_tokens_is_never_served_as_guidance(api_client, reader, demo, monkeypatch):
    from graphs import guidance
    from llm.recording import RecordedChatModel
    from tests.llm.stand_in import StandIn, cut_at_max_tokens

    cut = "Follow the edge from [search] to [read], then check the"
    model = RecordedChatModel(StandIn(lambda: cut_at_max_tokens(cut)).model(), "guidance")
    monkeypatch.setattr(guidance, "guidance_model", lambda workspace_id: model)
    response = api_client.post(f"{DEMO}/guidance", {"query": "q"}, token=reader)
    assert_error(response, 503, "model_unavailable")
    assert cut not in response.content.decode()
    assert ModelCall.objects.get().response_text == cut  # kept in the ledger, not served
