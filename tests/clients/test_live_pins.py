"""The Python client's per-step calls of a run against a live server (issue 27, item 1): the server receives the run
key (X-Waymark-Run) on every call of the run and, from the second call of an endpoint on, the X-Waymark-Revision
that endpoint first answered with; the pushed run is stored with the graph workspace, the graph revision and the
procedure's content revision it was served, and the runs API returns them. Which arm a canary serves is the
server's business (tests/uplift): these tests hold what the client sends and what the ingest stores."""

import httpx2
import pytest
from django.core.signals import request_started
from waymark_client import AsyncWaymark, Waymark

from graphs.models import Revision
from procedures.mining import intent_key
from procedures.models import Procedure
from tests.clients.loops import run_in_own_loop
from tests.graphs.factories import make_demo_workspace
from tests.procedures.factories import REFUND, stored_version
from tests.promote import promote_procedure_version
from trajectories.models import Run

pytestmark = pytest.mark.postgres
WORKSPACE = "two-hop-qa"


@pytest.fixture
def token(make_agent_token):
    return make_agent_token(
        "trajectories:write", "trajectories:read", "graphs:read", "graphs:guide", "procedures:read", name="pin-agent"
    )


@pytest.fixture
def served(transactional_db):
    """The demo workspace's active graph and an active refund procedure: (graph revision, procedure version)."""
    demo = make_demo_workspace()
    procedure = Procedure.objects.create(intent=intent_key(REFUND), title="refund")
    version = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
    promote_procedure_version(version)
    graph = Revision.objects.get(workspace=demo, kind=Revision.Kind.GRAPH, seq=1)
    return graph, version


@pytest.fixture
def server_saw():
    """What the server received on the per-step paths: (path tail, X-Waymark-Run, X-Waymark-Revision)."""
    seen: list[tuple[str, str | None, str | None]] = []

    def note(sender, environ, **kwargs):
        path = environ.get("PATH_INFO", "")
        for tail in ("/active", "/guidance", "/procedures"):
            if path.endswith(tail):
                seen.append((tail, environ.get("HTTP_X_WAYMARK_RUN"), environ.get("HTTP_X_WAYMARK_REVISION")))

    request_started.connect(note)
    yield seen
    request_started.disconnect(note)


class Answers(httpx2.HTTPTransport):
    """The real transport, noting the X-Waymark-Revision of each answer per path tail."""

    def __init__(self) -> None:
        super().__init__()
        self.revisions: dict[str, list[str | None]] = {}

    def handle_request(self, request):
        response = super().handle_request(request)
        tail = "/" + request.url.path.rsplit("/", 1)[-1]
        self.revisions.setdefault(tail, []).append(response.headers.get("X-Waymark-Revision"))
        return response


class AsyncAnswers(httpx2.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.revisions: dict[str, list[str | None]] = {}

    async def handle_async_request(self, request):
        response = await super().handle_async_request(request)
        tail = "/" + request.url.path.rsplit("/", 1)[-1]
        self.revisions.setdefault(tail, []).append(response.headers.get("X-Waymark-Revision"))
        return response


def assert_the_calls_carried_the_run(server_saw, answers, key, version):
    graph_pin = answers.revisions["/active"][0]  # what the server named the run's graph with on its first call
    assert graph_pin and answers.revisions["/procedures"][0] == version.content_revision
    assert server_saw == [
        ("/active", key, None),
        ("/procedures", key, None),
        ("/guidance", key, graph_pin),
        ("/active", key, graph_pin),
        ("/procedures", key, version.content_revision),
        ("/active", None, None),  # after the run: a call of no run
    ]


def assert_stored_under(run_id, graph, version, api_item):
    stored = Run.objects.get(pk=run_id)
    assert (stored.graph_workspace, stored.graph_revision, stored.procedure_revision) == (
        WORKSPACE,
        graph.digest,
        version.content_revision,
    )
    assert (api_item["graph_revision"], api_item["procedure_revision"]) == (graph.digest, version.content_revision)


def test_a_run_sends_its_key_and_pins_and_is_stored_with_what_it_was_served(live_server, token, served, server_saw):
    graph, version = served
    answers = Answers()
    with Waymark(live_server.url, token, transport=answers) as waymark:
        recording = waymark.run(
            task="Refund order ORD-4101",
            intent=REFUND,
            source="pin-agent",
            external_id="run-live-1",
            workspace=WORKSPACE,
            procedure=True,
        )
        with recording as run:

            @run.tool
            def search(q):
                return "Alice Martin"

            search("Alice Martin")
            run.guidance(mode="raw_subgraph")
            waymark.active_graph(WORKSPACE)
            waymark.procedures(REFUND)
            run.succeed()
        waymark.active_graph(WORKSPACE)
        (run_id,) = recording.pushed.created_ids
        api_item = waymark.get_run(run_id)

    assert_the_calls_carried_the_run(server_saw, answers, "run-live-1", version)
    assert_stored_under(run_id, graph, version, api_item)
    assert list(Run.objects.get(pk=run_id).steps.values_list("tool", flat=True)) == ["search"]


def test_the_async_client_does_the_same(live_server, token, served, server_saw):
    graph, version = served
    answers = AsyncAnswers()

    async def scenario():
        async with AsyncWaymark(live_server.url, token, transport=answers) as waymark:
            recording = waymark.run(
                task="Refund order ORD-4102",
                intent=REFUND,
                source="pin-agent",
                external_id="run-live-2",
                workspace=WORKSPACE,
                procedure=True,
            )
            async with recording as run:
                await run.guidance(mode="raw_subgraph")
                await waymark.active_graph(WORKSPACE)
                await waymark.procedures(REFUND)
                run.succeed()
            await waymark.active_graph(WORKSPACE)
            (stored_id,) = recording.pushed.created_ids
            return stored_id, await waymark.get_run(stored_id)

    run_id, api_item = run_in_own_loop(scenario())
    assert_the_calls_carried_the_run(server_saw, answers, "run-live-2", version)
    assert_stored_under(run_id, graph, version, api_item)
