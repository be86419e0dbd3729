"""Shared fixtures: the three actors (owner, read-only teammate, outsider), API clients with tokens, markers."""

from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.test import Client

from accounts.roles import Role
from accounts.services import Actor, api_token_create
from common.local_copies import forget_all
from tests.factories import user_with
from tests.write_guard import writes_recorded

TESTS = Path(__file__).resolve().parent
# Test files that start whole stacks as `make run` does or read every process of this checkout (the port check).
MACHINE_WIDE = {
    "tests/config/test_supervise.py",
    "tests/config/test_start_with_user_data.py",
    "tests/config/test_start_steps.py",
    "tests/config/test_broker_backlog.py",
}


def shared_files() -> frozenset[str]:
    """The test files that use what every xdist worker shares: the Redis databases (the test URL's and the fault
    workers' fixed ones, which tests flush: every file marking a test `redis`) and the machine's processes."""
    marked = {
        path.relative_to(TESTS.parent).as_posix()
        for path in TESTS.rglob("*.py")
        if "mark.redis" in path.read_text(encoding="utf-8")
    }
    return frozenset(marked | MACHINE_WIDE)


def pytest_xdist_make_scheduler(config, log):
    """Under xdist the shared files' tests are one unit, run one after another on one worker; every other test is
    its own unit (as xdist's loadgroup would do with an `xdist_group` mark, which pytest 9.2 no longer lets xdist 3.8
    apply: it renames the node id it sets)."""
    from xdist.scheduler import LoadScopeScheduling

    shared = shared_files()

    class SharedUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "shared" if nodeid.split("::", 1)[0] in shared else nodeid

    return SharedUnitScheduling(config, log)


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


_SEQUENCE_RESETS: list[str] = []


@pytest.fixture(autouse=True)
def _fresh_ids(request):
    """Each test that uses the database starts its ids where a fresh database would (after the rows it holds), not
    where the tests run before it in this process left the sequences (a rollback does not give ids back). What a test
    sees then does not depend on which tests ran before it on its xdist worker: the demo's and mining's held-out
    splits are seeded by run id (procedures.mining.split_key)."""
    if "_django_db_helper" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("_django_db_helper")
    from django.db import connection

    if connection.vendor == "postgresql":
        if not _SEQUENCE_RESETS:
            from django.apps import apps
            from django.core.management.color import no_style

            models = apps.get_models(include_auto_created=True)
            _SEQUENCE_RESETS.append("\n".join(connection.ops.sequence_reset_sql(no_style(), models)))
        with connection.cursor() as cursor:
            cursor.execute(_SEQUENCE_RESETS[0])
    yield


@pytest.fixture(autouse=True)
def _fresh_process_copies():
    """Each test starts as a fresh process would: every per-process copy forgotten (common.local_copies.forget_all:
    tokens, sessions' users, rate counts, closed days, the procedures list's stamps, graph cards, search plans…), since
    rolled-back rows send no signals and ids start again in every test (_fresh_ids). The locmem cache likewise (the
    shared cache of one process: its keys name ids); a Redis cache is the fault tests' own to manage."""
    _forget_process_copies()
    yield
    _forget_process_copies()


def _forget_process_copies() -> None:
    forget_all()
    if isinstance(caches["default"], LocMemCache):
        caches["default"].clear()


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
