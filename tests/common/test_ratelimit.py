"""API rate limits (common/ratelimit.py): per token on every authenticated call, per client IP on failed
authentications; 429 with the Error body and Retry-After."""

import time

import pytest
from django.core.cache import cache
from django.test import Client

from accounts.models import ApiToken
from common import ratelimit

URL = "/api/v1/graphs"
WINDOW = 60
T0 = 1_800_000_000.0  # a window boundary (a multiple of 60)


@pytest.fixture(autouse=True)
def clean_cache():
    cache.clear()
    ratelimit.counters.clear()  # what this process counted (the shared counts are gone with the cache)
    yield
    cache.clear()
    ratelimit.counters.clear()


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


def test_failed_authentications_lock_out_the_ips_failing_attempts_until_the_window_ends(limits, clock):
    assert call("wm_wrong").status_code == 401
    assert call(None).status_code == 401  # a missing token is a failure too
    clock["t"] = T0 + 50
    assert_rate_limited(call("wm_wrong"), 10)
    assert call("wm_wrong", ip="198.51.100.1").status_code == 401  # other addresses are untouched
    clock["t"] = T0 + WINDOW
    assert call("wm_wrong").status_code == 401


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


# --- counting in the process, flushing in batches (issue 13) --------------------------------------------------------


def shared_count(scope: str, subject: str, start: float = T0) -> int:
    return cache.get(ratelimit._key(scope, subject, int(start))) or 0


@pytest.fixture
def batches(settings):
    settings.WAYMARK_API_RATE_BATCH = 5
    settings.WAYMARK_API_RATE_FLUSH_SECONDS = 3600  # only the batch size and the limit trigger a flush
    return settings


@pytest.fixture
def processes(monkeypatch):
    """switch(n): act as web process n from now on (each process has its own counters, all share the cache)."""
    own = {}

    def switch(n: int) -> None:
        monkeypatch.setattr(ratelimit, "counters", own.setdefault(n, ratelimit.Counters()))

    return switch


def test_calls_are_added_to_the_shared_count_in_batches(batches, clock):
    def hit():
        return ratelimit.hit("t", "x", limit=10**6, window=WINDOW, batch=5)

    hit()
    assert shared_count("t", "x") == 1  # the first call of a window reads the shared count
    for _ in range(4):
        hit()
    assert shared_count("t", "x") == 1  # four calls unflushed
    hit()
    assert shared_count("t", "x") == 6  # the fifth unflushed call flushes the batch


def test_an_old_flush_is_renewed_after_the_flush_interval(batches, clock):
    batches.WAYMARK_API_RATE_FLUSH_SECONDS = 0.05
    ratelimit.hit("t", "x", limit=10**6, window=WINDOW, batch=5)
    ratelimit.hit("t", "x", limit=10**6, window=WINDOW, batch=5)
    assert shared_count("t", "x") == 1
    time.sleep(0.06)
    ratelimit.hit("t", "x", limit=10**6, window=WINDOW, batch=5)
    assert shared_count("t", "x") == 3


def test_one_process_refuses_exactly_past_the_limit_whatever_the_batch(batches, clock):
    results = [ratelimit.hit("t", "x", limit=23, window=WINDOW, batch=5) for _ in range(30)]
    assert results[:23] == [None] * 23 and set(results[23:]) == {WINDOW}
    assert shared_count("t", "x") == 30  # near the limit every call is written


@pytest.mark.parametrize("seed", range(8))
def test_several_processes_exceed_a_token_limit_by_less_than_a_batch_each(batches, clock, processes, seed):
    import random

    limit, batch, count = 40, 5, 3
    order = random.Random(seed)
    accepted = 0
    for _ in range(4 * limit):
        processes(order.randrange(count))
        if ratelimit.hit("t", "x", limit=limit, window=WINDOW, batch=batch) is None:
            accepted += 1
    assert limit <= accepted <= limit + count * (batch - 1)


def test_a_token_limit_is_shared_by_the_processes(limits, clock, processes, make_token, operator):
    token = make_token(operator, "graphs:read")
    processes(1)
    assert [call(token).status_code for _ in range(2)] == [200, 200]
    processes(2)
    assert [call(token).status_code for _ in range(2)] == [200, 429]  # limit 3: the shared count was read


def test_an_ip_blocked_through_another_process_is_refused_here_within_the_check_interval(limits, clock, processes):
    limits.WAYMARK_API_RATE_CHECK_SECONDS = 0.2
    processes(1)
    ratelimit.check_auth_failures("203.0.113.7")  # process 1 has read the IP's failures: none
    processes(2)
    assert [call("wm_wrong").status_code for _ in range(3)] == [401, 401, 429]
    processes(1)
    ratelimit.check_auth_failures("203.0.113.7")  # within the interval process 1 still counts on its last read
    time.sleep(0.25)
    with pytest.raises(ratelimit.RateLimited):
        ratelimit.check_auth_failures("203.0.113.7")


def test_a_failed_attempt_is_known_at_once_in_its_process(limits, clock, processes):
    limits.WAYMARK_API_RATE_CHECK_SECONDS = 3600
    processes(1)
    assert call("wm_wrong").status_code == 401  # one failure, read back from the shared count
    processes(2)
    assert call("wm_wrong").status_code == 401  # the second: the limit (2) is reached
    processes(1)
    assert call("wm_wrong").status_code == 401  # stale in process 1: one attempt more, counted and read back
    assert call("wm_wrong").status_code == 429


def test_a_token_batch_is_the_setting_or_a_hundredth_of_a_larger_limit(batches):
    assert ratelimit.token_batch(300) == 5  # the setting (5 here): larger than 3
    assert ratelimit.token_batch(1200) == 12
    assert ratelimit.token_batch(100_000) == 1000
    batches.WAYMARK_API_RATE_BATCH = 20
    assert ratelimit.token_batch(1200) == 20


def test_a_high_token_limit_is_flushed_by_time_not_every_batch(batches, clock, settings, make_token, operator):
    settings.WAYMARK_API_RATE_PER_TOKEN = 1_000_000  # a batch of 10,000 calls
    make_token(operator, "graphs:read")
    pk = ApiToken.objects.get().pk
    for _ in range(50):
        ratelimit.check_token(pk)
    assert shared_count("token", str(pk)) == 1  # the first call read the shared count; 49 wait for the interval
    batches.WAYMARK_API_RATE_FLUSH_SECONDS = 0
    ratelimit.check_token(pk)
    assert shared_count("token", str(pk)) == 51


# --- failed-token limits that do not block valid tokens (issue 30, finding 4) ---------------------------------------


def _revoked(make_token, user) -> str:
    from accounts.services import Actor, api_token_revoke

    plaintext = make_token(user, "graphs:read")
    prefix = plaintext.split("_")[1]
    api_token_revoke(actor=Actor.system(), token=ApiToken.objects.get(prefix=prefix))
    return plaintext


def _expired(make_token, user, monkeypatch) -> str:
    """A token that expired a minute ago (created with a day to live, then the clock moved past it)."""
    from datetime import timedelta

    from django.utils import timezone

    from accounts.services import Actor, api_token_create

    _, plaintext = api_token_create(
        actor=Actor.system(),
        user=user,
        name="short-lived",
        scopes=["graphs:read"],
        expires_at=timezone.now() + timedelta(days=1),
    )
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(days=1, minutes=1))
    return plaintext


def test_a_revoked_token_retrying_does_not_starve_a_valid_token_on_the_same_address(
    limits, clock, make_token, operator
):
    revoked = _revoked(make_token, operator)
    valid = make_token(operator, "graphs:read")
    assert {call(revoked).status_code for _ in range(40)} == {401}  # once a second for 40 s: never a 429
    assert call(valid).status_code == 200


def test_revoked_tokens_do_not_count_against_the_address(limits, clock, make_token, operator):
    revoked = _revoked(make_token, operator)
    for _ in range(10):
        call(revoked)
    assert shared_count("authfail", "203.0.113.7") == 0
    assert [call("wm_wrong").status_code for _ in range(3)] == [401, 401, 429]  # the limit (2) is whole


def test_a_revoked_token_is_answered_saying_so(limits, clock, make_token, operator):
    response = call(_revoked(make_token, operator))
    assert response.status_code == 401
    body = response.json()
    assert body["code"] == "unauthorized" and "revoked" in body["message"]
    assert body["details"] == {"reason": "revoked"}
    assert response["WWW-Authenticate"].startswith('Bearer error="invalid_token"')


def test_a_known_revoked_token_is_refused_without_an_hmac_or_a_query(
    limits, clock, make_token, operator, monkeypatch, django_assert_num_queries
):
    from accounts import services

    revoked = _revoked(make_token, operator)
    assert call(revoked).status_code == 401  # learnt from the database once
    digests = []
    monkeypatch.setattr(services, "digest_secret", lambda secret: digests.append(secret) or "x")
    with django_assert_num_queries(0):
        assert call(revoked).status_code == 401
        assert call(revoked[:-4] + "abcd").status_code == 401  # any secret with a revoked prefix
    assert digests == []


def test_an_expired_token_is_answered_401_saying_it_expired_and_does_not_count(
    limits, clock, make_token, operator, monkeypatch
):
    expired = _expired(make_token, operator, monkeypatch)
    responses = [call(expired) for _ in range(5)]
    assert {r.status_code for r in responses} == {401}
    body = responses[0].json()
    assert body["code"] == "unauthorized" and "expired" in body["message"]
    assert body["details"]["reason"] == "expired" and body["details"]["expired_at"]
    assert shared_count("authfail", "203.0.113.7") == 0
    assert call(make_token(operator, "graphs:read")).status_code == 200


def test_a_valid_token_from_an_address_over_its_failure_limit_is_served(limits, clock, make_token, operator):
    valid = make_token(operator, "graphs:read")
    assert [call("wm_wrong").status_code for _ in range(3)] == [401, 401, 429]
    assert call(valid).status_code == 200
    assert call(valid).status_code == 200
    clock["t"] = T0 + 30
    assert_rate_limited(call("wm_wrong"), 30)  # the failing attempts alone are refused
    assert_rate_limited(call(None), 30)
    assert_rate_limited(call(f"wm_{'0' * 12}_{'x' * 40}"), 30)  # well-formed, unknown
    assert shared_count("authfail", "203.0.113.7") == 2  # refused attempts are not counted further


def test_a_wrong_secret_for_a_live_prefix_counts_as_a_failure(limits, clock, make_token, operator):
    valid = make_token(operator, "graphs:read")
    guess = valid[:-4] + ("abcd" if not valid.endswith("abcd") else "efgh")
    assert [call(guess).status_code for _ in range(3)] == [401, 401, 429]
    assert call(valid).status_code == 200


def test_a_valid_tokens_call_makes_no_shared_cache_round_trip_from_a_blocked_address(
    limits, clock, make_token, operator, monkeypatch
):
    limits.WAYMARK_API_RATE_CHECK_SECONDS = 3600
    limits.WAYMARK_API_RATE_FLUSH_SECONDS = 3600
    limits.WAYMARK_TOKEN_CACHE_CHECK_SECONDS = 3600
    limits.WAYMARK_API_RATE_PER_TOKEN = 10**6
    valid = make_token(operator, "graphs:read")
    assert [call("wm_wrong").status_code for _ in range(3)] == [401, 401, 429]
    assert call(valid).status_code == 200  # warm: the token is cached, its counter read once

    def no_round_trip(*args, **kwargs):
        raise AssertionError("a shared-cache round trip on a valid token's call")

    for name in ("get", "get_many", "add", "incr", "set"):
        monkeypatch.setattr(cache, name, no_round_trip)
    assert [call(valid).status_code for _ in range(5)] == [200] * 5
