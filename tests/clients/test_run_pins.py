"""The Python client's per-step calls of a run (issue 27, item 1), without a server (httpx2.MockTransport): every call
of a run sends its key (X-Waymark-Run) and, per endpoint, sends back the X-Waymark-Revision its first answer named;
calls outside a run send neither; the pushed run records the graph and procedure revisions it was served unless it
was told otherwise. The sync and the async client alike."""

import hashlib
import json

import httpx2
import pytest
from waymark_client import AsyncWaymark, RetryPolicy, Waymark

from tests.clients.loops import run_in_own_loop

BASE = "http://waymark.test"
FAST = RetryPolicy(max_attempts=2, backoff=0.0, jitter=0.0)
CONTENT_REVISION = "c" * 64


def graph_body(seq: int, digest: str, workspace: str = "support") -> dict:
    nodes = [{"id": "search", "description": "search"}]
    return {
        "workspace": workspace,
        "seq": seq,
        "digest": digest,
        "parent_digest": None,
        "meta": {},
        "graph": {"nodes": nodes},
    }


def procedure_body(content_revision: str) -> dict:
    version = {"number": 3, "content_revision": content_revision, "steps": [{"tool": "lookup_policy", "arguments": {}}]}
    return {
        "items": [{"id": 9, "intent": "refund_request", "title": "refund", "revision": 3, "active_version": version}]
    }


class Server:
    """Answers like Waymark's per-step endpoints; `revisions` are the X-Waymark-Revision values it answers with, in
    turn (a canary moving on, as seen by the client), and `requests` what the client sent."""

    def __init__(
        self,
        *,
        graph_revisions=("1",),
        procedure_revisions=(CONTENT_REVISION,),
        not_modified=False,
        raw_graph_revision: bytes | None = None,
    ) -> None:
        self.graph_revisions = list(graph_revisions)
        self.raw_graph_revision = raw_graph_revision
        self.procedure_revisions = list(procedure_revisions)
        self.not_modified = not_modified
        self.requests: list[httpx2.Request] = []
        self.pushed: list[dict] = []

    @staticmethod
    def _next(values: list[str]) -> str:
        return values.pop(0) if len(values) > 1 else values[0]

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        path = request.url.path
        if path.endswith("/active"):
            revision = self._next(self.graph_revisions)
            digest = f"d{revision}"
            headers = {"ETag": f'"{digest}"', "X-Waymark-Revision": revision}
            if self.not_modified and request.headers.get("If-None-Match") == f'"{digest}"':
                return httpx2.Response(304, headers=headers)
            if self.raw_graph_revision is not None:  # a header value as bytes, whatever they are
                raw = [(b"ETag", f'"{digest}"'.encode()), (b"X-Waymark-Revision", self.raw_graph_revision)]
                return httpx2.Response(200, json=graph_body(int(revision), digest), headers=raw)
            return httpx2.Response(200, json=graph_body(int(revision), digest), headers=headers)
        if path.endswith("/guidance"):
            revision = json.loads(request.content).get("revision") or "d-guided"
            body = {"text": "search next", "node_id": "search", "used_full_graph": False, "mode": "raw_subgraph"}
            return httpx2.Response(200, json={**body, "revision": revision})
        if path.endswith("/procedures"):
            revision = self._next(self.procedure_revisions)
            return httpx2.Response(
                200, json=procedure_body(revision), headers={"ETag": f'"p-{revision}"', "X-Waymark-Revision": revision}
            )
        if path.endswith("/trajectories"):
            self.pushed.extend(json.loads(request.content)["runs"])
            return httpx2.Response(201, json={"created": 1, "existing": 0, "created_ids": [1], "existing_ids": []})
        return httpx2.Response(404, json={"code": "not_found", "message": path, "details": None})

    def sent(self, suffix: str) -> list[tuple[str | None, str | None]]:
        """(X-Waymark-Run, X-Waymark-Revision) of each request to a path ending in `suffix`."""
        return [
            (r.headers.get("X-Waymark-Run"), r.headers.get("X-Waymark-Revision"))
            for r in self.requests
            if r.url.path.endswith(suffix)
        ]


def sync_client(server: Server) -> Waymark:
    return Waymark(BASE, "wm_t", transport=httpx2.MockTransport(server), retry=FAST, sleep=lambda _: None)


def test_every_call_of_a_run_sends_its_key_and_sends_back_the_first_revision_per_endpoint():
    server = Server(graph_revisions=["1", "2", "2"], procedure_revisions=[CONTENT_REVISION, "e" * 64])
    with sync_client(server) as waymark:
        with waymark.run(
            task="t", source="agent", intent="refund_request", external_id="run-42", workspace="support", procedure=True
        ) as run:
            run.guidance()
            waymark.active_graph("support")  # the run in this context
            waymark.procedures("refund_request")
            waymark.guidance("support", query="q")
            run.succeed()
        outside = waymark.active_graph("support")

    assert server.sent("/active") == [("run-42", None), ("run-42", "1"), (None, None)]
    assert server.sent("/guidance") == [("run-42", "1"), ("run-42", "1")]
    assert server.sent("/procedures") == [("run-42", None), ("run-42", CONTENT_REVISION)]
    assert run.served == {"graph:support": "1", "procedures:refund_request": CONTENT_REVISION}
    assert outside.seq == 2  # outside the run nothing is pinned
    (item,) = server.pushed
    assert (item["external_id"], item["graph_workspace"], item["graph_revision"]) == ("run-42", "support", "d1")
    assert item["procedure_revision"] == CONTENT_REVISION


def test_a_run_that_pins_nothing_at_its_start_pins_what_its_first_calls_are_served():
    server = Server(graph_revisions=["4", "5"], procedure_revisions=[CONTENT_REVISION])
    with sync_client(server) as waymark, waymark.run(task="t", source="agent", external_id="run-7") as run:
        graph = waymark.active_graph("support")
        later = waymark.active_graph("support")  # the server moved on; the run keeps its first pin
        waymark.procedures("refund_request")
        run.succeed()

    assert (graph.seq, later.seq) == (4, 5)
    assert server.sent("/active") == [("run-7", None), ("run-7", "4")]
    (item,) = server.pushed
    assert (item["graph_workspace"], item["graph_revision"], item["procedure_revision"]) == (
        "support",
        "d4",
        CONTENT_REVISION,
    )


def test_guidance_alone_fills_the_graph_revision_it_came_from():
    server = Server()
    with sync_client(server) as waymark, waymark.run(task="t", source="agent", external_id="run-g") as run:
        waymark.guidance("support", query="q")
        run.succeed()
    assert server.sent("/guidance") == [("run-g", None)]
    (item,) = server.pushed
    assert (item["graph_workspace"], item["graph_revision"]) == ("support", "d-guided")
    assert "procedure_revision" not in item  # served no procedure: nothing claimed


def test_revisions_set_on_the_run_win_over_what_it_was_served():
    server = Server()
    waymark = sync_client(server)
    with waymark.run(task="t", source="agent", intent="refund_request", workspace="support", procedure=True) as run:
        run.graph_revision = "given-graph"
        run.procedure_revision = "given-procedure"
        run.succeed()
    waymark.close()
    (item,) = server.pushed
    assert (item["graph_revision"], item["procedure_revision"]) == ("given-graph", "given-procedure")
    assert item["metadata"]["procedure"]["content_revision"] == CONTENT_REVISION  # what was served, still recorded


def test_a_304_keeps_the_pin_and_its_revision_header_counts():
    server = Server(graph_revisions=["3"], not_modified=True)
    with sync_client(server) as waymark:
        waymark.active_graph("support")  # cached before the run
        with waymark.run(task="t", source="agent", external_id="run-304", workspace="support") as run:
            run.guidance()
            run.succeed()
    assert server.sent("/active") == [(None, None), ("run-304", None)]
    assert server.sent("/guidance") == [("run-304", "3")]
    assert run.graph.from_cache and server.pushed[0]["graph_revision"] == "d3"


@pytest.mark.parametrize("external_id", ["ünïcode-run", "x" * 201, "tab\there"])
def test_an_external_id_that_is_not_a_header_key_is_sent_as_its_digest(external_id):
    server = Server()
    waymark = sync_client(server)
    with waymark.run(task="t", source="agent", external_id=external_id, workspace="support") as run:
        run.guidance()
    waymark.close()
    key = "sha256:" + hashlib.sha256(external_id.encode()).hexdigest()
    assert run.run_key == key
    assert {sent_key for sent_key, _ in server.sent("/active") + server.sent("/guidance")} == {key}
    assert server.pushed[0]["external_id"] == external_id


@pytest.mark.parametrize("garbage", ["", "   ", "rév".encode(), b"a\x01b", b"r" * 201])
def test_a_revision_header_the_client_cannot_send_back_is_not_kept(garbage):
    server = Server(raw_graph_revision=garbage if isinstance(garbage, bytes) else garbage.encode())
    waymark = sync_client(server)
    with waymark.run(task="t", source="agent", external_id="run-x", workspace="support") as run:
        run.guidance()
        run.succeed()
    waymark.close()
    assert run.served == {}
    assert server.sent("/guidance") == [("run-x", None)]
    assert server.pushed[0]["graph_revision"] == "d1"


def test_the_async_client_sends_the_same_headers_and_records_the_same_revisions():
    server = Server(graph_revisions=["1", "2"], procedure_revisions=[CONTENT_REVISION, "e" * 64])

    async def scenario():
        transport = httpx2.MockTransport(server)
        async with AsyncWaymark(BASE, "wm_t", transport=transport, retry=FAST) as waymark:
            async with waymark.run(
                task="t",
                source="agent",
                intent="refund_request",
                external_id="run-a",
                workspace="support",
                procedure=True,
            ) as run:
                await run.guidance()
                await waymark.active_graph("support")
                await waymark.procedures("refund_request")
                run.succeed()
            await waymark.active_graph("support")
        return run

    run = run_in_own_loop(scenario())
    assert server.sent("/active") == [("run-a", None), ("run-a", "1"), (None, None)]
    assert server.sent("/guidance") == [("run-a", "1")]
    assert server.sent("/procedures") == [("run-a", None), ("run-a", CONTENT_REVISION)]
    (item,) = server.pushed
    assert (item["graph_revision"], item["procedure_revision"]) == ("d1", CONTENT_REVISION)
    assert run.run_key == "run-a"
