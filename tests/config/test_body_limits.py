"""Oversized bodies (issue 30, finding 3): 413 with the Error body on every API operation, a styled 413 page for forms,
never a 500 or the debug page; the OpenAPI document declares it. The operations come from the schema itself, so an
operation added later is swept too."""

from __future__ import annotations

import io
import re

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse

from accounts.roles import AGENT_SCOPES, SCOPES, agent_scopes_allowed
from config.api import api
from tests.conftest import logged_in

NAV = 'aria-label="Main"'
METHODS = {"get", "put", "post", "patch", "delete"}
BODY_LIMIT_MIDDLEWARE = "config.middleware.BodyLimitMiddleware"
_SCHEMA = api.get_openapi_schema()
EVERY_OPERATION = sorted(
    (method.upper(), path, "requestBody" in operation)
    for path, item in _SCHEMA["paths"].items()
    for method, operation in item.items()
    if method in METHODS
)
WITH_A_BODY = [(method, path) for method, path, has_body in EVERY_OPERATION if has_body]


def _url(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)  # any path parameter: the body is refused before it is looked at


def _content_type(method: str, path: str) -> str:
    content = _SCHEMA["paths"][path][method.lower()].get("requestBody", {}).get("content", {"application/json": {}})
    return next(iter(content))


@pytest.fixture
def token_for(make_token, make_agent_token, operator):
    """A token holding every scope the operation may need (agent-only scopes live on an agent identity)."""
    person = make_token(operator, *(scope for scope in SCOPES if scope not in AGENT_SCOPES))
    agent = make_agent_token(*agent_scopes_allowed())

    def pick(method: str, path: str) -> str:
        agent_only = path.startswith(("/api/v1/jobs", "/api/v1/replays", "/api/v1/otlp")) or (
            path == "/api/v1/trajectories" and method == "POST"
        )
        return agent if agent_only else person

    return pick


def _send(method: str, path: str, body: bytes, token: str | None = None, **extra):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(raise_request_exception=False).generic(
        method, _url(path), body, content_type=_content_type(method, path), headers=headers, **extra
    )


def _oversized() -> bytes:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    filler = b"x" * (limit + 1 - len(b'{"x": ""}'))
    return b'{"x": "' + filler + b'"}'  # valid JSON, one byte over


def assert_413(response) -> dict:
    assert response.status_code == 413, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == "payload_too_large"
    assert isinstance(body["details"]["max_bytes"], int) and body["details"]["max_bytes"] > 0
    return body


def test_the_sweep_covers_the_operations_that_read_a_body():
    assert len(WITH_A_BODY) >= 18
    assert ("POST", "/api/v1/trajectories") in WITH_A_BODY and ("POST", "/api/v1/otlp/v1/traces") in WITH_A_BODY


@pytest.mark.parametrize(("method", "path"), WITH_A_BODY, ids=lambda value: value)
def test_every_operation_with_a_body_answers_413_over_the_upload_limit(db, token_for, method, path):
    """6 MiB + 1 byte, with a valid token: 413 and the Error body (500 before issue 30)."""
    body = assert_413(_send(method, path, _oversized(), token_for(method, path)))
    assert body["details"]["max_bytes"] <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE


@pytest.mark.parametrize(("method", "path", "has_body"), EVERY_OPERATION, ids=lambda value: str(value))
def test_any_operation_sent_an_oversized_body_answers_413_without_authenticating(db, method, path, has_body):
    """The size is refused from the Content-Length before anything reads the body or looks at the token."""
    assert_413(_send(method, path, _oversized()))


@pytest.mark.parametrize(("method", "path"), WITH_A_BODY, ids=lambda value: value)
def test_the_api_answers_413_itself_when_django_refuses_the_body(db, token_for, method, path, settings):
    """Without the middleware in front, ninja's body parsing meets RequestDataTooBig: config.api maps it (and ingest
    and OTLP answer from their own limit)."""
    settings.MIDDLEWARE = [name for name in settings.MIDDLEWARE if name != BODY_LIMIT_MIDDLEWARE]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    settings.WAYMARK_INGEST_MAX_BYTES = 1000
    assert_413(_send(method, path, _oversized(), token_for(method, path)))


def test_every_operation_that_reads_a_body_declares_413_with_the_error_schema(client, db):
    document = client.get("/api/v1/openapi.json").json()
    missing = []
    for method, path in WITH_A_BODY:
        answer = document["paths"][path][method.lower()]["responses"].get("413")
        if answer is None or answer["content"]["application/json"]["schema"] != {"$ref": "#/components/schemas/Error"}:
            missing.append(f"{method} {path}")
    assert not missing


# --- pages ------------------------------------------------------------------------------------------------------------


def _form(size: int) -> str:
    return "intent=refund_request&padding=" + "x" * size


@pytest.mark.parametrize("debug", [False, True])
def test_an_oversized_form_post_answers_the_styled_413_never_the_debug_page(operator, debug):
    client = logged_in(operator)  # CSRF enforced: the check reads the form, which is where Django refused it
    with override_settings(DEBUG=debug):
        response = client.post(
            reverse("procedures:mine"),
            _form(settings.DATA_UPLOAD_MAX_MEMORY_SIZE),
            content_type="application/x-www-form-urlencoded",
        )
    page = response.content.decode()
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    assert NAV in page and "waymark.css" in page  # the styled page, with the signed-in user's navigation
    assert "Too much data" in page and f"at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes" in page
    assert "Traceback" not in page and "DATA_UPLOAD_MAX_MEMORY_SIZE" not in page


def test_an_oversized_multipart_post_and_an_anonymous_login_post_answer_413_too(db):
    client = Client(enforce_csrf_checks=True)
    big = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    login = client.post(reverse("accounts:login"), {"username": "ada", "password": big})  # multipart
    assert login.status_code == 413 and "Too much data" in login.content.decode()
    form = client.post(reverse("accounts:login"), f"password={big}", content_type="application/x-www-form-urlencoded")
    assert form.status_code == 413


def test_a_form_within_the_limit_still_reaches_the_view(operator):
    client = logged_in(operator)
    response = client.post(reverse("procedures:mine"), {"intent": "refund_request"})
    assert response.status_code == 403  # the CSRF check ran and refused (no token): the body was read as usual


# --- bodies that lie about their size, or do not say it ---------------------------------------------------------------


def test_a_content_length_that_is_not_a_number_answers_400(db):
    response = _send("POST", "/api/v1/trajectories", b"{}", CONTENT_LENGTH="lots")
    assert response.status_code == 400 and response.json()["code"] == "bad_request"
    page = Client().post(
        "/accounts/login/", "a=b", content_type="application/x-www-form-urlencoded", CONTENT_LENGTH="-1"
    )
    assert page.status_code == 400


def test_a_chunked_body_over_the_limit_answers_413_after_reading_one_byte_more_than_the_limit(db, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    stream = io.BytesIO(b"x" * 50_000)
    response = _send(
        "POST",
        "/api/v1/promotions",
        b"",
        **{
            "CONTENT_LENGTH": "",
            "HTTP_TRANSFER_ENCODING": "chunked",
            "wsgi.input": stream,
            "wsgi.input_terminated": True,
        },
    )
    assert_413(response)
    assert stream.tell() <= 1001


def test_a_chunked_body_the_server_cannot_read_to_its_end_answers_411(db):
    response = _send("POST", "/api/v1/promotions", b"", **{"CONTENT_LENGTH": "", "HTTP_TRANSFER_ENCODING": "chunked"})
    assert response.status_code == 411 and response.json()["code"] == "length_required"
