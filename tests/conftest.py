"""Shared fixtures: the three actors (owner, read-only teammate, outsider), API clients with tokens, markers."""

import pytest
from django.conf import settings
from django.test import Client

from accounts import session_users
from accounts.roles import Role
from accounts.services import Actor, api_token_create
from accounts.token_cache import tokens
from procedures import active_body
from tests.factories import user_with
from tests.write_guard import writes_recorded
from trajectories import closed_days
from trajectories import selectors as trajectory_selectors


def pytest_collection_modifyitems(config, items):
    skip_pg = pytest.mark.skip(reason="PostgreSQL is not reachable on 127.0.0.1:5432 (run scripts/services.sh)")
    skip_redis = pytest.mark.skip(reason="Redis is not reachable on 127.0.0.1:6379 (run scripts/services.sh)")
    for item in items:
        if "postgres" in item.keywords and not settings.POSTGRES_AVAILABLE:
            item.add_marker(skip_pg)
        if "redis" in item.keywords and not settings.REDIS_AVAILABLE:
            item.add_marker(skip_redis)


@pytest.fixture(autouse=True)
def _writes_go_through_services():
    """The test fails when code outside the write modules (services) writes to the database: tests/write_guard.py.
    Covers this process's statements on the test thread's connection, not a Celery worker's or a server's."""
    with writes_recorded() as violations:
        yield violations  # tests of the guard itself (tests/test_architecture.py) read and clear it
    if violations:
        pytest.fail("writes outside services:\n" + "\n".join(sorted({str(v) for v in violations})), pytrace=False)


@pytest.fixture(autouse=True)
def _no_cached_tokens():
    """Each test starts with an empty token cache (accounts.token_cache): rolled-back rows send no signals."""
    tokens.forget()
    tokens._used.clear()
    session_users.forget()  # (the sessions' users, cached under the same auth version)
    active_body.recent.clear()  # (the procedures list's stamps, kept per process for a second)
    closed_days.forget()  # (closed days' totals: tests write day rows without a rebuild, and roll them back)
    trajectory_selectors.PROBE_ANSWERS.clear()  # (a text search's plan, kept per process for a minute)
    yield


@pytest.fixture
def admin_user(db):
    return user_with(Role.ADMIN, username="ada")


@pytest.fixture
def operator(db):
    """The owner of most resources: may write."""
    return user_with(Role.OPERATOR, Role.REVIEWER, username="otto")


@pytest.fixture
def reviewer(db):
    return user_with(Role.REVIEWER, username="rita")


@pytest.fixture
def viewer(db):
    """A read-only teammate: logged in, no role."""
    return user_with(username="vera")


@pytest.fixture
def outsider(db):
    """An inactive account: can neither log in nor use a token."""
    return user_with(username="oscar", is_active=False)


def logged_in(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


@pytest.fixture
def make_token(db):
    """make_token(user, *scopes) -> the plaintext bearer header value."""

    def make(user, *scopes: str) -> str:
        _, plaintext = api_token_create(actor=Actor.system(), user=user, name="test", scopes=list(scopes))
        return plaintext

    return make


@pytest.fixture
def agent(db):
    """An agent identity (a service account created by an operator): the only kind of user whose tokens may hold
    trajectories:write and evaluations:run."""
    from accounts.services import agent_create

    return agent_create(actor=Actor.system(), name="agent-007")


@pytest.fixture
def make_agent_token(db):
    """make_agent_token(*scopes, name="agent-…") -> the plaintext of a token of an agent identity (created on first
    use of a name, reused after)."""
    from accounts.models import User
    from accounts.services import agent_create

    def make(*scopes: str, name: str = "test-agent") -> str:
        agent = User.objects.filter(username=name, is_agent=True).first() or agent_create(
            actor=Actor.system(), name=name
        )
        _, plaintext = api_token_create(actor=Actor.system(), user=agent, name="test", scopes=list(scopes))
        return plaintext

    return make


@pytest.fixture
def api_client():
    """An API client: api_client.get(path, token=…), .post(path, json, token=…)."""

    class ApiClient:
        def __init__(self) -> None:
            self.client = Client()

        def _headers(self, token, extra):
            headers = dict(extra)
            if token:
                headers["Authorization"] = f"Bearer {token}"
            return headers

        def get(self, path, token=None, **headers):
            return self.client.get(path, headers=self._headers(token, headers))

        def post(self, path, data=None, token=None, raw=None, **headers):
            import json

            body = raw if raw is not None else json.dumps(data)
            return self.client.generic(
                "POST", path, body, content_type="application/json", headers=self._headers(token, headers)
            )

    return ApiClient()
