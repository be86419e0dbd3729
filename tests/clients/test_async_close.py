"""`AsyncWaymark` over real connections (a local HTTP server on 127.0.0.1, keep-alive): a client made once and used
from one `asyncio.run` per task, as the sync loop in docs/integrations/python-client.md is written, serves every
loop, and `await client.aclose()` in a loop of its own pushes what is still buffered and closes (issue 25, item 5:
it raised "Event loop is closed" and lost the buffered run)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from waymark_client import AsyncWaymark


class Ingest(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: connections stay in the client's pool between calls
    received: list[dict]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.extend(body["runs"])
        ids = list(range(len(self.received) - len(body["runs"]) + 1, len(self.received) + 1))
        answer = json.dumps({"created": len(ids), "existing": 0, "created_ids": ids, "existing_ids": []}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:
        return None


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict]]]:
    received: list[dict] = []
    handler = type("Handler", (Ingest,), {"received": received})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", received
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def one_thread() -> Iterator:
    """asyncio.run(...) one after the other in one thread of its own, as a script does (Playwright's sync API, used
    earlier in a session, keeps a loop on the main thread, where asyncio.run refuses to start)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield lambda coroutine_function: pool.submit(asyncio.run, coroutine_function()).result()


async def record(client: AsyncWaymark, task: str, push: str = "now") -> None:
    async with client.run(task=task, source="my-agent", push=push) as run:
        run.succeed()


def test_one_client_serves_one_asyncio_run_per_task_and_aclose_pushes_the_rest(server, one_thread):
    url, received = server
    client = AsyncWaymark(url, "wm_test")
    one_thread(lambda: record(client, "first"))
    one_thread(lambda: record(client, "second"))  # a new loop: the first loop's connections ended with it
    one_thread(lambda: record(client, "kept", push="buffer"))
    assert client.buffered == 1
    one_thread(client.aclose)  # in a loop of its own, as `asyncio.run(client.aclose())` at the end of a script
    assert [run["task"] for run in received] == ["first", "second", "kept"]
    assert client.buffered == 0


def test_aclose_twice_is_harmless_and_a_closed_client_says_so(server, one_thread):
    url, received = server
    client = AsyncWaymark(url, "wm_test")
    one_thread(lambda: record(client, "only"))

    async def close_twice_then_use() -> None:
        await client.aclose()
        await client.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await record(client, "too late")

    one_thread(close_twice_then_use)
    assert [run["task"] for run in received] == ["only"]


def test_async_with_flushes_the_buffer_on_leaving(server, one_thread):
    url, received = server

    async def agent() -> None:
        async with AsyncWaymark(url, "wm_test") as client:
            await record(client, "buffered", push="buffer")

    one_thread(agent)
    assert [run["task"] for run in received] == ["buffered"]


def test_a_client_is_used_by_one_running_loop_at_a_time(server):
    url, _ = server
    client = AsyncWaymark(url, "wm_test")
    started, release = threading.Event(), threading.Event()

    async def hold() -> None:
        await record(client, "held")
        started.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait)

    pool = ThreadPoolExecutor(max_workers=2)
    try:
        holder = pool.submit(asyncio.run, hold())
        assert started.wait(10)
        elsewhere = pool.submit(asyncio.run, record(client, "elsewhere"))
        with pytest.raises(RuntimeError, match="another event loop"):
            elsewhere.result(timeout=10)  # refused at once (sharing the pool across loops would hang or break)
    finally:
        release.set()
        pool.shutdown(wait=False, cancel_futures=True)
    holder.result(timeout=10)
