import re

import pytest
from django.test import Client

from accounts.models import ApiToken, AuditEvent
from accounts.services import Actor, api_token_authenticate, api_token_create, api_token_revoke
from accounts.token_cache import tokens
from accounts.tokens import digest_secret, split_token
from tests.conftest import logged_in

pytestmark = pytest.mark.django_db

PLAINTEXT = re.compile(r"wm_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}")


def _csrf(client: Client) -> str:
    client.get("/accounts/settings/")
    return client.cookies["csrftoken"].value


def _create(client: Client, name: str, *scopes: str):
    return client.post(
        "/accounts/settings/", {"name": name, "scopes": list(scopes), "csrfmiddlewaretoken": _csrf(client)}
    )


# --- the service ----------------------------------------------------------------------------------------------------


def test_a_token_is_stored_as_prefix_and_digest_never_the_secret(viewer):
    token, plaintext = api_token_create(actor=Actor(user=viewer), user=viewer, name="ci", scopes=["graphs:read"])
    prefix, secret = split_token(plaintext)
    stored = ApiToken.objects.get(pk=token.pk)
    assert stored.prefix == prefix
    assert stored.digest == digest_secret(secret) != secret
    assert secret not in str(ApiToken.objects.filter(pk=token.pk).values().get())
    event = AuditEvent.objects.get(verb="api_token.create")
    assert event.after == {"name": "ci", "scopes": ["graphs:read"], "expires_at": None}
    assert secret not in str(event.after) + event.target_label


@pytest.mark.parametrize(
    ("name", "scopes", "message"),
    [
        ("  ", ["graphs:read"], "needs a name"),
        ("x" * 101, ["graphs:read"], "at most 100"),
        ("ci", [], "at least one scope"),
        ("ci", ["graphs:read", "graphs:write-everything"], "unknown scope"),
        ("ci", ["reviews:judge"], "reviews:judge needs the reviewer role"),
        ("ci", ["procedures:mine", "graphs:read"], "procedures:mine needs the operator role"),
    ],
    ids=["blank-name", "long-name", "no-scope", "unknown-scope", "judge-without-reviewer", "mine-without-operator"],
)
def test_token_creation_refuses_bad_input_and_writes_nothing(viewer, name, scopes, message):
    with pytest.raises(ValueError, match=message):
        api_token_create(actor=Actor(user=viewer), user=viewer, name=name, scopes=scopes)
    assert not ApiToken.objects.exists()
    assert not AuditEvent.objects.exists()


def test_an_inactive_user_cannot_get_a_token(outsider):
    with pytest.raises(ValueError, match="inactive"):
        api_token_create(actor=Actor.system(), user=outsider, name="ci", scopes=["graphs:read"])
    assert not ApiToken.objects.exists()


def test_role_bound_scopes_are_granted_to_holders_of_the_role(operator):
    token, _ = api_token_create(
        actor=Actor(user=operator), user=operator, name="miner", scopes=["procedures:mine", "reviews:judge"]
    )
    assert token.scopes == ["procedures:mine", "reviews:judge"]


def test_authentication_accepts_an_active_token_and_records_its_last_use_at_the_next_flush(viewer, make_token):
    plaintext = make_token(viewer, "trajectories:read")
    token = api_token_authenticate(plaintext)
    assert token is not None and token.user == viewer
    assert ApiToken.objects.get(pk=token.pk).last_used_at is None  # not written on the request path
    assert tokens.flush_used(force=True) == 1
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None


@pytest.mark.parametrize("mangle", ["", "wm_nonsense", "Bearer x", "wm_{prefix}_wrong-secret", "{plaintext}x"])
def test_authentication_refuses_malformed_and_wrong_tokens(viewer, make_token, mangle):
    plaintext = make_token(viewer, "trajectories:read")
    prefix, _ = split_token(plaintext)
    assert api_token_authenticate(mangle.format(prefix=prefix, plaintext=plaintext)) is None


def test_a_revoked_token_no_longer_authenticates_and_the_revocation_is_audited(viewer):
    token, plaintext = api_token_create(actor=Actor(user=viewer), user=viewer, name="ci", scopes=["graphs:read"])
    api_token_revoke(actor=Actor(user=viewer), token=token)
    api_token_revoke(actor=Actor(user=viewer), token=token)  # idempotent: one event
    assert api_token_authenticate(plaintext) is None
    assert AuditEvent.objects.filter(verb="api_token.revoke").count() == 1


# --- the API -------------------------------------------------------------------------------------------------------


@pytest.mark.urls("tests.accounts.api_urls")
def test_the_api_accepts_a_token_until_it_is_revoked_then_answers_401(viewer, api_client):
    token, plaintext = api_token_create(actor=Actor(user=viewer), user=viewer, name="ci", scopes=["trajectories:read"])
    ok = api_client.get("/api/whoami", token=plaintext)
    assert ok.status_code == 200
    assert ok.json() == {"username": "vera", "token": "ci"}
    api_token_revoke(actor=Actor(user=viewer), token=token)
    assert api_client.get("/api/whoami", token=plaintext).status_code == 401


def test_a_token_revoked_on_the_settings_page_gets_401_from_the_trajectories_api(viewer, api_client):
    client = logged_in(viewer)
    plaintext = PLAINTEXT.search(_create(client, "agent", "trajectories:read").content.decode()).group(0)
    assert api_client.get("/api/v1/trajectories", token=plaintext).status_code == 200
    token = ApiToken.objects.get()
    client.post(f"/accounts/settings/tokens/{token.pk}/revoke/", {"csrfmiddlewaretoken": _csrf(client)})
    response = api_client.get("/api/v1/trajectories", token=plaintext)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"


@pytest.mark.urls("tests.accounts.api_urls")
def test_the_api_answers_401_without_a_token_and_for_an_inactive_owner(viewer, api_client, make_token):
    plaintext = make_token(viewer, "trajectories:read")
    assert api_client.get("/api/whoami").status_code == 401
    viewer.is_active = False
    viewer.save()
    assert api_client.get("/api/whoami", token=plaintext).status_code == 401


@pytest.mark.urls("tests.accounts.api_urls")
def test_a_role_bound_scope_stops_working_when_the_user_loses_the_role(reviewer, api_client, make_token):
    plaintext = make_token(reviewer, "reviews:judge", "trajectories:read")
    assert api_client.get("/api/queue", token=plaintext).status_code == 200
    reviewer.groups.clear()
    assert api_client.get("/api/queue", token=plaintext).status_code == 403
    assert api_client.get("/api/whoami", token=plaintext).status_code == 200
    assert ApiToken.objects.get().scopes == ["reviews:judge", "trajectories:read"]


# --- the settings page ---------------------------------------------------------------------------------------------


def test_the_settings_page_sends_anonymous_visitors_to_login(client):
    response = client.get("/accounts/settings/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_an_inactive_session_is_treated_as_anonymous(outsider):
    assert logged_in(outsider).get("/accounts/settings/").status_code == 302


def test_creating_a_token_on_the_settings_page_shows_the_plaintext_exactly_once(viewer):
    client = logged_in(viewer)
    response = _create(client, "laptop", "graphs:read", "trajectories:read")
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    shown = PLAINTEXT.findall(response.content.decode())
    assert len(set(shown)) == 1
    plaintext = shown[0]
    token = ApiToken.objects.get()
    assert (token.user, token.name, token.scopes) == (viewer, "laptop", ["graphs:read", "trajectories:read"])
    assert api_token_authenticate(plaintext) == token

    again = client.get("/accounts/settings/").content.decode()
    assert plaintext not in again
    assert f"wm_{token.prefix}_…" in again
    assert "laptop" in again


def test_a_viewer_cannot_grant_a_role_bound_scope_from_the_page(viewer):
    client = logged_in(viewer)
    page = client.get("/accounts/settings/").content.decode()
    assert re.search(r'value="reviews:judge"[^>]*disabled', page)
    response = _create(client, "sneaky", "reviews:judge")
    assert response.status_code == 400
    assert "reviews:judge needs the reviewer role" in response.content.decode()
    assert not ApiToken.objects.exists()
    assert not PLAINTEXT.search(response.content.decode())


def test_a_reviewer_can_grant_reviews_judge_from_the_page(reviewer):
    response = _create(logged_in(reviewer), "judge", "reviews:judge")
    assert response.status_code == 200
    assert ApiToken.objects.get().scopes == ["reviews:judge"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "", "scopes": ["graphs:read"]}, "Give the token a name."),
        ({"name": "x"}, "Choose at least one scope."),
        ({"name": "x", "scopes": ["root"]}, "Select a valid choice."),
    ],
    ids=["no-name", "no-scope", "unknown-scope"],
)
def test_a_bad_token_form_is_rerendered_with_its_message_and_writes_nothing(viewer, data, message):
    client = logged_in(viewer)
    response = client.post("/accounts/settings/", {**data, "csrfmiddlewaretoken": _csrf(client)})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not ApiToken.objects.exists()


def test_creating_a_token_needs_csrf(viewer):
    response = logged_in(viewer).post("/accounts/settings/", {"name": "x", "scopes": ["graphs:read"]})
    assert response.status_code == 403
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("count", [3, 30])
def test_the_settings_page_has_a_fixed_query_count(operator, django_assert_max_num_queries, count):
    for n in range(count):
        api_token_create(actor=Actor.system(), user=operator, name=f"t{n}", scopes=["graphs:read"])
    client = logged_in(operator)
    with django_assert_max_num_queries(4):
        response = client.get("/accounts/settings/")
    assert response.content.decode().count("Revoke…") == count


# --- revoking -------------------------------------------------------------------------------------------------------


def test_revoking_asks_for_confirmation_then_revokes_on_post(viewer):
    token, plaintext = api_token_create(actor=Actor(user=viewer), user=viewer, name="ci", scopes=["graphs:read"])
    client = logged_in(viewer)
    url = f"/accounts/settings/tokens/{token.pk}/revoke/"
    confirm = client.get(url)
    assert confirm.status_code == 200
    assert b"cannot be undone" in confirm.content
    assert ApiToken.objects.get().revoked_at is None

    response = client.post(url, {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert response.status_code == 302
    assert response["Location"] == "/accounts/settings/"
    assert ApiToken.objects.get().revoked_at is not None
    assert api_token_authenticate(plaintext) is None
    event = AuditEvent.objects.get(verb="api_token.revoke")
    assert event.actor_user == viewer
    assert "revoked" in client.get("/accounts/settings/").content.decode()


def test_revoking_needs_csrf(viewer):
    token, _ = api_token_create(actor=Actor(user=viewer), user=viewer, name="ci", scopes=["graphs:read"])
    assert logged_in(viewer).post(f"/accounts/settings/tokens/{token.pk}/revoke/").status_code == 403
    assert ApiToken.objects.get().revoked_at is None


def test_nobody_else_can_see_or_revoke_a_users_token(viewer, admin_user, reviewer):
    token, _ = api_token_create(actor=Actor(user=viewer), user=viewer, name="ci", scopes=["graphs:read"])
    url = f"/accounts/settings/tokens/{token.pk}/revoke/"
    for other in (admin_user, reviewer):
        client = logged_in(other)
        assert client.get(url).status_code == 404
        csrf = _csrf(client)
        assert client.post(url, {"csrfmiddlewaretoken": csrf}).status_code == 404
    anonymous = Client().post(url)
    assert anonymous.status_code == 302
    assert ApiToken.objects.get().revoked_at is None


@pytest.mark.parametrize(
    "pepper", ["short", "p" * 64, "a pepper longer than SHA-256's 64-byte block, hashed first by HMAC" * 2]
)
def test_the_digest_is_hmac_sha256_of_the_secret_under_the_pepper(settings, pepper):
    import hashlib
    import hmac

    from accounts.tokens import digest_secret

    settings.WAYMARK_TOKEN_PEPPER = pepper
    for secret in ["", "s", "x" * 43, "ünïcode-secret"]:
        expected = hmac.new(pepper.encode(), secret.encode(), hashlib.sha256).hexdigest()
        assert digest_secret(secret) == expected
        assert digest_secret(secret) == expected  # the keyed MAC is copied, never fed twice
