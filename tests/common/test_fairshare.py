"""Fair shares of ingest (issue 30, finding 5; common/fairshare.py): a token and an agent hold at most so many ingest
requests in flight, counted in the cache across processes; the excess answers 429 with Retry-After and the Error body
while other writers go on; a slot a dead request left behind expires."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.test import Client

from common import fairshare
from common.fairshare import Share
from tests.otlp.agents import OTLP_PATH, genai_agent, protobuf_body
from tests.trajectories.factories import run_item
from trajectories import services
from trajectories.models import Run

ROOT = Path(__file__).resolve().parents[2]
INGEST = "/api/v1/trajectories"


# --- the slot stores ------------------------------------------------------------------------------------------------


def _redis_backend(db: int = 7) -> RedisCache:
    url = django_settings.TEST_REDIS_URL.rsplit("/", 1)[0] + f"/{db}"
    return RedisCache(url, {})


@pytest.fixture(params=["locmem", "file", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request, tmp_path):
    if request.param == "locmem":
        made = LocMemCache(f"fairshare-{tmp_path.name}", {})
    elif request.param == "file":
        made = FileBasedCache(str(tmp_path / "cache"), {})
    else:
        made = _redis_backend()
    made.clear()
    yield made
    made.clear()


def test_slots_are_taken_up_to_the_limit_and_freed_on_release(backend):
    store = fairshare.slots_for(backend)
    share = [Share("t:1", "token", 2)]
    assert store.take(share, "a", 60) is None
    assert store.take(share, "b", 60) is None
    assert store.take(share, "c", 60) == share[0]  # full: the share that refused is named
    store.release(share, "a")
    assert store.take(share, "c", 60) is None


def test_a_subject_full_takes_no_slot_of_the_other(backend):
    store = fairshare.slots_for(backend)
    token, agent = Share("t:1", "token", 5), Share("a:1", "agent", 1)
    assert store.take([token, agent], "first", 60) is None
    assert store.take([token, agent], "second", 60) == agent
    other_token = Share("t:2", "token", 5)
    assert store.take([other_token, agent], "third", 60) == agent  # the agent's share covers all its tokens
    for member in ("x", "y", "z", "w"):  # "second" took no token slot: four more fit under the token's five
        assert store.take([token], member, 60) is None
    assert store.take([token], "v", 60) == token


def test_a_slot_never_released_expires_after_its_lease(backend):
    store = fairshare.slots_for(backend)
    share = [Share("t:crash", "token", 1)]
    assert store.take(share, "crashed", 0.3) is None  # the process died: no release
    assert store.take(share, "next", 0.3) == share[0]
    time.sleep(1.3 if isinstance(backend, FileBasedCache) else 0.4)  # the file cache's expiry has whole seconds
    assert store.take(share, "next", 60) is None


def test_the_file_cache_shares_slots_between_processes_and_a_killed_holder_frees_them(tmp_path):
    """Another process takes the only slot and dies without releasing it: this process sees the slot taken until the
    lease runs out."""
    directory = tmp_path / "cache"
    script = f"""
import django, os
from django.conf import settings
settings.configure(CACHES={{"default": {{"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                                       "LOCATION": {str(directory)!r}}}}})
django.setup()
from django.core.cache import caches
from common import fairshare
assert fairshare.slots_for(caches["default"]).take([fairshare.Share("t:1", "token", 1)], "other", 2) is None
os._exit(9)  # as a killed process: no release
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 9, done.stderr
    store = fairshare.slots_for(FileBasedCache(str(directory), {}))
    share = [Share("t:1", "token", 1)]
    assert store.take(share, "mine", 60) == share[0]
    time.sleep(2.5)
    assert store.take(share, "mine", 60) is None


@pytest.mark.redis
def test_redis_slots_are_shared_between_clients():
    first, second = _redis_backend(), _redis_backend()
    first.clear()
    share = [Share("t:shared", "token", 1)]
    assert fairshare.slots_for(first).take(share, "a", 60) is None
    assert fairshare.slots_for(second).take(share, "b", 60) == share[0]
    fairshare.slots_for(first).release(share, "a")
    assert fairshare.slots_for(second).take(share, "b", 60) is None
    first.clear()


# --- ingest answers -------------------------------------------------------------------------------------------------


@pytest.fixture
def caps(settings):
    settings.WAYMARK_INGEST_CONCURRENT_PER_TOKEN = 1
    settings.WAYMARK_INGEST_CONCURRENT_PER_AGENT = 2
    return settings


def _post(token: str, payload=None, *, path=INGEST, body: bytes | None = None, content_type="application/json"):
    data = body if body is not None else json.dumps(payload if payload is not None else {"runs": [run_item()]})
    return Client().generic("POST", path, data, content_type=content_type, headers={"Authorization": f"Bearer {token}"})


def _hold(plaintext: str, member: str = "elsewhere", lease: float = 60) -> list[Share]:
    """Take the slots of the token's ingest request as a request in flight elsewhere would."""
    token = _token_row(plaintext)
    shares = fairshare.ingest_shares(token.pk, token.user_id)
    assert fairshare.slots_for(_cache()).take(shares, member, lease) is None
    return shares


def _cache():
    from django.core.cache import caches

    return caches["default"]


def _token_row(plaintext: str):
    from accounts.services import api_token_authenticate

    return api_token_authenticate(plaintext)


def assert_too_many_in_flight(response, scope: str, limit: int) -> None:
    assert response.status_code == 429, response.content
    assert response["Retry-After"] == "1"
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == "too_many_in_flight"
    assert body["details"] == {"scope": scope, "limit": limit, "retry_after": 1}


def test_a_token_with_its_share_in_flight_gets_429_while_another_agent_goes_on(db, caps, make_agent_token):
    busy = make_agent_token("trajectories:write", name="busy-agent")
    other = make_agent_token("trajectories:write", name="other-agent")
    _hold(busy)
    assert_too_many_in_flight(_post(busy), "token", 1)
    assert not Run.objects.filter(source="test-agent").exists()
    assert _post(other).status_code == 201


def test_an_agents_tokens_share_the_agents_cap(db, caps, make_agent_token):
    first = make_agent_token("trajectories:write", name="many-tokens")
    second = make_agent_token("trajectories:write", name="many-tokens")
    third = make_agent_token("trajectories:write", name="many-tokens")
    _hold(first, "one")
    _hold(second, "two")
    assert_too_many_in_flight(_post(third), "agent", 2)


def test_the_otlp_export_holds_the_same_share(db, caps, make_agent_token):
    token = make_agent_token("trajectories:write")
    _hold(token)
    response = _post(token, path=OTLP_PATH, body=protobuf_body(genai_agent()), content_type="application/x-protobuf")
    assert_too_many_in_flight(response, "token", 1)


def test_a_slot_is_given_back_whatever_the_answer(db, caps, make_agent_token, settings):
    token = make_agent_token("trajectories:write")
    settings.WAYMARK_INGEST_MAX_BYTES = 5000
    assert _post(token, {"runs": [{"source": ""}]}).status_code == 422
    assert _post(token, body=b"{not json").status_code == 400
    assert _post(token, body=json.dumps({"runs": [run_item(task="x" * 6000)]}).encode()).status_code == 413
    assert _post(token).status_code == 201
    assert _post(token).status_code == 201  # one at a time, each given back


def test_a_slot_left_by_a_dead_request_expires(db, caps, make_agent_token):
    token = make_agent_token("trajectories:write")
    _hold(token, "killed", lease=0.3)
    assert _post(token).status_code == 429
    time.sleep(0.4)
    assert _post(token).status_code == 201


def test_caps_of_zero_turn_the_shares_off(db, settings, make_agent_token):
    settings.WAYMARK_INGEST_CONCURRENT_PER_TOKEN = 0
    settings.WAYMARK_INGEST_CONCURRENT_PER_AGENT = 0
    token = make_agent_token("trajectories:write")
    assert fairshare.ingest_shares(1, 1) == []
    assert _post(token).status_code == 201


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_of_one_token_beyond_its_share_get_429_and_the_rest_are_written(
    caps, make_agent_token, monkeypatch
):
    """Six requests of one token at once, two slots (token cap 2): two reach the service, four answer 429 at once."""
    caps.WAYMARK_INGEST_CONCURRENT_PER_TOKEN = 2
    token = make_agent_token("trajectories:write")
    inside, release = threading.Semaphore(0), threading.Event()
    real = services.run_ingest_batch

    def slow(**kwargs):
        inside.release()
        release.wait(10)
        return real(**kwargs)

    monkeypatch.setattr(services, "run_ingest_batch", slow)
    statuses: list[int] = []

    def send() -> None:
        statuses.append(_post(token).status_code)

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    assert inside.acquire(timeout=10) and inside.acquire(timeout=10)
    deadline = time.monotonic() + 10
    while len(statuses) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(statuses) == [429, 429, 429, 429]  # refused at once, while two are in flight
    release.set()
    for thread in threads:
        thread.join(10)
    assert sorted(statuses) == [201, 201, 429, 429, 429, 429]
    assert Run.objects.filter(source="test-agent").count() == 2


def test_a_refused_request_has_its_body_read_so_the_answer_reaches_a_client_still_sending(db, caps, make_agent_token):
    token = make_agent_token("trajectories:write")
    _hold(token)
    body = json.dumps({"runs": [run_item(task="x" * 200_000)]}).encode()
    stream = io.BytesIO(body)
    response = Client().generic(
        "POST",
        INGEST,
        b"",
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
        **{"CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": "application/json", "wsgi.input": stream},
    )
    assert response.status_code == 429
    assert stream.tell() == len(body)  # read to its end and dropped (a server would else close under the client)


def test_a_body_declared_over_the_limit_answers_413_before_the_share_is_looked_at(db, caps, make_agent_token, settings):
    settings.WAYMARK_INGEST_MAX_BYTES = 100
    token = make_agent_token("trajectories:write")
    _hold(token)
    assert _post(token, body=json.dumps({"runs": [run_item()]}).encode()).status_code == 413


def test_ingest_goes_ahead_uncounted_when_the_cache_is_down(db, caps, make_agent_token, monkeypatch):
    class Down:
        def take(self, *args):
            raise ConnectionError("cache unreachable")

    monkeypatch.setattr(fairshare, "slots_for", lambda backend: Down())
    assert _post(make_agent_token("trajectories:write")).status_code == 201
