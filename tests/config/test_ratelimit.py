"""API rate limits (config/ratelimit.py): per token on every authenticated call, per client IP on failed
authentications; 429 with the Error body and Retry-After."""

import pytest
from django.core.cache import cache
from django.test import Client

from config import ratelimit

URL = "/api/v1/graphs"
WINDOW = 60
T0 = 1_800_000_000.0  # a window boundary (a multiple of 60)


@pytest.fixture(autouse=True)
def clean_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def clock(monkeypatch):
    """A settable clock for the limiter's windows."""
    now = {"t": T0}
    monkeypatch.setattr(ratelimit.time, "time", lambda: now["t"])
    return now


@pytest.fixture
def limits(settings):
    settings.WAYMARK_API_RATE_PER_TOKEN = 3
    settings.WAYMARK_API_AUTH_FAILURES_PER_IP = 2
    settings.WAYMARK_API_RATE_WINDOW_SECONDS = WINDOW
    return settings


def call(token: str | None = None, ip: str = "203.0.113.7"):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
    return Client().get(URL, REMOTE_ADDR=ip, **headers)


def assert_rate_limited(response, retry_after: int):
    assert response.status_code == 429
    assert response["Retry-After"] == str(retry_after)
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == "rate_limited"
    assert body["message"]
    assert body["details"] == {"retry_after": retry_after}


def test_a_token_is_limited_per_window(limits, clock, make_token, operator):
    token = make_token(operator, "graphs:read")
    assert [call(token).status_code for _ in range(3)] == [200, 200, 200]
    clock["t"] = T0 + 15
    assert_rate_limited(call(token), 45)
    other = make_token(operator, "graphs:read")
    assert call(other).status_code == 200  # the limit is per token, not per user or IP


def test_a_token_limit_resets_with_the_next_window(limits, clock, make_token, operator):
    token = make_token(operator, "graphs:read")
    for _ in range(3):
        call(token)
    assert call(token).status_code == 429
    clock["t"] = T0 + WINDOW
    assert call(token).status_code == 200


def test_calls_refused_for_a_missing_scope_count_too(limits, clock, make_token, operator):
    token = make_token(operator, "procedures:read")
    assert [call(token).status_code for _ in range(3)] == [403, 403, 403]
    assert call(token).status_code == 429


def test_failed_authentications_lock_out_the_ip_then_even_a_valid_token(limits, clock, make_token, operator):
    valid = make_token(operator, "graphs:read")
    assert call("wm_wrong").status_code == 401
    assert call(None).status_code == 401  # a missing token is a failure too
    clock["t"] = T0 + 50
    assert_rate_limited(call("wm_wrong"), 10)
    assert_rate_limited(call(valid), 10)  # refused before any token is looked at
    assert call(valid, ip="198.51.100.1").status_code == 200  # other addresses are untouched
    clock["t"] = T0 + WINDOW
    assert call(valid).status_code == 200


def test_a_revoked_token_is_a_failed_authentication(limits, clock, make_token, operator):
    from accounts.models import ApiToken
    from accounts.services import Actor, api_token_revoke

    revoked = make_token(operator, "graphs:read")
    api_token_revoke(actor=Actor.system(), token=ApiToken.objects.get())
    assert [call(revoked).status_code for _ in range(2)] == [401, 401]
    assert call(revoked).status_code == 429


def test_the_client_ip_honours_trusted_proxies(limits, clock, settings):
    settings.WAYMARK_TRUSTED_PROXY_COUNT = 1
    proxied = {"HTTP_X_FORWARDED_FOR": "192.0.2.9", "REMOTE_ADDR": "10.0.0.1"}
    for _ in range(2):
        assert Client().get(URL, **proxied).status_code == 401
    assert Client().get(URL, **proxied).status_code == 429
    other = {"HTTP_X_FORWARDED_FOR": "192.0.2.10", "REMOTE_ADDR": "10.0.0.1"}  # same proxy, another client
    assert Client().get(URL, **other).status_code == 401


def test_hit_counts_within_the_window(clock):
    assert [ratelimit.hit("t", "x", limit=2, window=10) for _ in range(3)] == [None, None, 10]
    clock["t"] = T0 + 10
    assert ratelimit.hit("t", "x", limit=2, window=10) is None
