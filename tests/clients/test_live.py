"""The Python client against a live server (pytest-django's live_server): recorded runs appear with their steps, the
active graph is ETag-cached (304), a run keeps its pinned revision through an activation, the job helper claims,
answers and releases, and a lost response is retried without a duplicate. The async client does the same for push
and pull."""

import time

import httpx2
import pytest
from django.core.signals import request_started
from django.db import transaction
from waymark_client import AsyncWaymark, PermissionDenied, RetryPolicy, Waymark

from graphs.models import Revision
from tests.clients.loops import run_in_own_loop
from tests.graphs.factories import make_demo_workspace
from tests.promote import promote_graph_revision
from trajectories import job_services
from trajectories.jobs import register_job_kind
from trajectories.models import JobStatus, Run

pytestmark = pytest.mark.postgres
FAST = RetryPolicy(max_attempts=3, backoff=0.01, jitter=0.0)
JOB_KIND = "client_test"
register_job_kind(JOB_KIND)


@pytest.fixture
def token(make_agent_token):
    return make_agent_token(
        "trajectories:write", "graphs:read", "graphs:guide", "procedures:read", "evaluations:run", name="client-agent"
    )


class Recording(httpx2.HTTPTransport):
    """The real transport, noting what went on the wire and what the server answered."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str, str | None, int]] = []

    def handle_request(self, request):
        response = super().handle_request(request)
        self.seen.append((request.method, request.url.path, request.headers.get("If-None-Match"), response.status_code))
        return response


class LosesFirstResponse(httpx2.HTTPTransport):
    """Sends the first POST to the server for real, then drops its answer (as a connection reset would)."""

    def __init__(self) -> None:
        super().__init__()
        self.posts = 0

    def handle_request(self, request):
        response = super().handle_request(request)
        if request.method == "POST":
            self.posts += 1
            if self.posts == 1:
                response.read()
                response.close()
                raise httpx2.ReadError("connection reset after the server stored the batch", request=request)
        return response


class AsyncLosesFirstResponse(httpx2.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.posts = 0

    async def handle_async_request(self, request):
        response = await super().handle_async_request(request)
        if request.method == "POST":
            self.posts += 1
            if self.posts == 1:
                await response.aread()
                await response.aclose()
                raise httpx2.ReadError("connection reset after the server stored the batch", request=request)
        return response


def test_a_run_recorded_through_the_context_manager_appears_with_its_steps(transactional_db, live_server, token):
    with Waymark(live_server.url, token) as waymark:
        with waymark.run(task="Refund order ORD-4101", intent="refund_request", source="client-test") as run:

            @run.tool
            def lookup_policy(topic):
                time.sleep(0.02)
                return "Refunds within 30 days"

            @run.tool
            def issue_refund(order_id, amount):
                raise PermissionError("the refund needs a manager")

            lookup_policy("refunds")
            with pytest.raises(PermissionError):
                issue_refund("ORD-4101", amount=39.9)
            run.fail("refund refused")
        assert waymark.buffered == 0

    stored = Run.objects.get(source="client-test", external_id=run.external_id)
    assert (stored.task, stored.intent, stored.outcome) == ("Refund order ORD-4101", "refund_request", "failure")
    assert stored.metadata["failure_reason"] == "refund refused"
    assert stored.started_at is not None and stored.ended_at >= stored.started_at
    first, second = stored.steps.order_by("ordinal")
    assert (first.tool, first.ok, first.arguments, first.observation) == (
        "lookup_policy",
        True,
        {"topic": "refunds"},
        "Refunds within 30 days",
    )
    assert first.duration >= 0.02
    assert (second.tool, second.ok, second.arguments) == (
        "issue_refund",
        False,
        {"order_id": "ORD-4101", "amount": 39.9},
    )
    assert second.observation == "PermissionError: the refund needs a manager" and second.ended_at is not None


def test_a_second_pull_of_the_active_graph_is_a_304_served_from_the_cache(transactional_db, live_server, token):
    demo = make_demo_workspace()
    active = Revision.objects.get(workspace=demo, kind=Revision.Kind.GRAPH, seq=1)
    server_saw: list[str | None] = []

    def note(sender, environ, **kwargs):
        if environ.get("PATH_INFO", "").endswith("/two-hop-qa/active"):
            server_saw.append(environ.get("HTTP_IF_NONE_MATCH"))

    transport = Recording()
    request_started.connect(note)
    try:
        with Waymark(live_server.url, token, transport=transport) as waymark:
            first = waymark.active_graph("two-hop-qa")
            second = waymark.active_graph("two-hop-qa")
    finally:
        request_started.disconnect(note)

    assert (first.digest, first.seq, first.from_cache) == (active.digest, 1, False)
    assert second.from_cache and second.graph == first.graph and second.digest == active.digest
    assert server_saw == [None, f'"{active.digest}"']
    assert [(status, inm) for _, _, inm, status in transport.seen] == [(200, None), (304, f'"{active.digest}"')]
    assert waymark.cache.hits == 1


def test_a_pinned_run_keeps_its_revision_while_another_is_activated(transactional_db, live_server, token):
    from graphs.cache import clear_local

    demo = make_demo_workspace()
    five_nodes = Revision.objects.get(workspace=demo, kind=Revision.Kind.GRAPH, seq=1)
    skeleton = Revision.objects.get(workspace=demo, kind=Revision.Kind.GRAPH, seq=0)
    waymark = Waymark(live_server.url, token)
    with waymark.run(task="Where was Alice Martin born?", source="client-test", workspace="two-hop-qa") as run:
        assert run.graph_revision == five_nodes.digest

        @run.tool
        def search(q):
            return "Alice Martin"

        search("Alice Martin")
        promote_graph_revision(skeleton)  # an activation while the run goes on
        clear_local()  # this process's one-second card cache (the live server runs in it)
        now_active = waymark.active_graph("two-hop-qa")
        guidance = run.guidance(mode="raw_subgraph")
        run.succeed()
    waymark.close()

    assert (now_active.seq, now_active.from_cache) == (0, False)
    assert guidance.revision == five_nodes.digest and guidance.node_id == "search"
    assert "[search] → [read]" in guidance.text
    unpinned = waymark_guidance(live_server.url, token)
    assert unpinned.revision == skeleton.digest
    stored = Run.objects.get(source="client-test", external_id=run.external_id)
    assert (stored.graph_workspace, stored.graph_revision) == ("two-hop-qa", five_nodes.digest)


def waymark_guidance(url, token):
    with Waymark(url, token) as waymark:
        return waymark.guidance("two-hop-qa", query="q", mode="raw_subgraph")


def queue_jobs(count):
    with transaction.atomic():
        payloads = [{"task": f"client case {n}", "intent": "qa"} for n in range(count)]
        return job_services.jobs_create(kind=JOB_KIND, subject="client:1", payloads=payloads)


def test_the_job_helper_claims_answers_and_releases(transactional_db, live_server, token, make_agent_token):
    jobs = queue_jobs(2)
    seen = []

    def handler(job):
        seen.append((job.kind, job.payload["task"], job.lease_owner))
        return {"task": job.payload["task"], "outcome": "success", "steps": [{"tool": "answer", "ok": True}]}

    with Waymark(live_server.url, token) as waymark:
        outcomes = waymark.answer_jobs(handler, worker="client-7", kinds=[JOB_KIND], lease_seconds=60)
        assert waymark.claim(worker="client-7", kinds=[JOB_KIND]) is None  # nothing left leased or open
        with pytest.raises(PermissionDenied):  # only the claiming token may answer
            Waymark(live_server.url, make_agent_token("evaluations:run", name="other")).answer(jobs[0].pk, {})

    assert seen == [(JOB_KIND, "client case 0", "client-7"), (JOB_KIND, "client case 1", "client-7")]
    assert [(o.job.id, o.answered, o.answer.counted) for o in outcomes] == [
        (jobs[0].pk, True, True),
        (jobs[1].pk, True, True),
    ]
    for job, outcome in zip(jobs, outcomes, strict=True):
        job.refresh_from_db()
        assert job.status == JobStatus.DONE and job.result_run_id == outcome.answer.run_id
        assert job.result_run.outcome == "success" and job.result_run.steps.count() == 1


def test_a_failed_job_handler_answers_a_failure_when_asked(transactional_db, live_server, token):
    (job,) = queue_jobs(1)

    def broken(job):
        raise RuntimeError("tool backend down")

    with Waymark(live_server.url, token) as waymark:
        (outcome,) = waymark.answer_jobs(broken, worker="w", kinds=[JOB_KIND], on_error="answer")
    job.refresh_from_db()
    assert outcome.answered and job.status == JobStatus.DONE
    assert job.result_run.outcome == "failure" and job.result_run.metadata["error"]["type"] == "RuntimeError"


def test_a_lost_response_is_retried_without_a_duplicate(transactional_db, live_server, token):
    transport = LosesFirstResponse()
    with Waymark(live_server.url, token, transport=transport, retry=FAST) as waymark:
        with waymark.run(task="t", source="client-test", external_id="lost-1") as run:
            run.succeed()
        pushed = waymark.push([{"source": "client-test", "external_id": "lost-2", "task": "t2"}])

    assert transport.posts == 3  # the lost attempt, its retry, then the second push
    assert Run.objects.filter(source="client-test").count() == 2
    stored = Run.objects.get(source="client-test", external_id="lost-1")
    assert stored.outcome == "success"
    assert pushed.created == 1 and waymark.buffered == 0


def test_the_async_client_pushes_retries_and_pulls_with_the_cache(transactional_db, live_server, token):
    make_demo_workspace()
    transport = AsyncLosesFirstResponse()

    async def scenario():
        async with AsyncWaymark(live_server.url, token, transport=transport, retry=FAST) as waymark:
            async with waymark.run(task="async task", source="client-async", workspace="two-hop-qa") as run:

                @waymark.tool
                async def search(q):
                    return f"found {q}"

                await search("Alice")
                guidance = await run.guidance(mode="raw_subgraph")
                run.succeed()
            first = await waymark.active_graph("two-hop-qa")
            second = await waymark.active_graph("two-hop-qa")
            return run, guidance, first, second, waymark.cache.hits

    run, guidance, first, second, hits = run_in_own_loop(scenario())
    stored = Run.objects.get(source="client-async")  # exactly one, though the first response was lost
    assert stored.external_id == run.external_id and transport.posts == 3  # push, its retry, guidance
    assert [(s.tool, s.ok, s.observation) for s in stored.steps.all()] == [("search", True, "found Alice")]
    assert guidance.node_id == "search" and guidance.revision == run.graph_revision == stored.graph_revision
    # The run pinned the active graph at its start: the later pulls are both revalidated against it, both 304.
    assert (first.from_cache, second.from_cache, hits) == (True, True, 2)
