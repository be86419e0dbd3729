"""Login throttling that a third party cannot turn on others (issue 30, finding 4): OWASP's device cookies, with
failures counted per (username, address), per address, and per username from browsers without its device cookie.

Limits here: 3 failures per (username, address) and per device cookie, 6 per address, 6 per username from browsers
without its device cookie, each lock 300 seconds."""

import pytest
from django.core import signing
from django.test import override_settings

from accounts import throttle
from accounts.models import AuditEvent, User

from .conftest import PASSWORD, Browser

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("limits"),
]

PAIR, PER_ADDRESS, PER_ACCOUNT = 3, 6, 6
ATTACKER = "198.51.100.66"
HOME = "203.0.113.7"
LOGIN_PAGE_HEADING = b"<h1>Log in to Waymark</h1>"


@pytest.fixture
def limits():
    with override_settings(
        WAYMARK_LOGIN_MAX_FAILURES=PAIR,
        WAYMARK_LOGIN_MAX_FAILURES_PER_ADDRESS=PER_ADDRESS,
        WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT=PER_ACCOUNT,
        WAYMARK_LOGIN_LOCKOUT_SECONDS=300,
        WAYMARK_LOGIN_DEVICE_COOKIE_DAYS=90,
    ):
        yield


@pytest.fixture
def password_checks(monkeypatch):
    """How many times a password was checked (User.check_password), to prove a refused attempt checks none."""
    calls = []
    original = User.check_password

    def counted(self, raw_password):
        calls.append(self.username)
        return original(self, raw_password)

    monkeypatch.setattr(User, "check_password", counted)
    return calls


def _verbs() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("verb", flat=True))


def _logged_in(browser: Browser) -> bool:
    return "_auth_user_id" in browser.client.session


def _log_out(browser: Browser) -> None:
    response = browser.client.post(
        "/accounts/logout/", {"csrfmiddlewaretoken": browser.client.cookies["csrftoken"].value}
    )
    assert response.status_code == 302 and not _logged_in(browser)


def _device_cookie_names(browser: Browser) -> list[str]:
    return [name for name in browser.client.cookies if name.startswith("waymark_device_")]


def _hammer(username: str, attempts: int, addresses: list[str]) -> None:
    """Wrong passwords for `username`, spread over `addresses` in turn, each from a fresh browser (no cookie)."""
    for n in range(attempts):
        Browser(addresses[n % len(addresses)]).login(username, "wrong")


def _assert_refused(response, message: bytes) -> None:
    assert response.status_code == 429
    assert LOGIN_PAGE_HEADING in response.content and b'name="password"' in response.content  # the styled page
    assert message in response.content
    assert 0 < int(response["Retry-After"]) <= 300


# --- a third party cannot lock anyone out ---------------------------------------------------------------------------


def test_a_third_party_hammering_the_admin_username_cannot_lock_the_admin_out(admin_user):
    _hammer("ada", 25, [ATTACKER])  # one address, far past every limit
    admin = Browser(HOME)  # a browser the admin never used, from another address
    response = admin.login("ada", PASSWORD)
    assert response.status_code == 302 and _logged_in(admin)


def test_the_attackers_own_address_is_locked_for_that_username_without_a_password_check(admin_user, password_checks):
    _hammer("ada", PAIR, [ATTACKER])
    assert _verbs() == ["auth.login_failed"] * PAIR + ["auth.locked_out"]
    lock = AuditEvent.objects.get(verb="auth.locked_out")
    assert lock.actor_label == "system" and (lock.target_type, lock.target_id) == ("auth.username", "ada")
    assert lock.after == {
        "username": "ada",
        "ip": ATTACKER,
        "known_device": False,
        "locked": ["username_at_address"],
        "seconds": 300,
    }
    checked = len(password_checks)

    refused = Browser(ATTACKER).login("ada", PASSWORD)  # even the right password
    _assert_refused(refused, b"Too many failed login attempts for this username from your network address")
    assert len(password_checks) == checked  # no password was checked
    assert len(_verbs()) == PAIR + 1  # refused attempts are not audited one by one
    assert Browser(ATTACKER).login("someone-else", "wrong").status_code == 200  # other usernames: still counted


def test_an_address_trying_many_usernames_is_locked_for_every_username(admin_user, reviewer):
    for n in range(PER_ADDRESS):
        Browser(ATTACKER).login(f"guess-{n % 3}", "wrong")  # 2 per username: no pair reaches its limit
    lock = AuditEvent.objects.get(verb="auth.locked_out")
    assert lock.after["locked"] == ["address"]
    refused = Browser(ATTACKER).login("rita", PASSWORD)
    _assert_refused(refused, b"Too many failed login attempts from your network address")
    assert Browser(HOME).login("rita", PASSWORD).status_code == 302


def test_a_distributed_attack_locks_only_browsers_without_the_admins_device_cookie(admin_user, password_checks):
    admin = Browser(HOME)
    assert admin.login("ada", PASSWORD).status_code == 302
    assert len(_device_cookie_names(admin)) == 1  # issued on the successful login
    _log_out(admin)

    _hammer("ada", PER_ACCOUNT, [f"198.51.100.{n}" for n in range(PER_ACCOUNT)])  # one failure per address
    lock = AuditEvent.objects.get(verb="auth.locked_out")
    assert lock.after["locked"] == ["username_on_new_devices"]

    checked = len(password_checks)
    stranger = Browser(HOME)  # the right password, from a browser that never logged in as ada
    _assert_refused(stranger.login("ada", PASSWORD), b"browsers it has not logged in from before")
    assert len(password_checks) == checked and not _logged_in(stranger)

    response = admin.login("ada", PASSWORD)  # the admin's own browser
    assert response.status_code == 302 and _logged_in(admin)
    success = AuditEvent.objects.filter(verb="auth.login").order_by("id").last()
    assert success.after == {"username": "ada", "ip": HOME, "user_id": admin_user.pk, "known_device": True}


def test_a_device_cookie_is_locked_after_its_own_failures_and_locks_nothing_else(admin_user):
    admin = Browser(HOME)
    admin.login("ada", PASSWORD)
    _log_out(admin)
    for _ in range(PAIR):
        assert admin.login("ada", "wrong").status_code == 200
    lock = AuditEvent.objects.get(verb="auth.locked_out")
    assert lock.after["locked"] == ["device"] and lock.after["known_device"] is True
    _assert_refused(admin.login("ada", PASSWORD), b"Too many failed login attempts from this browser")
    assert Browser(HOME).login("ada", PASSWORD).status_code == 302  # same address, another browser: untouched


def test_an_attacker_with_a_device_cookie_of_their_own_account_gains_nothing_against_the_admin(admin_user, viewer):
    attacker = Browser(ATTACKER)
    assert attacker.login("vera", PASSWORD).status_code == 302  # the attacker's own account: a cookie for vera
    _log_out(attacker)
    for _ in range(PAIR):
        attacker.login("ada", "wrong")
    assert AuditEvent.objects.get(verb="auth.locked_out").after["locked"] == ["username_at_address"]
    _assert_refused(attacker.login("ada", PASSWORD), b"for this username from your network address")


@pytest.mark.parametrize("forgery", ["tampered", "other-user", "garbage", "expired"])
def test_a_forged_foreign_or_expired_device_cookie_counts_as_no_cookie(admin_user, viewer, monkeypatch, forgery):
    admin = Browser(HOME)
    admin.login("ada", PASSWORD)
    _log_out(admin)
    [name] = _device_cookie_names(admin)
    genuine = admin.client.cookies[name].value
    if forgery == "tampered":
        admin.client.cookies[name] = genuine[:-3] + ("aaa" if not genuine.endswith("aaa") else "bbb")
    elif forgery == "other-user":  # vera's genuine cookie value under ada's cookie name
        other = Browser(HOME)
        other.login("vera", PASSWORD)
        [vera_name] = _device_cookie_names(other)
        admin.client.cookies[name] = other.client.cookies[vera_name].value
    elif forgery == "garbage":
        admin.client.cookies[name] = "not a cookie at all"
    else:  # signed 91 days ago: past WAYMARK_LOGIN_DEVICE_COOKIE_DAYS
        real_time = signing.time.time
        monkeypatch.setattr(signing.time, "time", lambda: real_time() + 91 * 86400)
    for _ in range(PAIR):
        admin.login("ada", "wrong")
    lock = AuditEvent.objects.get(verb="auth.locked_out")
    assert lock.after["known_device"] is False and lock.after["locked"] == ["username_at_address"]


def test_the_device_cookie_is_http_only_same_site_and_scoped_to_the_login_page(admin_user, settings):
    settings.SESSION_COOKIE_SECURE = True
    response = Browser(HOME).login("ada", PASSWORD)
    [cookie] = [morsel for name, morsel in response.cookies.items() if name.startswith("waymark_device_")]
    assert cookie["httponly"] and cookie["secure"]
    assert cookie["samesite"] == "Lax"
    assert cookie["path"] == "/accounts/login/"
    assert int(cookie["max-age"]) == 90 * 86400
    assert "ada" not in cookie.key  # the name is a digest: it does not say whose cookie it is
    payload = signing.loads(cookie.value, salt=throttle.DEVICE_COOKIE_SALT)
    assert set(payload) == {"u", "n"} and payload["u"] == "ada"


def test_each_login_issues_a_fresh_device_cookie(admin_user):
    admin = Browser(HOME)
    admin.login("ada", PASSWORD)
    [name] = _device_cookie_names(admin)
    first = admin.client.cookies[name].value
    _log_out(admin)
    admin.login("ada", PASSWORD)
    assert admin.client.cookies[name].value != first
    assert _device_cookie_names(admin) == [name]


def test_a_success_clears_the_pair_count_but_not_the_address_or_account_counts(admin_user, viewer):
    for _ in range(PAIR - 1):
        Browser(HOME).login("ada", "wrong")
    assert Browser(HOME).login("ada", PASSWORD).status_code == 302
    for _ in range(PAIR - 1):
        assert Browser(HOME).login("ada", "wrong").status_code == 200
    assert "auth.locked_out" not in _verbs()
    # 4 failures from HOME so far: two more (any usernames) reach the address limit, the success did not clear it
    Browser(HOME).login("nobody", "wrong")
    Browser(HOME).login("nobody", "wrong")
    assert AuditEvent.objects.get(verb="auth.locked_out").after["locked"] == ["address"]


def test_usernames_are_counted_case_insensitively(admin_user):
    for typed in ["ada", "ADA", "Ada"]:
        Browser(ATTACKER).login(typed, "wrong")
    assert AuditEvent.objects.get(verb="auth.locked_out").after["locked"] == ["username_at_address"]
    assert Browser(ATTACKER).login("aDa", PASSWORD).status_code == 429


def test_a_lock_ends_after_its_seconds(admin_user, monkeypatch):
    _hammer("ada", PAIR, [ATTACKER])
    assert Browser(ATTACKER).login("ada", PASSWORD).status_code == 429
    real_time = throttle.time.time
    monkeypatch.setattr(throttle.time, "time", lambda: real_time() + 301)
    assert Browser(ATTACKER).login("ada", PASSWORD).status_code == 302


def test_odd_usernames_never_answer_500_and_lock_no_one_else(admin_user):
    for username in ["", " ", "a" * 400, "ünï\u202ecode", "ada\x00"]:
        response = Browser(ATTACKER).login(username, "wrong")
        assert response.status_code in (200, 429), username
    assert Browser(HOME).login("ada", PASSWORD).status_code == 302


def test_the_admin_sites_login_is_the_throttled_login_page(admin_user, password_checks):
    browser = Browser(ATTACKER)
    browser.csrf()
    token = browser.client.cookies["csrftoken"].value
    response = browser.client.post(
        "/admin/login/", {"username": "ada", "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")
    assert password_checks == [] and not _logged_in(browser)  # no password is checked past the throttle
    assert browser.client.get("/admin/login/?next=/admin/")["Location"] == "/accounts/login/?next=/admin/"


def test_the_system_check_refuses_limits_that_would_let_one_address_lock_an_account(settings):
    assert throttle.check_limits() == []
    settings.WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT = PAIR
    assert [message.id for message in throttle.check_limits()] == ["accounts.W001"]
    settings.WAYMARK_LOGIN_LOCKOUT_SECONDS = 0
    assert [message.id for message in throttle.check_limits()] == ["accounts.E001", "accounts.W001"]
