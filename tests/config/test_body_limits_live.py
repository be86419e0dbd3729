"""Bodies over real HTTP, through gunicorn as the Procfile runs it (issue 30): an oversized body is refused before it
is read, a chunked body without Content-Length is read up to the limit, and a body that stops short of its
Content-Length is refused, never half-written."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.faults import database_url
from tests.trajectories.factories import run_item
from trajectories.models import Run

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.postgres


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    """gunicorn with the test settings on the test database (rows the tests commit are visible to it)."""
    url = database_url()  # this xdist worker's own database
    port = _free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "WAYMARK_TEST_DATABASE_URL": url}
    args = ["--bind", f"127.0.0.1:{port}", "--worker-class", "config.gunicorn_worker.WaymarkThreadWorker"]
    log = (tmp_path_factory.mktemp("gunicorn") / "log").open("wb")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "config.wsgi:application", *args, "--threads", "4"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield port
    process.terminate()
    process.wait(timeout=10)
    log.close()


@pytest.fixture
def token(transactional_db, make_agent_token):
    return make_agent_token("trajectories:write")


def _exchange(port: int, head: str, body_parts: list[bytes], *, half_close: bool = False) -> tuple[int, bytes]:
    """Send a request by hand; (status, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(head.encode("latin-1"))
        for part in body_parts:
            sock.sendall(part)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and _complete(answer):
                break
    status = int(answer.split(b" ", 2)[1])
    return status, answer.split(b"\r\n\r\n", 1)[1]


def _complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def _head(path: str, token: str | None, extra: str, content_type: str = "application/json") -> str:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: {content_type}\r\n{extra}\r\n"


def _chunks(body: bytes, size: int = 8192) -> list[bytes]:
    parts = [b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)]
    return [*parts, b"0\r\n\r\n"]


def test_an_oversized_body_is_refused_with_413_before_it_is_sent_whole(server):
    """Only the first 64 KiB of a 7 MiB body are sent: the answer comes from the declared length alone."""
    length = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    head = _head("/api/v1/promotions", None, f"Content-Length: {length}\r\n")
    status, body = _exchange(server, head, [b"{" + b" " * 65535])
    assert status == 413
    assert json.loads(body)["code"] == "payload_too_large"


def test_an_oversized_form_gets_the_styled_page(server):
    length = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    head = _head("/accounts/login/", None, f"Content-Length: {length}\r\n", "application/x-www-form-urlencoded")
    status, body = _exchange(server, head, [b"password=" + b"x" * 65535])
    assert status == 413
    assert b"Too much data" in body and b"waymark.css" in body


def test_a_chunked_batch_is_read_and_written(server, token):
    body = json.dumps({"runs": [run_item(), run_item()]}).encode()
    status, answer = _exchange(
        server, _head("/api/v1/trajectories", token, "Transfer-Encoding: chunked\r\n"), _chunks(body)
    )
    assert status == 201, answer
    assert Run.objects.count() == 2


def test_a_chunked_body_over_the_limit_answers_413(server, token):
    body = b'{"runs": [' + b" " * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10) + b"]}"
    status, answer = _exchange(
        server, _head("/api/v1/trajectories", token, "Transfer-Encoding: chunked\r\n"), _chunks(body, 65536)
    )
    assert status == 413, answer
    assert not Run.objects.exists()


def test_a_body_that_stops_short_of_its_content_length_is_refused(server, token):
    body = json.dumps({"runs": [run_item()]}).encode()
    head = _head("/api/v1/trajectories", token, f"Content-Length: {len(body) + 100}\r\n")
    status, answer = _exchange(server, head, [body], half_close=True)
    assert status == 400, answer
    assert json.loads(answer)["code"] == "incomplete_body"
    assert not Run.objects.exists()
