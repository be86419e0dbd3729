"""Verified tokens are served from each process's cache (accounts.token_cache) and stop working everywhere within
one second of a revocation or a removed role: in one process, and across two real server processes sharing Redis."""

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.db import DatabaseError

from accounts.models import ApiToken
from accounts.roles import Role
from accounts.services import Actor, api_token_authenticate, api_token_create, api_token_revoke, user_roles_set
from accounts.token_cache import VERSION_KEY, tokens
from tests.factories import user_with
from tests.faults import database_url

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).parent / "gunicorn")


# --- one process ------------------------------------------------------------------------------------------------
def test_a_verified_token_is_served_from_the_cache_without_a_query(viewer, make_token, django_assert_num_queries):
    plaintext = make_token(viewer, "graphs:read")
    first = api_token_authenticate(plaintext)
    with django_assert_num_queries(0):
        again = api_token_authenticate(plaintext)
    assert again.pk == first.pk and again.user.username == viewer.username and again.scopes == ["graphs:read"]
    assert again is not first and again.user is not first.user  # requests never share a model instance


def test_served_copies_share_nothing_a_request_could_change(viewer, make_token):
    plaintext = make_token(viewer, "graphs:read")
    api_token_authenticate(plaintext)
    first, second = api_token_authenticate(plaintext), api_token_authenticate(plaintext)
    first.scopes.append("graphs:guide")
    first.name = first.user.first_name = "changed by one request"
    first.user._state.fields_cache["marker"] = object()
    assert second.scopes == ["graphs:read"] and second.name != first.name
    assert second.user.first_name == viewer.first_name and "marker" not in second.user._state.fields_cache
    assert second._state is not first._state and second.user._state is not first.user._state
    assert (second._state.db, second._state.adding) == ("default", False)  # as read from the database
    assert api_token_authenticate(plaintext).user.first_name == viewer.first_name


def test_a_cached_users_password_is_deferred_never_blank(viewer, make_token, django_assert_num_queries):
    plaintext = make_token(viewer, "graphs:read")
    api_token_authenticate(plaintext)
    cached = api_token_authenticate(plaintext).user
    assert "password" in cached.get_deferred_fields()  # the cache never holds the hash
    with django_assert_num_queries(1):  # read on demand, so a save can never blank it
        assert cached.password == viewer.password and cached.password


def test_a_wrong_secret_is_never_served_from_the_cache(viewer, make_token):
    plaintext = make_token(viewer, "graphs:read")
    assert api_token_authenticate(plaintext) is not None
    assert api_token_authenticate(plaintext[:-2] + ("xx" if not plaintext.endswith("xx") else "yy")) is None


def test_revoking_drops_the_cached_token_at_once(api_client, viewer):
    token, plaintext = api_token_create(actor=Actor(user=viewer), user=viewer, name="t", scopes=["graphs:read"])
    assert api_client.get("/api/v1/graphs", token=plaintext).status_code == 200
    assert api_client.get("/api/v1/graphs", token=plaintext).status_code == 200
    api_token_revoke(actor=Actor(user=viewer), token=token)
    assert api_client.get("/api/v1/graphs", token=plaintext).status_code == 401


def test_a_removed_role_drops_the_role_bound_scope_at_once(api_client, reviewer, make_token):
    plaintext = make_token(reviewer, "reviews:judge")
    assert api_client.get("/api/v1/reviews/queue", token=plaintext).status_code == 200
    user_roles_set(actor=Actor.system(), user=reviewer, roles=[])
    response = api_client.get("/api/v1/reviews/queue", token=plaintext)
    assert response.status_code == 403 and response.json()["code"] == "missing_scope"


def test_a_deactivated_user_loses_the_cached_token(api_client, viewer, make_token):
    plaintext = make_token(viewer, "graphs:read")
    assert api_client.get("/api/v1/graphs", token=plaintext).status_code == 200
    viewer.is_active = False
    viewer.save()
    assert api_client.get("/api/v1/graphs", token=plaintext).status_code == 401


def test_another_process_bumping_the_version_drops_the_entries(viewer, make_token, django_assert_num_queries):
    plaintext = make_token(viewer, "graphs:read")
    api_token_authenticate(plaintext)
    cache.set(VERSION_KEY, "changed-by-another-process", timeout=None)
    with django_assert_num_queries(0):  # read within the check interval: the old version still holds
        assert api_token_authenticate(plaintext) is not None
    tokens._checked = float("-inf")  # the interval has passed: read again (the token with its user, the roles)
    with django_assert_num_queries(2):
        assert api_token_authenticate(plaintext) is not None


def test_a_login_does_not_drop_the_cached_tokens(viewer, make_token, client, django_assert_num_queries):
    plaintext = make_token(viewer, "graphs:read")
    api_token_authenticate(plaintext)
    viewer.set_password("a-long-enough-password-1")
    viewer.save()  # a real change: drops the entries
    api_token_authenticate(plaintext)
    assert client.login(username=viewer.username, password="a-long-enough-password-1")  # saves last_login only
    with django_assert_num_queries(0):
        assert api_token_authenticate(plaintext) is not None


def test_when_the_shared_cache_is_down_every_call_goes_to_the_database(viewer, make_token, monkeypatch):
    plaintext = make_token(viewer, "graphs:read")

    def down(*args, **kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(cache, "get", down)
    monkeypatch.setattr(cache, "add", down)
    first = api_token_authenticate(plaintext)
    assert first is not None
    api_token_revoke(actor=Actor(user=viewer), token=ApiToken.objects.get(pk=first.pk))
    assert api_token_authenticate(plaintext) is None


def test_last_used_times_are_written_in_one_flush_and_kept_when_the_database_refuses(viewer, make_token, monkeypatch):
    plaintexts = [make_token(viewer, "graphs:read") for _ in range(3)]
    for plaintext in plaintexts * 4:
        api_token_authenticate(plaintext)
    assert tokens.flush_used() == 0  # not due yet
    assert not ApiToken.objects.filter(last_used_at__isnull=False).exists()

    def refuse(self, **kwargs):
        raise DatabaseError("database is locked")

    with monkeypatch.context() as patch:
        patch.setattr("django.db.models.query.QuerySet.update", refuse)
        assert tokens.flush_used(force=True) == 0
    assert tokens.flush_used(force=True) == 3  # kept for the next flush
    assert ApiToken.objects.filter(last_used_at__isnull=False).count() == 3


# --- two server processes ---------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(url: str, plaintext: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {plaintext}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture
def shared_redis(settings):
    url = django_settings.TEST_REDIS_URL.rsplit("/", 1)[0] + "/13"
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}}
    cache.clear()
    tokens.forget()
    yield url
    cache.clear()


@pytest.fixture
def two_servers(transactional_db, shared_redis, tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "WAYMARK_TEST_DATABASE_URL": database_url(),  # this xdist worker's own database
        "WAYMARK_TEST_CACHE_URL": shared_redis,
    }
    servers, bases = [], []
    for n in range(2):
        port = _free_port()
        log = open(tmp_path / f"server-{n}.log", "w")  # noqa: SIM115 - closed with the process
        servers.append(
            subprocess.Popen(
                [
                    GUNICORN,
                    "config.wsgi:application",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "1",
                    "--threads",
                    "2",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        bases.append(f"http://127.0.0.1:{port}")
    try:
        for base in bases:
            deadline = time.monotonic() + 60
            while not _up(base):
                assert time.monotonic() < deadline, (tmp_path / "server-0.log").read_text()[-3000:]
                time.sleep(0.2)
        yield bases
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)


def _up(base: str) -> bool:
    try:
        urllib.request.urlopen(base + "/healthz", timeout=2)
    except urllib.error.HTTPError:
        return True  # it answers (health may report a missing worker)
    except OSError:
        return False
    return True


@pytest.mark.redis
@pytest.mark.postgres
def test_a_revoked_token_and_a_removed_role_stop_working_on_every_process_within_a_second(two_servers):
    reader = user_with(username="tess")
    judge = user_with(Role.REVIEWER, username="jude")
    token, plaintext = api_token_create(
        actor=Actor.system(), user=reader, name="t", scopes=["graphs:read", "procedures:read"]
    )
    _, judging = api_token_create(actor=Actor.system(), user=judge, name="j", scopes=["reviews:judge"])
    for base in two_servers:
        for _ in range(2):  # the second call is served from that process's cache
            assert _status(base + "/api/v1/graphs", plaintext) == 200
            assert _status(base + "/api/v1/procedures", plaintext) == 200  # a per-step call (config.step_api)
            assert _status(base + "/api/v1/reviews/queue", judging) == 200

    # A write that bypasses the signals (so the version stays) shows the processes really answer from their caches.
    ApiToken.objects.filter(pk=token.pk).update(revoked_at="2026-01-01T00:00:00Z")
    assert [_status(base + "/api/v1/graphs", plaintext) for base in two_servers] == [200, 200]
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=None)

    api_token_revoke(actor=Actor.system(), token=ApiToken.objects.get(pk=token.pk))
    user_roles_set(actor=Actor.system(), user=judge, roles=[])
    changed = time.monotonic()
    time.sleep(django_settings.WAYMARK_TOKEN_CACHE_CHECK_SECONDS + 0.1)
    for base in two_servers:
        sent = time.monotonic() - changed
        assert sent < 1.0, f"the machine was too slow to check the bound ({sent:.2f} s)"
        assert _status(base + "/api/v1/graphs", plaintext) == 401
        assert _status(base + "/api/v1/procedures", plaintext) == 401
        assert _status(base + "/api/v1/reviews/queue", judging) == 403
