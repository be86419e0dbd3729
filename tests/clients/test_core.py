"""The Python client without a server (httpx2.MockTransport): the retry policy, the ETag cache, recording runs and
the job helper, through the sync client and the async one (which drive the same core)."""

import asyncio
import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx2
import pytest
from waymark_client import (
    AsyncWaymark,
    ConflictError,
    InvalidRequest,
    RateLimited,
    ResponseCache,
    RetryPolicy,
    ServerError,
    Waymark,
    WaymarkConnectionError,
    current_run,
)
from waymark_client._core import parse_retry_after

from tests.clients.loops import run_in_own_loop

BASE = "http://waymark.test"
NO_JITTER = RetryPolicy(max_attempts=4, backoff=0.5, multiplier=2.0, jitter=0.0)
STORED = {"created": 1, "existing": 0, "created_ids": [7], "existing_ids": []}
RUN = {"source": "agent", "external_id": "r-1", "task": "t", "outcome": "success", "steps": []}


class Script:
    """A MockTransport handler answering from a list (an exception instance is raised), recording the requests."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def bodies(self):
        return [json.loads(request.content) if request.content else None for request in self.requests]


def response(status, body=None, **headers):
    return httpx2.Response(status, json=body, headers=headers) if body is not None else httpx2.Response(status)


def error(status, code, **headers):
    return httpx2.Response(status, json={"code": code, "message": code, "details": {"x": 1}}, headers=headers)


def client(script, retry=NO_JITTER, **options):
    sleeps: list[float] = []
    made = Waymark(BASE, "wm_t", transport=httpx2.MockTransport(script), retry=retry, sleep=sleeps.append, **options)
    return made, sleeps


# -- the retry policy ------------------------------------------------------------------------------------------------


def test_503_and_429_honour_retry_after_then_succeed():
    script = Script(error(503, "busy", **{"Retry-After": "2"}), error(429, "rate_limited", **{"Retry-After": "5"}))
    script.answers.append(response(201, STORED))
    waymark, sleeps = client(script)
    result = waymark.push([RUN])
    assert result.created_ids == (7,) and result.batches == 1
    assert sleeps == [2.0, 5.0] and len(script.requests) == 3
    assert script.requests[0].headers["Authorization"] == "Bearer wm_t"
    assert script.bodies()[0] == script.bodies()[2] == {"runs": [RUN]}  # the same batch resent


def test_a_retry_after_longer_than_the_limit_gives_up_at_once():
    waymark, sleeps = client(Script(error(429, "rate_limited", **{"Retry-After": "600"})))
    with pytest.raises(RateLimited) as caught:
        waymark.push([RUN])
    assert caught.value.code == "rate_limited" and sleeps == [] and caught.value.attempts == 1


def test_5xx_backs_off_exponentially_then_raises_the_last_error():
    script = Script(error(500, "boom"))
    waymark, sleeps = client(script)
    with pytest.raises(ServerError) as caught:
        waymark.push([RUN])
    assert sleeps == [0.5, 1.0, 2.0] and len(script.requests) == 4
    assert (caught.value.status, caught.value.attempts, caught.value.details) == (500, 4, {"x": 1})


def test_backoff_is_capped_and_jittered():
    policy = RetryPolicy(backoff=1, multiplier=10, max_backoff=5, jitter=0.2)
    assert all(4.0 <= policy.backoff_for(attempt) <= 6.0 for attempt in range(2, 8))
    assert 0.8 <= policy.backoff_for(1) <= 1.2


@pytest.mark.parametrize("status, code", [(400, "malformed_json"), (401, "unauthorized"), (404, "not_found")])
def test_a_4xx_other_than_429_is_never_retried(status, code):
    script = Script(error(status, code))
    waymark, sleeps = client(script)
    with pytest.raises(Exception) as caught:
        waymark.push([RUN])
    assert caught.value.status == status and caught.value.code == code
    assert len(script.requests) == 1 and sleeps == []


def test_a_422_names_the_fields_in_an_invalid_request():
    details = {"errors": [{"loc": ["runs", 0, "steps", 0, "tool"], "msg": "Field required"}]}
    script = Script(httpx2.Response(422, json={"code": "invalid", "message": "bad", "details": details}))
    waymark, _ = client(script)
    with pytest.raises(InvalidRequest) as caught:
        waymark.push([RUN])
    assert caught.value.details == details and len(script.requests) == 1


def test_connect_errors_are_retried_then_reported():
    script = Script(httpx2.ConnectError("refused"))
    waymark, sleeps = client(script)
    with pytest.raises(WaymarkConnectionError) as caught:
        waymark.active_graph("ws")
    assert caught.value.attempts == 4 and len(sleeps) == 3 and "ConnectError" in str(caught.value)


def test_a_timeout_is_retried_for_idempotent_requests_only():
    pushed = Script(httpx2.ReadTimeout("slow"), response(200, {**STORED, "created": 0}))
    waymark, sleeps = client(pushed)
    waymark.push([RUN])
    assert len(pushed.requests) == 2 and sleeps == [0.5]

    claimed = Script(httpx2.ReadTimeout("slow"), response(204))
    waymark, sleeps = client(claimed)
    with pytest.raises(WaymarkConnectionError):  # a repeated claim could lease a second job
        waymark.claim(worker="w")
    assert len(claimed.requests) == 1 and sleeps == []


def test_a_claim_is_retried_when_it_cannot_have_reached_the_server():
    script = Script(httpx2.ConnectError("refused"), error(503, "busy"), response(204))
    waymark, sleeps = client(script)
    assert waymark.claim(worker="w", kinds=["graph_evaluation"]) is None
    assert len(script.requests) == 3 and sleeps == [0.5, 1.0]
    assert script.bodies()[-1] == {"worker": "w", "lease_seconds": 300, "kinds": ["graph_evaluation"]}


def test_a_500_on_a_claim_is_not_retried():
    script = Script(error(500, "boom"))
    waymark, _ = client(script)
    with pytest.raises(ServerError):
        waymark.claim(worker="w")
    assert len(script.requests) == 1


def test_retry_after_reads_seconds_and_http_dates():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_pushes_are_split_into_batches_and_identities_checked():
    script = Script(response(201, STORED))
    waymark, _ = client(script)
    runs = [{**RUN, "external_id": f"r-{n}"} for n in range(5)]
    assert waymark.push(runs, batch_size=2).batches == 3
    assert [len(body["runs"]) for body in script.bodies()] == [2, 2, 1]
    with pytest.raises(ValueError, match="repeats"):
        waymark.push([RUN, RUN])
    with pytest.raises(ValueError, match="external_id"):
        waymark.push([{"source": "a", "task": "t"}])
    assert len(script.requests) == 3  # nothing sent for a refused push


# -- the ETag cache --------------------------------------------------------------------------------------------------

GRAPH = {"workspace": "ws", "seq": 1, "digest": "d1", "parent_digest": None, "meta": {}, "created_at": None,
         "graph": {"nodes": [{"id": "Start"}], "edges": []}}  # fmt: skip


def test_a_second_pull_sends_if_none_match_and_serves_a_304_from_the_cache():
    script = Script(response(200, GRAPH, ETag='"d1"'), response(304, ETag='"d1"'))
    waymark, _ = client(script)
    first = waymark.active_graph("ws")
    second = waymark.active_graph("ws")
    assert "If-None-Match" not in script.requests[0].headers
    assert script.requests[1].headers["If-None-Match"] == '"d1"'
    assert (first.from_cache, second.from_cache) == (False, True)
    assert second.graph == first.graph and second.digest == "d1"
    assert (waymark.cache.hits, waymark.cache.misses) == (1, 1)


def test_a_new_etag_replaces_the_cached_body():
    newer = {**GRAPH, "seq": 2, "digest": "d2"}
    script = Script(response(200, GRAPH, ETag='"d1"'), response(200, newer, ETag='"d2"'), response(304))
    waymark, _ = client(script)
    waymark.active_graph("ws")
    assert waymark.active_graph("ws").seq == 2
    assert waymark.active_graph("ws").seq == 2
    assert [r.headers.get("If-None-Match") for r in script.requests] == [None, '"d1"', '"d2"']


def test_an_answer_without_etag_is_not_cached_and_entries_are_per_url():
    script = Script(
        response(200, {"items": []}),
        response(200, {"items": []}, ETag='"p-all"'),
        response(200, {"items": []}, ETag='"p-ref"', **{"X-Waymark-Revision": "abc"}),
        response(304),
    )
    waymark, _ = client(script)
    waymark.procedures()
    waymark.procedures()
    assert waymark.procedures("refund").revision == "abc"
    cached = waymark.procedures("refund")
    assert cached.from_cache and cached.revision == "abc" and cached.items == ()
    sent = [(r.url.params.get("intent"), r.headers.get("If-None-Match")) for r in script.requests]
    assert sent == [(None, None), (None, None), ("refund", None), ("refund", '"p-ref"')]


def test_the_cache_is_bounded():
    cache = ResponseCache(max_entries=2)
    script = Script(*[response(200, {**GRAPH, "workspace": w}, ETag=f'"{w}"') for w in "abc"])
    waymark, _ = client(script, cache=cache)
    for workspace in "abc":
        waymark.active_graph(workspace)
    assert len(cache) == 2 and cache.get("/api/v1/graphs/a/active") is None


# -- recording runs --------------------------------------------------------------------------------------------------


def test_a_recorded_run_captures_tools_and_is_pushed_on_exit():
    script = Script(response(201, STORED))
    waymark, _ = client(script)
    with waymark.run(task="refund ORD-1", intent="refund", source="agent", metadata={"model": "m"}) as run:

        @run.tool
        def lookup(order_id, verbose=False):
            return {"order": order_id}

        @run.tool(name="issue_refund")
        def refund(amount):
            raise RuntimeError("declined")

        assert lookup("ORD-1") == {"order": "ORD-1"}
        with pytest.raises(RuntimeError):
            refund([1, 2])
        run.succeed(score=0.5)
    item = script.bodies()[0]["runs"][0]
    assert (item["source"], item["external_id"], item["outcome"], item["score"]) == ("agent", run.external_id,
                                                                                     "success", 0.5)  # fmt: skip
    first, second = item["steps"]
    assert (first["tool"], first["arguments"], first["ok"]) == ("lookup", {"order_id": "ORD-1", "verbose": False}, True)
    assert first["observation"] == '{"order": "ORD-1"}' and first["started_at"] <= first["ended_at"]
    assert (second["tool"], second["arguments"], second["ok"]) == ("issue_refund", {"amount": "[1,2]"}, False)
    assert second["observation"] == "RuntimeError: declined"
    assert item["started_at"] <= item["ended_at"] and item["metadata"] == {"model": "m"}


def test_an_exception_fails_the_run_which_is_still_pushed_and_the_exception_propagates():
    script = Script(response(201, STORED))
    waymark, _ = client(script)

    @waymark.tool
    def search(q):
        return "nothing"

    assert search("outside a run") == "nothing"  # no run in this context: just a call
    with pytest.raises(KeyError), waymark.run(task="t", source="agent") as run:
        assert current_run() is run
        search("q")
        raise KeyError("missing")
    assert current_run() is None
    item = script.bodies()[0]["runs"][0]
    assert item["outcome"] == "failure" and item["metadata"]["error"] == {"type": "KeyError", "message": "'missing'"}
    assert [step["tool"] for step in item["steps"]] == ["search"]


def test_a_run_left_without_outcome_is_unknown_and_buffered_runs_are_pushed_in_one_batch():
    script = Script(response(201, STORED))
    waymark, _ = client(script)
    for n in range(3):
        with waymark.run(task=f"t{n}", source="agent", push="buffer"):
            pass
    assert script.requests == [] and waymark.buffered == 3
    waymark.flush()
    (body,) = script.bodies()
    assert [run["outcome"] for run in body["runs"]] == ["unknown"] * 3 and waymark.buffered == 0


def test_a_push_that_fails_on_exit_keeps_the_run_for_flush():
    down = httpx2.ConnectError("down")
    script = Script(down, down, response(200, {**STORED, "created": 0}))
    waymark, _ = client(script, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(WaymarkConnectionError), waymark.run(task="t", source="agent", external_id="x-1"):
        pass
    assert waymark.buffered == 1
    with pytest.raises(ValueError), waymark.run(task="t", source="agent", external_id="x-2"):
        raise ValueError("the agent's own error wins")  # the failed push does not mask it
    assert waymark.buffered == 2
    waymark.flush()
    assert [run["external_id"] for run in script.bodies()[-1]["runs"]] == ["x-1", "x-2"] and waymark.buffered == 0


# -- jobs ------------------------------------------------------------------------------------------------------------

JOB = {"id": 5, "kind": "graph_evaluation", "payload": {"task": "q"}, "status": "leased", "attempts": 1,
       "lease_owner": "w", "lease_expires_at": None, "deadline": None}  # fmt: skip


def test_the_job_helper_claims_answers_until_none_is_open():
    answered = {"job_id": 5, "run_id": 9, "counted": True}
    script = Script(response(200, JOB), response(201, answered), response(204))
    waymark, _ = client(script)
    outcomes = waymark.answer_jobs(lambda job: {"task": job.payload["task"], "outcome": "success"}, worker="w")
    assert [(o.job.id, o.answer.run_id, o.answered) for o in outcomes] == [(5, 9, True)]
    assert [r.url.path for r in script.requests] == [
        "/api/v1/jobs/claim",
        "/api/v1/jobs/5/result",
        "/api/v1/jobs/claim",
    ]
    assert script.bodies()[1] == {"run": {"task": "q", "outcome": "success"}}


def test_a_failing_handler_is_skipped_answered_as_a_failure_or_raised():
    def broken(job):
        raise RuntimeError("no tools")

    skip = Script(response(200, JOB), response(204))
    waymark, _ = client(skip)
    (outcome,) = waymark.answer_jobs(broken, worker="w", on_error="skip")
    assert not outcome.answered and isinstance(outcome.error, RuntimeError) and len(skip.requests) == 2

    answer = Script(response(200, JOB), response(201, {"job_id": 5, "run_id": 1, "counted": True}), response(204))
    waymark, _ = client(answer)
    (outcome,) = waymark.answer_jobs(broken, worker="w", on_error="answer")
    run = answer.bodies()[1]["run"]
    assert outcome.answered and run["outcome"] == "failure" and run["metadata"]["error"]["type"] == "RuntimeError"

    raised = Script(response(200, JOB))
    waymark, _ = client(raised)
    with pytest.raises(RuntimeError):
        waymark.answer_jobs(broken, worker="w")


def test_a_refused_answer_is_reported_and_the_loop_goes_on():
    script = Script(response(200, JOB), error(409, "job_closed"), response(204))
    waymark, _ = client(script)
    (outcome,) = waymark.answer_jobs(lambda job: {"outcome": "success"}, worker="w")
    assert isinstance(outcome.error, ConflictError) and not outcome.answered


# -- the async client drives the same core ---------------------------------------------------------------------------


def test_the_async_client_retries_caches_records_and_answers_jobs():
    script = Script(
        error(503, "busy", **{"Retry-After": "1"}),
        response(201, STORED),
        response(200, GRAPH, ETag='"d1"'),
        response(304),
        response(200, JOB),
        response(201, {"job_id": 5, "run_id": 3, "counted": True}),
        response(204),
    )
    sleeps: list[float] = []

    async def sleep(seconds):
        sleeps.append(seconds)

    async def scenario():
        async with AsyncWaymark(BASE, "wm_t", transport=httpx2.MockTransport(script), sleep=sleep) as waymark:

            @waymark.tool
            async def search(q):
                await asyncio.sleep(0)
                return f"hits for {q}"

            async with waymark.run(task="t", source="agent") as run:
                await search("x")
                run.succeed()
            first = await waymark.active_graph("ws")
            second = await waymark.active_graph("ws")

            async def handler(job):
                return {"task": job.payload["task"], "outcome": "success"}

            outcomes = await waymark.answer_jobs(handler, worker="w")
            return run, first, second, outcomes

    _, first, second, outcomes = run_in_own_loop(scenario())
    assert sleeps == [1.0]
    pushed = script.bodies()[1]["runs"][0]
    assert pushed["steps"][0]["observation"] == "hits for x" and pushed["outcome"] == "success"
    assert (first.from_cache, second.from_cache) == (False, True)
    assert script.requests[3].headers["If-None-Match"] == '"d1"'
    assert [o.answer.run_id for o in outcomes] == [3]
