"""The embedded default under load: a real gunicorn (the Procfile's shape) on a temp SQLite file, 20 concurrent
ingest clients for up to 20 s. No timing is asserted: zero 5xx, and the runs acknowledged equal the runs stored.

WAYMARK_LOAD_TEST_SECONDS shortens the run (default and maximum 20).
"""

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = 20
RUNS_PER_BATCH = 5
SECONDS = min(20.0, float(os.environ.get("WAYMARK_LOAD_TEST_SECONDS", "20")))


def _procfile_web_option(name: str) -> str:
    """The web process's `--workers`/`--threads` as the Procfile gives them (`${VAR:-default}` read as default)."""
    web = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:"))
    match = re.search(rf"--{name}[ =]+(?:\$\{{\w+:-)?(\d+)", web)
    assert match, web
    return match.group(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "WAYMARK_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.local",
        WAYMARK_VAR_DIR=str(var_dir),
        WAYMARK_DEBUG="false",
        WAYMARK_API_RATE_PER_TOKEN="1000000",  # one token for every client: measure the database, not the limit
        WAYMARK_INGEST_CONCURRENT_PER_TOKEN="0",  # (and not the fair shares of ingest either)
        WAYMARK_INGEST_CONCURRENT_PER_AGENT="0",
        PYTHONUNBUFFERED="1",
    )
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _batch(tag: str, n: int) -> bytes:
    runs = [
        {
            "source": "load",
            "external_id": f"{tag}-{n}-{i}",
            "task": f"Refund order {n}-{i}",
            "outcome": "success",
            "steps": [{"tool": "lookup_order", "arguments": {"order_id": n}, "observation": "ok", "ok": True}],
        }
        for i in range(RUNS_PER_BATCH)
    ]
    return json.dumps({"runs": runs}).encode()


@pytest.fixture
def live_server_on_sqlite(tmp_path):
    env = _env(tmp_path)
    _manage(env, "migrate", "--no-input", "-v", "0")
    create_agent = (
        "from accounts.models import User; "
        "agent = {'is_agent': True} if any(f.name == 'is_agent' for f in User._meta.fields) else {}; "
        "User.objects.create(username='loader', **agent)"
    )
    _manage(env, "shell", "-c", create_agent)
    token = _manage(
        env, "create_api_token", "--user", "loader", "--name", "load", "--scope", "trajectories:write"
    ).split()[-1]
    port = _free_port()
    log = (tmp_path / "gunicorn.log").open("wb")
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            _procfile_web_option("workers"),
            "--threads",
            _procfile_web_option("threads"),
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=1).read()
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "gunicorn.log").read_text()[-3000:]
                time.sleep(0.1)
        yield base, token, tmp_path / "waymark.sqlite3"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_twenty_concurrent_ingest_clients_get_no_5xx_and_lose_nothing(live_server_on_sqlite):
    base, token, database = live_server_on_sqlite
    deadline = time.monotonic() + SECONDS
    acknowledged: set[int] = set()
    statuses: dict[int, int] = {}
    server_errors: list[str] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        tag = uuid.uuid4().hex[:8]
        n = 0
        while time.monotonic() < deadline:
            request = urllib.request.Request(
                base + "/api/v1/trajectories",
                data=_batch(f"{tag}-{number}", n),
                method="POST",
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            n += 1
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    status, body = response.status, json.loads(response.read())
            except urllib.error.HTTPError as exc:
                status, body = exc.code, exc.read().decode(errors="replace")[:300]
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status >= 500:
                    server_errors.append(f"{status} {body}")
                elif status in (200, 201):
                    acknowledged.update(body["created_ids"])
                    acknowledged.update(body["existing_ids"])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=SECONDS + 90)

    assert not server_errors, (statuses, server_errors[:5])
    assert set(statuses) <= {200, 201}, statuses
    assert acknowledged
    with sqlite3.connect(database) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM trajectories_run WHERE source = 'load'")}
    assert stored == acknowledged
    assert len(stored) == statuses.get(201, 0) * RUNS_PER_BATCH
