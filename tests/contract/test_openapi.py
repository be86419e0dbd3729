"""The API keeps its OpenAPI contract: schemathesis fuzzes every operation of /api/v1/openapi.json in-process.

Each operation becomes its own test item, so operations added later are covered without touching this file.
Every request carries a token with every scope; the checks are: no 5xx, every status documented, the content type
and the body match what the operation declares.
"""

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.roles import AGENT_SCOPES, SCOPES
from config.wsgi import application

OPENAPI_PATH = "/api/v1/openapi.json"
METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES_PER_OPERATION = int(os.environ.get("WAYMARK_CONTRACT_EXAMPLES", "25"))

# The token is sent as a fixed header, so schemathesis must not generate (or negate) the security header itself.
schema = schemathesis.openapi.from_wsgi(
    OPENAPI_PATH,
    application,
    config=SchemathesisConfig.from_dict({"generation": {"with-security-parameters": False}}),
)
LOADED = list(schema.get_all_operations())
OPERATIONS = [result.ok() for result in LOADED if isinstance(result, Ok)]
UNREADABLE = [result.err() for result in LOADED if not isinstance(result, Ok)]


@pytest.fixture
def every_scope_token(make_token, make_agent_token, operator):
    """Every scope, over two tokens: no identity holds them all (the agent-only ones belong to an agent identity,
    which holds no role). Call it with the operation's path and method."""
    person = make_token(operator, *(scope for scope in SCOPES if scope not in AGENT_SCOPES))
    agent = make_agent_token(*scope_list_for_agents())

    def token_for(operation) -> str:
        path = operation.path
        agent_only = path.startswith(("/api/v1/jobs", "/api/v1/replays", "/api/v1/otlp")) or (
            path == "/api/v1/trajectories" and operation.method.upper() == "POST"
        )
        return agent if agent_only else person

    return token_for


def scope_list_for_agents() -> list[str]:
    from accounts.roles import agent_scopes_allowed

    return agent_scopes_allowed()


@pytest.fixture
def keep_test_connection():
    """Calling the WSGI application fires request_started/finished, whose handler closes the database connection
    and with it the test's transaction; Django's test Client disconnects it the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_schemathesis_reads_every_operation():
    assert OPERATIONS, "the API has no operations"
    assert not UNREADABLE, f"operations schemathesis cannot read: {UNREADABLE}"


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_every_operation_keeps_its_contract(operation, every_scope_token, keep_test_connection):
    """Valid and invalid requests alike: never a 5xx, never an undocumented status, bodies as declared."""
    auth = {"Authorization": f"Bearer {every_scope_token(operation)}"}
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE, headers=auth),
        operation.as_strategy(GenerationMode.NEGATIVE, headers=auth),
    )

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=os.environ.get("CI", "").lower() == "true",
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    @given(case=cases)
    def keeps_contract(case):
        case.call_and_validate(checks=CHECKS)

    keeps_contract()


# --- the document itself ---------------------------------------------------------------------------------------


@pytest.fixture
def document(client, db):
    response = client.get(OPENAPI_PATH)
    assert response.status_code == 200
    return response.json()


def _operations(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield f"{method.upper()} {path}", operation, item.get("parameters", [])


def _takes_input(operation, path_parameters) -> bool:
    return bool(operation.get("requestBody") or operation.get("parameters") or path_parameters)


def test_the_openapi_document_loads_with_operations(document):
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "Waymark API"
    assert list(_operations(document)), "the API has no operations"


def test_every_authenticated_operation_declares_401(document):
    missing = [
        label
        for label, operation, _ in _operations(document)
        if operation.get("security", document.get("security")) and "401" not in operation["responses"]
    ]
    assert not missing, f"operations that take a token but do not declare 401: {missing}"


def test_every_operation_taking_input_declares_422(document):
    missing = [
        label
        for label, operation, path_parameters in _operations(document)
        if _takes_input(operation, path_parameters) and "422" not in operation["responses"]
    ]
    assert not missing, f"operations that take input but do not declare 422: {missing}"


def test_every_operation_taking_a_body_declares_400_for_malformed_json(document):
    missing = [
        label
        for label, operation, _ in _operations(document)
        if operation.get("requestBody") and "400" not in operation["responses"]
    ]
    assert not missing, f"operations that take a JSON body but do not declare 400: {missing}"


def test_every_declared_error_answers_with_the_error_schema(document):
    wrong = []
    for label, operation, _ in _operations(document):
        for status, response in operation["responses"].items():
            if not status.startswith(("4", "5")):
                continue
            body = response.get("content", {}).get("application/json", {}).get("schema", {})
            if body.get("$ref") != "#/components/schemas/Error":
                wrong.append(f"{label} {status}")
    assert not wrong, f"error responses not using the Error schema: {wrong}"


def test_every_operation_declares_429_and_503_with_retry_after(document):
    missing = [
        f"{label} {status}"
        for label, operation, _ in _operations(document)
        for status in ("429", "503")
        if "Retry-After" not in operation["responses"].get(status, {}).get("headers", {})
        or operation["responses"][status]["content"]["application/json"]["schema"]
        != {"$ref": "#/components/schemas/Error"}
    ]
    assert not missing, f"operations that do not declare 429/503 with Retry-After and the Error body: {missing}"


def test_every_operation_declares_414_with_the_error_body(document, operator, make_token):
    missing = [
        label
        for label, operation, _ in _operations(document)
        if operation["responses"].get("414", {}).get("content", {}).get("application/json", {}).get("schema")
        != {"$ref": "#/components/schemas/Error"}
    ]
    assert not missing, f"operations that do not declare 414 with the Error body: {missing}"
    token = make_token(operator, "procedures:read")
    answer = Client().get("/api/v1/procedures?intent=" + "x" * 9_000, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 414 and answer.json()["code"] == "uri_too_long"  # what every operation may answer
