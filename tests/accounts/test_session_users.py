"""The session's user is served from a per-process cache (accounts.session_users): no query for who is asking once
warm, and a deactivation, a removed role or a changed password is seen at once here and, through the auth version,
by every other process; the password hash is never kept."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts import session_users
from accounts.models import User
from accounts.roles import Role
from accounts.services import Actor, user_roles_set
from accounts.token_cache import VERSION_KEY, tokens
from tests.conftest import logged_in

pytestmark = pytest.mark.django_db
PAGE = "/accounts/settings/"
LOGIN = "/accounts/login/"


def who_queries(client) -> tuple[object, list[str]]:
    """The response to PAGE and the queries it made for the user and the user's roles."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(PAGE)
    return response, [q["sql"] for q in captured if '"accounts_user"' in q["sql"] or '"auth_group"' in q["sql"]]


def test_once_warm_a_page_asks_nothing_about_its_user(operator):
    client = logged_in(operator)
    first, queries = who_queries(client)
    assert first.status_code == 200 and len(queries) == 2  # the user, then its roles (once)
    again, queries = who_queries(client)
    assert again.status_code == 200 and queries == []
    assert again.wsgi_request.user.username == operator.username and again.wsgi_request.user.may_operate


def test_a_removed_role_and_a_deactivation_show_at_once(operator):
    client = logged_in(operator)
    who_queries(client)
    user_roles_set(actor=Actor.system(), user=operator, roles=[Role.REVIEWER])
    response, queries = who_queries(client)
    assert queries and not response.wsgi_request.user.may_operate and response.wsgi_request.user.may_judge
    operator.is_active = False
    operator.save()
    assert client.get(PAGE)["Location"].startswith(LOGIN)


def test_a_changed_password_ends_the_other_sessions(viewer):
    first, second = logged_in(viewer), logged_in(viewer)
    who_queries(first), who_queries(second)
    viewer.set_password("a new password, long enough")
    viewer.save()
    assert first.get(PAGE)["Location"].startswith(LOGIN)
    assert second.get(PAGE)["Location"].startswith(LOGIN)


def test_another_process_s_change_is_seen_once_the_auth_version_moves(viewer):
    client = logged_in(viewer)
    who_queries(client)
    User.objects.filter(pk=viewer.pk).update(is_active=False)  # no signal: as another process's write looks here
    assert client.get(PAGE).status_code == 200  # this process's entry, until the version moves
    cache.set(VERSION_KEY, "another-process-changed-a-user", timeout=None)
    assert client.get(PAGE).status_code == 200  # read within the check interval: the old version still holds
    tokens._checked = float("-inf")  # the interval (WAYMARK_TOKEN_CACHE_CHECK_SECONDS) has passed
    assert client.get(PAGE)["Location"].startswith(LOGIN)


def test_served_users_are_copies_without_the_password_hash(viewer):
    load = lambda pk: User.objects.get(pk=pk)  # noqa: E731
    session_users.get(viewer.pk, load)
    first, second = session_users.get(viewer.pk, load), session_users.get(viewer.pk, load)
    assert first is not second and first._state is not second._state
    first.first_name = "changed by one request"
    assert second.first_name == viewer.first_name
    assert "password" in second.get_deferred_fields()  # never kept; read on demand
    assert "password" not in session_users._entries[viewer.pk].user.__dict__
    assert second.get_session_auth_hash() == User.objects.get(pk=viewer.pk).get_session_auth_hash()


def test_a_new_password_on_a_served_user_gives_the_new_session_hash(viewer):
    load = lambda pk: User.objects.get(pk=pk)  # noqa: E731
    session_users.get(viewer.pk, load)
    served = session_users.get(viewer.pk, load)
    before = served.get_session_auth_hash()
    served.set_password("another password entirely")
    assert served.get_session_auth_hash() != before  # what update_session_auth_hash then writes to the session


def test_when_the_shared_cache_is_down_pages_read_the_user_every_time(viewer, monkeypatch):
    def down(*args, **kwargs):
        raise ConnectionError("redis is down")

    client = logged_in(viewer)
    monkeypatch.setattr(cache, "get", down)
    monkeypatch.setattr(cache, "add", down)
    for _ in range(2):  # nothing is kept: the auth version cannot be read (and the session comes from the database)
        response, queries = who_queries(client)
        assert response.status_code == 200 and len(queries) == 2
    viewer.is_active = False
    viewer.save()
    assert client.get(PAGE)["Location"].startswith(LOGIN)
