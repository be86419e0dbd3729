"""API tokens with an optional expiry (issue 30, "tokens never expire"): set when the token is created (service,
settings and agents pages, the commands), shown on the pages, enforced on every authentication — the process's
cached tokens included — and answered 401 saying the token expired."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import ManagementUtility
from django.db import connections
from django.utils import timezone

from accounts.models import ApiToken, AuditEvent
from accounts.services import Actor, api_token_authenticate, api_token_check, api_token_create
from tests.conftest import logged_in

pytestmark = pytest.mark.django_db

PLAINTEXT = re.compile(r"wm_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}")
NOW = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock(monkeypatch):
    """timezone.now() under the test's control (auto_now fields included)."""
    now = {"t": NOW}
    monkeypatch.setattr(timezone, "now", lambda: now["t"])
    return now


def _token(user, *, expires_at, scopes=("graphs:read",)) -> tuple[ApiToken, str]:
    return api_token_create(actor=Actor(user=user), user=user, name="ci", scopes=list(scopes), expires_at=expires_at)


# --- the service ----------------------------------------------------------------------------------------------------


def test_a_token_can_be_created_with_an_expiry_and_the_audit_event_records_it(viewer, clock):
    token, _ = _token(viewer, expires_at=NOW + timedelta(days=30))
    assert ApiToken.objects.get(pk=token.pk).expires_at == NOW + timedelta(days=30)
    event = AuditEvent.objects.get(verb="api_token.create")
    assert event.after == {"name": "ci", "scopes": ["graphs:read"], "expires_at": "2031-04-03T12:00:00+00:00"}


def test_a_token_without_an_expiry_never_expires_and_says_so_in_its_audit_event(viewer, clock):
    token, plaintext = _token(viewer, expires_at=None)
    assert token.expires_at is None and token.state == "active"
    clock["t"] = NOW + timedelta(days=365 * 50)
    assert api_token_authenticate(plaintext) is not None
    assert AuditEvent.objects.get(verb="api_token.create").after["expires_at"] is None


@pytest.mark.parametrize(
    ("expires_at", "message"),
    [
        (NOW, "in the future"),
        (NOW - timedelta(seconds=1), "in the future"),
        (NOW.replace(tzinfo=None) + timedelta(days=1), "time zone"),
        (NOW + timedelta(days=3650, seconds=1), "at most 3650 days"),
        ("2031-05-01", "a date and time"),
    ],
    ids=["now", "past", "naive", "too-far", "not-a-datetime"],
)
def test_a_bad_expiry_is_refused_and_nothing_is_written(viewer, clock, expires_at, message):
    with pytest.raises(ValueError, match=message):
        _token(viewer, expires_at=expires_at)
    assert not ApiToken.objects.exists() and not AuditEvent.objects.exists()


# --- authentication -------------------------------------------------------------------------------------------------


def test_a_token_works_until_the_instant_it_expires_and_not_at_that_instant(viewer, clock):
    expires_at = NOW + timedelta(hours=1)
    _, plaintext = _token(viewer, expires_at=expires_at)
    clock["t"] = expires_at - timedelta(microseconds=1)
    assert api_token_authenticate(plaintext) is not None
    clock["t"] = expires_at  # exactly at the boundary: expired
    refusal = api_token_check(plaintext)
    assert not isinstance(refusal, ApiToken)
    assert (refusal.reason, refusal.guess) == ("expired", False)
    assert "expired" in refusal.message and "2031-03-04T13:00:00+00:00" in refusal.message


def test_an_expired_token_in_the_process_cache_is_refused_without_a_query(viewer, clock, django_assert_num_queries):
    _, plaintext = _token(viewer, expires_at=NOW + timedelta(minutes=5))
    assert api_token_authenticate(plaintext) is not None  # read from the database, cached
    with django_assert_num_queries(0):
        assert api_token_authenticate(plaintext) is not None  # from the cache
    clock["t"] = NOW + timedelta(minutes=5, seconds=1)  # within the cache entry's lifetime
    with django_assert_num_queries(0):
        assert api_token_check(plaintext).reason == "expired"
        assert api_token_check(plaintext).reason == "expired"  # known by its prefix from now on


def test_the_api_answers_an_expired_token_401_saying_it_expired(viewer, clock, api_client):
    _, plaintext = _token(viewer, expires_at=NOW + timedelta(days=1))
    assert api_client.get("/api/v1/graphs", token=plaintext).status_code == 200
    clock["t"] = NOW + timedelta(days=2)
    response = api_client.get("/api/v1/graphs", token=plaintext)
    assert response.status_code == 401
    body = response.json()
    assert body == {
        "code": "unauthorized",
        "message": "this token expired at 2031-03-05T12:00:00+00:00: create a new one",
        "details": {"reason": "expired", "expired_at": "2031-03-05T12:00:00+00:00"},
    }
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def test_an_expired_token_is_refused_on_the_per_step_path_too(viewer, clock, api_client):
    _, plaintext = _token(viewer, expires_at=NOW + timedelta(days=1), scopes=("procedures:read",))
    assert api_client.get("/api/v1/procedures", token=plaintext).status_code == 200
    clock["t"] = NOW + timedelta(days=1)
    response = api_client.get("/api/v1/procedures", token=plaintext)
    assert response.status_code == 401 and response.json()["details"]["reason"] == "expired"


# --- the settings page ---------------------------------------------------------------------------------------------


def _post(client, data: dict):
    client.get("/accounts/settings/")
    return client.post("/accounts/settings/", {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def test_the_settings_page_creates_a_token_that_expires_after_the_days_given(viewer, clock):
    response = _post(logged_in(viewer), {"name": "laptop", "scopes": ["graphs:read"], "expires_in_days": "30"})
    assert response.status_code == 200
    token = ApiToken.objects.get()
    assert token.expires_at == NOW + timedelta(days=30)
    assert "expires 2031-04-03 12:00" in response.content.decode()
    assert api_token_authenticate(PLAINTEXT.search(response.content.decode()).group(0)) == token


def test_an_empty_expiry_on_the_page_means_never(viewer, clock):
    response = _post(logged_in(viewer), {"name": "laptop", "scopes": ["graphs:read"], "expires_in_days": ""})
    assert response.status_code == 200
    assert ApiToken.objects.get().expires_at is None


@pytest.mark.parametrize(
    ("days", "message"),
    [
        ("abc", "a whole number of days"),
        ("1.5", "a whole number of days"),
        ("0", "at least 1 day"),
        ("-3", "at least 1 day"),
        ("3651", "at most 3650 days"),
        ("9" * 40, "at most 3650 days"),
    ],
    ids=["text", "fraction", "zero", "negative", "too-long", "huge"],
)
def test_a_bad_expiry_on_the_page_is_rerendered_with_its_message_and_writes_nothing(viewer, clock, days, message):
    response = _post(logged_in(viewer), {"name": "laptop", "scopes": ["graphs:read"], "expires_in_days": days})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not ApiToken.objects.exists() and not AuditEvent.objects.exists()


def test_the_settings_page_shows_each_tokens_expiry_in_a_fixed_number_of_queries(
    operator, clock, django_assert_max_num_queries
):
    for n in range(3):
        _token(operator, expires_at=None)
        _token(operator, expires_at=NOW + timedelta(days=1 + n))
        _token(operator, expires_at=NOW + timedelta(hours=1))
    clock["t"] = NOW + timedelta(hours=2)  # the one-hour tokens have expired
    client = logged_in(operator)
    with django_assert_max_num_queries(4):
        page = client.get("/accounts/settings/").content.decode()
    assert page.count("never expires") == 3
    assert page.count("expires 2031-03-05 12:00") == 1 and page.count("expires 2031-03-07 12:00") == 1
    assert page.count("expired 2031-03-04 13:00") == 3
    assert page.count("Revoke…") == 6  # an expired token cannot be used: nothing to revoke


def test_the_agents_page_creates_and_shows_tokens_with_an_expiry(operator, agent, clock):
    client = logged_in(operator)
    client.get("/accounts/settings/agents/")
    csrf = client.cookies["csrftoken"].value
    data = {
        "action": "token",
        "agent": str(agent.pk),
        "name": "nightly",
        "scopes": ["trajectories:write"],
        "expires_in_days": "7",
        "csrfmiddlewaretoken": csrf,
    }
    response = client.post("/accounts/settings/agents/", data)
    assert response.status_code == 200
    assert ApiToken.objects.get(user=agent).expires_at == NOW + timedelta(days=7)
    assert "expires 2031-03-11 12:00" in response.content.decode()
    bad = client.post("/accounts/settings/agents/", {**data, "expires_in_days": "never"})
    assert bad.status_code == 400 and "a whole number of days" in bad.content.decode()
    assert ApiToken.objects.filter(user=agent).count() == 1


# --- the commands ---------------------------------------------------------------------------------------------------


@pytest.fixture
def run(capsys, monkeypatch):
    monkeypatch.setattr(connections, "close_all", lambda: None)  # keep the test's transaction

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            ManagementUtility(["manage.py", *argv]).execute()
            status = 0
        except SystemExit as exit_:
            status = exit_.code
        out, err = capsys.readouterr()
        return status, out, err

    return run


def test_create_api_token_takes_an_expiry_in_days(run, viewer, clock):
    status, out, err = run(
        "create_api_token", "--user", "vera", "--name", "ci", "--scope", "graphs:read", "--expires-in", "14"
    )
    assert (status, err) == (0, "")
    token = api_token_authenticate(out.strip())
    assert token.expires_at == NOW + timedelta(days=14)


@pytest.mark.parametrize(
    ("days", "reason"),
    [
        ("abc", "--expires-in takes a whole number of days from 1 to 3650, not 'abc'"),
        ("0", "--expires-in takes a whole number of days from 1 to 3650, not '0'"),
        ("3651", "--expires-in takes a whole number of days from 1 to 3650, not '3651'"),
        ("", "--expires-in takes a whole number of days from 1 to 3650, not ''"),
        ("2.5", "not '2.5'"),
    ],
    ids=["text", "zero", "too-long", "empty", "fraction"],
)
def test_a_bad_expiry_on_the_commands_exits_2_with_a_one_line_reason(run, viewer, operator, clock, days, reason):
    for argv in (
        ("create_api_token", "--user", "vera", "--name", "ci", "--scope", "graphs:read", "--expires-in", days),
        ("create_agent", "bot", "--scope", "trajectories:write", "--expires-in", days),
    ):
        status, out, err = run(*argv)
        assert (status, out) == (2, ""), argv
        assert reason in err and len(err.strip().splitlines()) == 1
    assert not ApiToken.objects.exists() and not AuditEvent.objects.exists()


def test_create_agent_takes_an_expiry_in_days(run, clock):
    status, out, err = run("create_agent", "bot", "--scope", "trajectories:write", "--expires-in", "3")
    assert (status, err) == (0, "")
    assert api_token_authenticate(out.strip()).expires_at == NOW + timedelta(days=3)
