"""The per-step API calls as plain views (config/step_api.py): they answer exactly as their ninja operations (status,
Error body, headers), hand anything unusual over to those operations without counting the call twice, skip the
browser-only middleware and keep the security headers and the request id."""

import json

import pytest
from django.core.cache import cache
from django.test import Client, RequestFactory
from django.urls import resolve, reverse
from django.utils.csp import CSP

from common import ratelimit
from config.middleware import PageMethodMiddleware
from config.step_middleware import LEFT_OUT_OF_304
from config.urls import ninja_urls
from graphs.cache import clear_local
from graphs.guidance import workspace_guidance
from procedures import active_body
from tests.factories import user_with
from tests.graphs.factories import make_demo_workspace, make_empty_workspace

pytestmark = pytest.mark.django_db

ACTIVE = "/api/v1/graphs/two-hop-qa/active"
GUIDANCE = "/api/v1/graphs/two-hop-qa/guidance"
PROCEDURES = "/api/v1/procedures"
COMPARED_HEADERS = ("Content-Type", "ETag", "X-Waymark-Revision", "Cache-Control", "Retry-After", "WWW-Authenticate")
RAW = {"query": "Which country?", "steps": [{"action": "search"}, {"action": "read"}], "mode": "raw_subgraph"}


@pytest.fixture
def demo():
    return make_demo_workspace()


@pytest.fixture
def token(make_token, operator):
    return make_token(operator, "graphs:read", "graphs:guide", "procedures:read")


def ninja_view(route: str):
    return next(p.callback for p in ninja_urls[0] if str(p.pattern) == route)


def send(method: str, path: str, headers: dict, body: bytes | None = None, content_type: str = "application/json"):
    """The same request through the whole stack (the plain view) and straight to the ninja operation."""
    kwargs = {"headers": headers}
    if body is not None:
        kwargs |= {"data": body, "content_type": content_type}
    through_stack = getattr(Client(), method.lower())(path, **kwargs)
    match = resolve(path.partition("?")[0])
    request = getattr(RequestFactory(), method.lower())(path, **kwargs)
    route = match.route.removeprefix("api/v1/")
    ratelimit.counters.clear()  # the ninja operation counts the call afresh
    cache.clear()
    clear_local()
    active_body.recent.clear()
    # The operation's answer as the stack's middleware hands it on: an empty or plain-text 405 becomes the Error body
    # there (config.middleware.PageMethodMiddleware), for the plain views and the operations alike.
    direct = PageMethodMiddleware(lambda request: ninja_view(route)(request, **match.kwargs))(request)
    return through_stack, direct


def assert_same_answer(through_stack, direct):
    assert through_stack.status_code == direct.status_code, through_stack.content
    assert through_stack.content == direct.content or json.loads(through_stack.content) == json.loads(direct.content)
    for name in COMPARED_HEADERS:
        assert through_stack.get(name) == direct.get(name), name


def test_the_per_step_paths_resolve_to_the_plain_views_and_the_operations_keep_their_names():
    for path in (ACTIVE, GUIDANCE, PROCEDURES):
        assert resolve(path).func.__name__.startswith("step_")
    assert reverse("api:active_graph", kwargs={"ws": "two-hop-qa"}) == ACTIVE
    assert reverse("api:guidance", kwargs={"ws": "two-hop-qa"}) == GUIDANCE
    assert reverse("api:list_active") == PROCEDURES
    assert resolve("/api/v1/graphs/two-hop-qa/revisions").func.__name__ != "step_list_revisions"


@pytest.mark.parametrize(
    "case",
    [
        "active",
        "active-304",
        "active-no-token",
        "active-bad-token",
        "active-unscoped",
        "active-unknown-workspace",
        "active-nothing-active",
        "active-wrong-method",
        "guidance-raw",
        "guidance-none",
        "guidance-generative",
        "guidance-invalid",
        "guidance-not-json",
        "guidance-malformed",
        "guidance-surrogate",
        "guidance-unknown-workspace",
        "guidance-wrong-method",
        "procedures",
        "procedures-intent",
        "procedures-empty-intent",
        "procedures-two-intents",
        "procedures-unscoped",
    ],
)
def test_a_per_step_call_answers_as_its_ninja_operation(case, demo, token, make_token, viewer):
    make_empty_workspace("bare")
    auth = {"Authorization": f"Bearer {token}"}
    unscoped = {"Authorization": f"Bearer {make_token(viewer, 'trajectories:read')}"}
    raw = json.dumps(RAW).encode()
    etag = Client().get(ACTIVE, headers=auth)["ETag"]
    cases = {
        "active": ("GET", ACTIVE, auth, None),
        "active-304": ("GET", ACTIVE, {**auth, "If-None-Match": etag}, None),
        "active-no-token": ("GET", ACTIVE, {}, None),
        "active-bad-token": ("GET", ACTIVE, {"Authorization": "Bearer wm_nope_nope"}, None),
        "active-unscoped": ("GET", ACTIVE, unscoped, None),
        "active-unknown-workspace": ("GET", "/api/v1/graphs/nope/active", auth, None),
        "active-nothing-active": ("GET", "/api/v1/graphs/bare/active", auth, None),
        "active-wrong-method": ("DELETE", ACTIVE, auth, None),
        "guidance-raw": ("POST", GUIDANCE, auth, raw),
        "guidance-none": ("POST", GUIDANCE, auth, json.dumps({**RAW, "mode": "none"}).encode()),
        "guidance-generative": ("POST", GUIDANCE, auth, json.dumps({**RAW, "mode": "generative_subgraph"}).encode()),
        "guidance-invalid": ("POST", GUIDANCE, auth, json.dumps({**RAW, "hops": 0}).encode()),
        "guidance-not-json": ("POST", GUIDANCE, auth, raw, "text/plain"),
        "guidance-malformed": ("POST", GUIDANCE, auth, b'{"query": '),
        "guidance-surrogate": ("POST", GUIDANCE, auth, b'{"query": "\\ud800", "mode": "raw_subgraph"}'),
        "guidance-unknown-workspace": ("POST", "/api/v1/graphs/nope/guidance", auth, raw),
        "guidance-wrong-method": ("GET", GUIDANCE, auth, None),
        "procedures": ("GET", PROCEDURES, auth, None),
        "procedures-intent": ("GET", PROCEDURES + "?intent=refund", auth, None),
        "procedures-empty-intent": ("GET", PROCEDURES + "?intent=", auth, None),
        "procedures-two-intents": ("GET", PROCEDURES + "?intent=refund&intent=other", auth, None),
        "procedures-unscoped": ("GET", PROCEDURES, unscoped, None),
    }
    method, path, headers, body, *content_type = cases[case]
    through_stack, direct = send(method, path, headers, body, *content_type)
    assert_same_answer(through_stack, direct)
    if through_stack.status_code >= 400:  # 405 included: never a line of text
        assert set(through_stack.json()) == {"code", "message", "details"}


def test_a_request_handed_over_to_its_operation_is_counted_once(demo, token, settings):
    settings.WAYMARK_API_RATE_PER_TOKEN = 2
    invalid = json.dumps({**RAW, "hops": 0})
    auth = {"Authorization": f"Bearer {token}"}
    statuses = [
        Client().post(GUIDANCE, data=invalid, content_type="application/json", headers=auth).status_code
        for _ in range(3)
    ]
    assert statuses == [422, 422, 429]


def test_a_raw_answer_is_encoded_once_per_revision_node_and_hops(demo, token):
    auth = {"Authorization": f"Bearer {token}"}
    first = Client().post(GUIDANCE, data=RAW, content_type="application/json", headers=auth)
    again = Client().post(
        GUIDANCE, data={**RAW, "query": "another question"}, content_type="application/json", headers=auth
    )
    assert first.status_code == again.status_code == 200
    assert first.content == again.content  # a raw answer does not depend on the query
    body = first.json()
    answer = workspace_guidance(slug="two-hop-qa", query="", steps=RAW["steps"], mode="raw_subgraph")
    assert body == {
        "text": answer.text,
        "node_id": "read",
        "used_full_graph": False,
        "subgraph_digest": answer.subgraph_digest,
        "mode": "raw_subgraph",
        "revision": answer.revision["digest"],
    }
    wider = Client().post(GUIDANCE, data={**RAW, "hops": 1}, content_type="application/json", headers=auth).json()
    elsewhere = (
        Client()
        .post(GUIDANCE, data={**RAW, "steps": [{"action": "search"}]}, content_type="application/json", headers=auth)
        .json()
    )
    assert wider["subgraph_digest"] != body["subgraph_digest"] and elsewhere["node_id"] == "search"


def test_per_step_calls_skip_the_browser_middleware_but_keep_security_headers_and_request_id(demo, token, client):
    client.force_login(user_with(username="browsing"))
    auth = {"Authorization": f"Bearer {token}"}
    response = client.get(ACTIVE, headers={**auth, "X-Request-Id": "step-1"})
    assert response.status_code == 200
    assert response["X-Request-Id"] == "step-1"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert "Cookie" not in response.get("Vary", "") and not response.cookies
    assert client.get(ACTIVE).status_code == 401  # a logged-in session is no credential for the API
    assert client.get("/").status_code == 200  # pages still have their session


def test_per_step_answers_carry_the_policy_the_middleware_builds_and_follow_a_change(demo, token, client, settings):
    auth = {"Authorization": f"Bearer {token}"}
    page_policy = client.get("/accounts/login/")["Content-Security-Policy"]  # built by Django's middleware
    response = client.get(ACTIVE, headers=auth)
    assert response["Content-Security-Policy"] == page_policy
    not_modified = client.get(ACTIVE, headers={**auth, "If-None-Match": response["ETag"], "X-Request-Id": "step-2"})
    assert not_modified.status_code == 304
    # A per-step 304 leaves out the 200's browser security headers (a cache keeps its stored 200's), not the
    # fields RFC 9110 §15.4.5 asks of a 304 nor Waymark's own
    assert [header for header in LEFT_OUT_OF_304 if header in not_modified] == []
    assert not_modified["ETag"] == response["ETag"] and not_modified["Cache-Control"] == "no-cache"
    assert not_modified["X-Waymark-Revision"] == response["X-Waymark-Revision"]
    assert not_modified["X-Waymark-Certificate"] == response["X-Waymark-Certificate"]
    assert not_modified["X-Request-Id"] == "step-2"
    listed = client.get(PROCEDURES, headers=auth)
    procedures_304 = client.get(PROCEDURES, headers={**auth, "If-None-Match": listed["ETag"]})
    assert procedures_304.status_code == 304 and "Content-Security-Policy" not in procedures_304
    assert listed["Content-Security-Policy"] == page_policy and listed["X-Frame-Options"] == "DENY"
    # RFC 9110 §8.6: a 304 carries no Content-Length but the 200's (Django's CommonMiddleware would add "0")
    assert "Content-Length" not in not_modified and response["Content-Length"] == str(len(response.content))
    assert "Content-Security-Policy-Report-Only" not in response
    settings.SECURE_CSP = {"default-src": ["'none'"]}
    settings.SECURE_CSP_REPORT_ONLY = {"img-src": ["'self'"]}
    changed = client.get(PROCEDURES, headers=auth)
    assert changed["Content-Security-Policy"] == "default-src 'none'"
    assert changed["Content-Security-Policy-Report-Only"] == "img-src 'self'"
    # A nonce named by the policy is left out, as the middleware leaves out a nonce no template used
    settings.SECURE_CSP = {"default-src": ["'self'"], "script-src": ["'self'", CSP.NONCE]}
    assert client.get(PROCEDURES, headers=auth)["Content-Security-Policy"] == "default-src 'self'; script-src 'self'"
    assert client.get("/api/v1/openapi.json")["Content-Security-Policy"] == "default-src 'self'; script-src 'self'"


def test_every_per_step_answer_carries_the_policy_errors_too(demo, token, client):
    """The per-step paths skip Django's CSP middleware: the prepared policy reaches every answer on them, the
    view's errors and the answers of the middleware after it alike, and a page still gets Django's own."""
    page_policy = client.get("/accounts/login/")["Content-Security-Policy"]
    auth = {"Authorization": f"Bearer {token}"}
    answers = {
        "unauthenticated": client.get(ACTIVE),
        "unknown workspace": client.get("/api/v1/graphs/no-such-space/active", headers=auth),
        "NUL guard": client.get(PROCEDURES + "?intent=a%00b", headers=auth),
        "handed over (405)": client.delete(PROCEDURES, headers=auth),
    }
    assert {name: answer.status_code for name, answer in answers.items()} == {
        "unauthenticated": 401,
        "unknown workspace": 404,
        "NUL guard": 422,
        "handed over (405)": 405,
    }
    assert {name: answer["Content-Security-Policy"] for name, answer in answers.items()} == dict.fromkeys(
        answers, page_policy
    )
    assert all(answer["X-Frame-Options"] == "DENY" for answer in answers.values())


@pytest.mark.parametrize(
    "body",
    [
        RAW,
        {},
        {"mode": "raw_full", "hops": 6, "window": 0, "revision": "  1  ", "query": "q"},
        {"steps": [{"action": "a", "args": {"x": [1, 2]}, "observation": "ok"}] * 3},
        {"steps": [{"action": ""}]},
        {"steps": [{"action": "a", "extra": 1}]},
        {"steps": [{"action": "a"}] * 501},
        {"steps": "search"},
        {"steps": [None]},
        {"mode": "guess"},
        {"hops": 0},
        {"hops": "2"},
        {"hops": 2.5},
        {"window": 51},
        {"revision": "   "},
        {"revision": "x" * 65},
        {"query": "q" * 8001},
        {"unknown": True},
        [RAW],
        "raw",
        None,
    ],
)
def test_the_plain_twin_accepts_exactly_what_the_schema_accepts(body):
    from pydantic import ValidationError

    from common.plain_models import plain_model
    from graphs.schemas import GuidanceIn

    def validated(model):
        try:
            return model.model_validate(body).model_dump()
        except ValidationError:
            return "refused"

    assert validated(plain_model(GuidanceIn)) == validated(GuidanceIn)


def test_a_kept_raw_answer_follows_the_active_revision(demo, token):
    from graphs.models import Revision
    from tests.promote import promote_graph_revision

    auth = {"Authorization": f"Bearer {token}"}
    before = Client().post(GUIDANCE, data=RAW, content_type="application/json", headers=auth).json()
    promote_graph_revision(Revision.objects.get(workspace=demo, kind=Revision.Kind.GRAPH, seq=0))
    after = Client().post(GUIDANCE, data=RAW, content_type="application/json", headers=auth).json()
    assert after["revision"] != before["revision"] and after["text"] != before["text"]


@pytest.mark.parametrize("query", ["", "?intent=refund", "?intent=", "?intent=refund&intent=other", "?intent=%20x"])
def test_the_procedures_list_reads_the_intent_as_its_operation_does(query, token, monkeypatch):
    from procedures import active_body

    asked = []
    read = active_body.read_stamps
    monkeypatch.setattr(active_body, "read_stamps", lambda intent: asked.append(intent) or read(intent))
    send("GET", PROCEDURES + query, {"Authorization": f"Bearer {token}"})
    assert len(asked) == 2 and asked[0] == asked[1]
