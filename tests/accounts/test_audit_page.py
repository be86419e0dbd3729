import re
from datetime import UTC, datetime
from unittest import mock

import pytest
from django.db import transaction
from django.test import Client

from accounts.models import ApiToken
from accounts.selectors import AUDIT_PAGE_SIZE
from accounts.services import Actor, api_token_create, audit_record
from tests.conftest import logged_in

pytestmark = pytest.mark.django_db

URL = "/accounts/audit/"


def _event(verb: str, *, actor: Actor | None = None, target=("thing", "1"), when: datetime | None = None, **change):
    with mock.patch("django.utils.timezone.now", return_value=when or datetime.now(UTC)), transaction.atomic():
        return audit_record(actor=actor or Actor.system(), verb=verb, target=target, **change)


def _verbs(response) -> list[str]:
    return re.findall(r"<td><code>([a-z_.]+)</code></td>", response.content.decode())


# --- who may see it -------------------------------------------------------------------------------------------------


def test_an_admin_sees_the_audit_log(admin_user):
    _event("graph.activate", actor=Actor(user=admin_user), before={"active": 1}, after={"active": 2})
    response = logged_in(admin_user).get(URL)
    assert response.status_code == 200
    page = response.content.decode()
    assert "graph.activate" in page and "ada" in page
    assert "<details>" in page and "&quot;active&quot;: 2" in page


@pytest.mark.parametrize("who", ["viewer", "reviewer", "operator"])
def test_anyone_but_an_admin_is_forbidden(request, who):
    _event("graph.activate")
    response = logged_in(request.getfixturevalue(who)).get(URL)
    assert response.status_code == 403
    assert b"graph.activate" not in response.content


def test_anonymous_visitors_are_sent_to_login(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_an_inactive_admin_is_sent_to_login(db):
    from accounts.roles import Role
    from tests.factories import user_with

    assert logged_in(user_with(Role.ADMIN, is_active=False)).get(URL).status_code == 302


# --- filters --------------------------------------------------------------------------------------------------------


@pytest.fixture
def history(admin_user, operator):
    token, _ = api_token_create(actor=Actor.system(), user=operator, name="bot", scopes=["graphs:read"])
    _event("auth.login", target=("auth.username", "otto"), when=datetime(2026, 3, 1, 9, tzinfo=UTC))
    _event("auth.login_failed", target=("auth.username", "ada"), when=datetime(2026, 3, 2, 23, 59, tzinfo=UTC))
    _event(
        "graph.activate",
        actor=Actor(user=admin_user),
        target=("graphs.workspace", "7"),
        when=datetime(2026, 3, 3, 0, 0, tzinfo=UTC),
    )
    _event(
        "trajectory.ingest",
        actor=Actor(user=operator, token=token),
        target=("graphs.workspace", "8"),
        when=datetime(2026, 3, 4, 12, tzinfo=UTC),
    )
    return token


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, ["api_token.create", "trajectory.ingest", "graph.activate", "auth.login_failed", "auth.login"]),
        ({"actor": "ada"}, ["graph.activate"]),
        ({"actor": "otto"}, ["trajectory.ingest"]),
        ({"actor": "system"}, ["api_token.create", "auth.login_failed", "auth.login"]),
        ({"verb": "auth."}, ["auth.login_failed", "auth.login"]),
        ({"verb": "auth.login_"}, ["auth.login_failed"]),
        ({"target_type": "graphs.workspace"}, ["trajectory.ingest", "graph.activate"]),
        ({"target_type": "graphs.workspace", "target_id": "7"}, ["graph.activate"]),
        ({"date_from": "2026-03-02", "date_to": "2026-03-03"}, ["graph.activate", "auth.login_failed"]),
        ({"date_to": "2026-03-01"}, ["auth.login"]),
        ({"actor": "nobody"}, []),
    ],
    ids=[
        "all",
        "actor",
        "actor-via-token",
        "system",
        "verb-prefix",
        "verb-longer-prefix",
        "target-type",
        "target-id",
        "date-range-inclusive",
        "date-to",
        "no-match",
    ],
)
def test_filters_narrow_the_events(admin_user, history, query, expected):
    response = logged_in(admin_user).get(URL, query)
    assert response.status_code == 200
    assert _verbs(response) == expected
    if not expected:
        assert b"No events match" in response.content


def test_a_token_actor_is_shown_as_the_token(admin_user, history):
    page = logged_in(admin_user).get(URL, {"verb": "trajectory."}).content.decode()
    assert f"token bot (wm_{history.prefix}_…)" in page


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"date_from": "yesterday"}, "Enter a valid date."),
        ({"date_from": "2026-03-05", "date_to": "2026-03-01"}, "The end date is before the start date."),
        ({"after": "not-a-cursor"}, "This page link is not valid any more"),
    ],
    ids=["bad-date", "reversed-dates", "bad-cursor"],
)
def test_bad_filters_are_explained_not_a_500(admin_user, history, query, message):
    response = logged_in(admin_user).get(URL, query)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert _verbs(response) == []


# --- paging, htmx, query counts ------------------------------------------------------------------------------------


def test_pages_follow_a_cursor_without_gaps_or_repeats(admin_user):
    start = datetime(2026, 3, 1, tzinfo=UTC)
    for n in range(AUDIT_PAGE_SIZE + 5):
        # pairs of events share a timestamp, so the id breaks the tie
        _event("thing.touch", target=("thing", str(n)), when=start.replace(minute=n // 2))
    client = logged_in(admin_user)
    first = client.get(URL, {"verb": "thing."}).content.decode()
    ids_first = re.findall(r"<code>thing:(\d+)</code>", first)
    assert len(ids_first) == AUDIT_PAGE_SIZE
    link = re.search(r'rel="next" href="\?([^"]+)"', first).group(1).replace("&amp;", "&")
    assert "verb=thing." in link
    second = client.get(f"{URL}?{link}").content.decode()
    ids_second = re.findall(r"<code>thing:(\d+)</code>", second)
    assert len(ids_second) == 5
    assert sorted(map(int, ids_first + ids_second)) == list(range(AUDIT_PAGE_SIZE + 5))
    assert ids_first[0] == str(AUDIT_PAGE_SIZE + 4)
    assert "Older events" not in second
    assert 'href="?verb=thing."' in second  # back to the newest page, filters kept


def test_an_htmx_request_gets_only_the_results_fragment(admin_user, history):
    response = logged_in(admin_user).get(URL, {"verb": "auth."}, headers={"HX-Request": "true"})
    page = response.content.decode()
    assert response.status_code == 200
    assert page.lstrip().startswith('<section id="audit-results"')
    assert "<html" not in page and "<form" not in page
    assert _verbs(response) == ["auth.login_failed", "auth.login"]


def test_a_plain_get_renders_the_whole_page_with_the_filter_form(admin_user):
    page = logged_in(admin_user).get(URL, {"verb": "auth."}).content.decode()
    assert "<html" in page and 'hx-get="/accounts/audit/"' in page and 'id="audit-results"' in page
    assert 'name="verb" value="auth."' in page


@pytest.mark.parametrize("count", [3, 30])
def test_the_audit_page_has_a_fixed_query_count(admin_user, operator, django_assert_max_num_queries, count):
    token, _ = api_token_create(actor=Actor.system(), user=operator, name="bot", scopes=["graphs:read"])
    for n in range(count):
        actor = [Actor.system(), Actor(user=admin_user), Actor(user=operator, token=token)][n % 3]
        _event("thing.touch", actor=actor, target=("thing", str(n)), after={"n": n})
    client = logged_in(admin_user)
    with django_assert_max_num_queries(4):
        response = client.get(URL)
    assert response.content.decode().count("thing.touch") == count
    assert ApiToken.objects.count() == 1


def test_audit_page_anonymous_client_cannot_use_htmx_either():
    response = Client().get(URL, headers={"HX-Request": "true"})
    # the whole page goes to the login (config.middleware.HtmxLoginMiddleware), never the fragment
    assert response.status_code == 204 and response["HX-Redirect"].startswith("/accounts/login/?next=")
    assert not response.content
