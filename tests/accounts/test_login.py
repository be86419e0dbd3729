import pytest
from django.test import Client, override_settings

from accounts.models import AuditEvent

from .conftest import PASSWORD, Browser

pytestmark = pytest.mark.django_db

MAX = 3


def _verbs() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("verb", flat=True))


def _is_logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_the_login_page_renders_for_anonymous_visitors(browser):
    response = browser.client.get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="password"' in response.content


def test_it_logs_in_with_the_right_password_and_audits_it(browser, viewer):
    response = browser.login("vera", PASSWORD)
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert _is_logged_in(browser.client)
    event = AuditEvent.objects.get()
    assert event.verb == "auth.login"
    assert event.actor_user is None and event.actor_label == "system"
    assert (event.target_type, event.target_id) == ("auth.username", "vera")
    assert event.after == {"username": "vera", "ip": "203.0.113.7", "user_id": viewer.pk, "known_device": False}


def test_it_follows_a_safe_next_url_and_ignores_a_foreign_one(browser, viewer):
    assert browser.login("vera", PASSWORD, next="/accounts/settings/")["Location"] == "/accounts/settings/"
    other = Browser()
    assert other.login("vera", PASSWORD, next="https://evil.example/")["Location"] == "/"


def test_a_logged_in_user_visiting_the_login_page_is_sent_on(viewer):
    client = Client()
    client.force_login(viewer)
    assert client.get("/accounts/login/")["Location"] == "/"


def test_a_wrong_password_rerenders_the_form_and_audits_the_failure_without_the_password(browser, viewer):
    response = browser.login("vera", "not-the-password")
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content
    assert not _is_logged_in(browser.client)
    event = AuditEvent.objects.get()
    assert event.verb == "auth.login_failed"
    assert event.actor_label == "system"
    assert event.after == {"username": "vera", "ip": "203.0.113.7", "known_device": False}
    assert "not-the-password" not in str(event.before) + str(event.after) + event.target_id + event.target_label


def test_an_inactive_account_cannot_log_in(browser, outsider):
    response = browser.login("oscar", PASSWORD)
    assert response.status_code == 200
    assert not _is_logged_in(browser.client)
    assert _verbs() == ["auth.login_failed"]


def test_an_empty_form_is_not_counted_as_an_attempt(browser):
    response = browser.login("", "")
    assert response.status_code == 200
    assert b"This field is required" in response.content
    assert _verbs() == []


def test_login_enforces_csrf(viewer):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "vera", "password": PASSWORD})
    assert response.status_code == 403
    assert not _is_logged_in(client)
    assert _verbs() == []


@override_settings(WAYMARK_LOGIN_MAX_FAILURES=MAX, WAYMARK_LOGIN_LOCKOUT_SECONDS=300)
def test_a_username_is_locked_out_from_an_address_after_too_many_failures_even_with_the_right_password(viewer):
    attacker = Browser("198.51.100.1")
    for _ in range(MAX):
        response = Browser("198.51.100.1").login("vera", "wrong")
        assert response.status_code == 200
    assert b"further attempts are refused" in response.content
    assert _verbs() == ["auth.login_failed"] * MAX + ["auth.locked_out"]
    lock = AuditEvent.objects.get(verb="auth.locked_out")
    assert lock.after == {
        "username": "vera",
        "ip": "198.51.100.1",
        "known_device": False,
        "locked": ["username_at_address"],
        "seconds": 300,
    }

    refused = attacker.login("vera", PASSWORD)
    assert refused.status_code == 429
    assert b"Too many failed login attempts for this username from your network address" in refused.content
    assert b'name="password"' in refused.content
    assert 0 < int(refused["Retry-After"]) <= 300
    assert not _is_logged_in(attacker.client)
    assert len(_verbs()) == MAX + 1  # the refused attempt checked no password and recorded no failure
    assert Browser("192.0.2.50").login("vera", PASSWORD).status_code == 302  # from elsewhere: vera gets in


@override_settings(WAYMARK_LOGIN_MAX_FAILURES=MAX, WAYMARK_LOGIN_LOCKOUT_SECONDS=300)
def test_a_lockout_of_one_username_leaves_other_usernames_alone(viewer, reviewer):
    for _ in range(MAX):
        Browser("198.51.100.1").login("vera", "wrong")
    assert Browser("198.51.100.1").login("rita", PASSWORD).status_code == 302


@override_settings(
    WAYMARK_LOGIN_MAX_FAILURES=MAX, WAYMARK_LOGIN_MAX_FAILURES_PER_ADDRESS=MAX, WAYMARK_LOGIN_LOCKOUT_SECONDS=300
)
def test_a_client_address_is_locked_out_after_too_many_failures_across_usernames(viewer, reviewer):
    same_address = Browser("203.0.113.99")
    for username in ["vera", "rita", "nobody"]:
        same_address.login(username, "wrong")
    assert AuditEvent.objects.get(verb="auth.locked_out").after["locked"] == ["address"]

    refused = same_address.login("rita", PASSWORD)
    assert refused.status_code == 429
    assert b"your network address" in refused.content
    assert not _is_logged_in(same_address.client)
    assert Browser("203.0.113.100").login("rita", PASSWORD).status_code == 302


@override_settings(WAYMARK_LOGIN_MAX_FAILURES=MAX, WAYMARK_LOGIN_LOCKOUT_SECONDS=300)
def test_a_success_resets_the_count_of_the_username_at_that_address(viewer):
    for _ in range(MAX - 1):
        Browser("198.51.100.1").login("vera", "wrong")
    assert Browser("198.51.100.1").login("vera", PASSWORD).status_code == 302
    for _ in range(MAX - 1):
        assert Browser("198.51.100.1").login("vera", "wrong").status_code == 200
    assert Browser("198.51.100.1").login("vera", PASSWORD).status_code == 302
    assert "auth.locked_out" not in _verbs()


@override_settings(WAYMARK_LOGIN_MAX_FAILURES=MAX, WAYMARK_LOGIN_LOCKOUT_SECONDS=300, WAYMARK_TRUSTED_PROXY_COUNT=1)
def test_behind_a_trusted_proxy_the_forwarded_address_is_the_one_counted(viewer):
    for attempt in range(MAX):
        client = Browser("10.0.0.1")
        client.client.defaults["HTTP_X_FORWARDED_FOR"] = f"198.51.100.{attempt}"
        client.login(f"user-{attempt}", "wrong")
    assert "auth.locked_out" not in _verbs()
    assert AuditEvent.objects.filter(verb="auth.login_failed").first().after["ip"].startswith("198.51.100.")


def test_logout_is_post_only(viewer):
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer)
    response = client.get("/accounts/logout/")  # logs nobody out: the dashboard (config.middleware)
    assert response.status_code == 302 and response["Location"] == "/" and response["Allow"] == "POST"
    assert _is_logged_in(client)


def test_logout_needs_csrf_and_then_ends_the_session(viewer):
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer)
    assert client.post("/accounts/logout/").status_code == 403
    assert _is_logged_in(client)
    client.get("/accounts/settings/")
    token = client.cookies["csrftoken"].value
    response = client.post("/accounts/logout/", {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/"
    assert not _is_logged_in(client)
    event = AuditEvent.objects.get(verb="auth.logout")
    assert (event.actor_user, event.after["username"]) == (viewer, "vera")
