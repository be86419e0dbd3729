#!/usr/bin/env python
"""Load on a live server: ingest throughput and active-graph read latency under 50 concurrent writers, on the
embedded default (SQLite in WAL) and on PostgreSQL, with error counts.

For each database: a fresh database (a temp SQLite file; `waymark_load` on the PostgreSQL server), migrate, the demo
graphs, an agent token and a reader token, then gunicorn as the Procfile runs it (2 workers x 32 threads). Readers
alone first (the idle baseline), then 50 writers POSTing batches of 10 runs (3 steps each) while 4 readers GET
/api/v1/graphs/two-hop-qa/active. Prints one table; afterwards the runs stored are compared with the runs
acknowledged. About a minute per database.

Usage: .venv/bin/python bench/load.py [--seconds 20] [--writers 50] [--only sqlite|postgres]
       [--threads 32] [--sqlite-timeout 20]   (the settings before issue 10: --threads 4 --sqlite-timeout 5)
       (DATABASE_URL names the PostgreSQL server; default postgres://postgres@127.0.0.1:5432)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
GUNICORN = str(Path(PYTHON).parent / "gunicorn")
PG_DATABASE = "waymark_load"
RUNS_PER_BATCH = 10
READERS = 4
WORKSPACE = "two-hop-qa"

SETUP = """
from accounts.models import User
from accounts.services import Actor, api_token_create
from graphs.demo import seed_demo_graphs
seed_demo_graphs(actor=Actor.system())
agent = {"is_agent": True} if any(f.name == "is_agent" for f in User._meta.fields) else {}
writer = User.objects.create(username="load-agent", **agent)
reader = User.objects.create(username="load-reader")
print(api_token_create(actor=Actor.system(), user=writer, name="w", scopes=["trajectories:write"])[1])
print(api_token_create(actor=Actor.system(), user=reader, name="r", scopes=["graphs:read"])[1])
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pg_urls() -> tuple[str, str]:
    server = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres"
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path=f"/{PG_DATABASE}")), urlunsplit(parts._replace(path="/postgres"))


def _fresh_pg_database(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')


def _env(var_dir: Path, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "WAYMARK_"))}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", WAYMARK_VAR_DIR=str(var_dir), WAYMARK_DEBUG="false")
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"manage.py {args[0]} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def _batch(tag: str) -> bytes:
    runs = [
        {
            "source": "load",
            "external_id": f"{tag}-{i}",
            "task": f"Refund order {tag}-{i}: the parcel arrived damaged.",
            "intent": "refund_request",
            "outcome": "success",
            "steps": [
                {"tool": tool, "arguments": {"order_id": tag}, "observation": "ok: " + "x" * 200, "ok": True}
                for tool in ("lookup_order", "check_account", "issue_refund")
            ],
        }
        for i in range(RUNS_PER_BATCH)
    ]
    return json.dumps({"runs": runs}).encode()


def _call(request: urllib.request.Request) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""  # connection refused or reset


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: dict[int, int] = {}
        self.latencies: list[float] = []
        self.acknowledged: set[int] = set()

    def add(self, status: int, seconds: float, ids: list[int] = ()) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1
            self.latencies.append(seconds)
            self.acknowledged.update(ids)

    def ok(self) -> int:
        return sum(n for status, n in self.statuses.items() if 200 <= status < 400)

    def count(self, *statuses: int) -> int:
        return sum(self.statuses.get(status, 0) for status in statuses)

    def other_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if not 200 <= status < 400 and status != 503)

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _load(base: str, writer_token: str, reader_token: str, writers: int, seconds: float) -> tuple[Tally, Tally]:
    deadline = time.monotonic() + seconds
    writes, reads = Tally(), Tally()

    def writer() -> None:
        tag = uuid.uuid4().hex
        n = 0
        while time.monotonic() < deadline:
            n += 1
            request = urllib.request.Request(
                base + "/api/v1/trajectories",
                data=_batch(f"{tag}-{n}"),
                method="POST",
                headers={"Authorization": f"Bearer {writer_token}", "Content-Type": "application/json"},
            )
            start = time.perf_counter()
            status, body = _call(request)
            ids = []
            if status in (200, 201):
                answer = json.loads(body)
                ids = answer["created_ids"] + answer["existing_ids"]
            writes.add(status, time.perf_counter() - start, ids)

    def reader() -> None:
        while time.monotonic() < deadline:
            request = urllib.request.Request(
                f"{base}/api/v1/graphs/{WORKSPACE}/active", headers={"Authorization": f"Bearer {reader_token}"}
            )
            start = time.perf_counter()
            status, _ = _call(request)
            reads.add(status, time.perf_counter() - start)

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    threads += [threading.Thread(target=reader) for _ in range(READERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return writes, reads


def _stored_ids(kind: str, var_dir: Path, pg_url: str) -> set[int]:
    query = "SELECT id FROM trajectories_run WHERE source = 'load'"
    if kind == "sqlite":
        with sqlite3.connect(var_dir / "waymark.sqlite3") as conn:
            return {row[0] for row in conn.execute(query)}
    import psycopg

    with psycopg.connect(pg_url) as conn:
        return {row[0] for row in conn.execute(query)}


def bench(kind: str, writers: int, seconds: float, threads: int, sqlite_timeout: int) -> dict:
    var_dir = Path(tempfile.mkdtemp(prefix=f"waymark-load-{kind}-"))
    pg_url, admin_url = _pg_urls()
    if kind == "postgres":
        _fresh_pg_database(admin_url)
    env = _env(var_dir, pg_url if kind == "postgres" else None)
    env["WAYMARK_SQLITE_TIMEOUT"] = str(sqlite_timeout)
    _manage(env, "migrate", "--no-input", "-v", "0")
    writer_token, reader_token = _manage(env, "shell", "-c", SETUP).split()[-2:]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (var_dir / "gunicorn.log").open("wb")
    args = ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", str(threads), "--timeout", "120"]
    server = subprocess.Popen(
        [GUNICORN, "config.wsgi:application", *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        for _ in range(300):
            if _call(urllib.request.Request(base + "/healthz"))[0]:
                break
            time.sleep(0.1)
        _, idle = _load(base, writer_token, reader_token, 0, min(5.0, seconds))
        writes, reads = _load(base, writer_token, reader_token, writers, seconds)
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
    stored = _stored_ids(kind, var_dir, pg_url)
    return {
        "database": kind,
        "batches": writes.ok(),
        "runs/s": len(writes.acknowledged) / seconds,
        "write p50 ms": writes.pct(0.5),
        "write p95 ms": writes.pct(0.95),
        "write 503": writes.count(503),
        "write other errors": writes.other_errors(),
        "read idle p50 ms": idle.pct(0.5),
        "read req/s": reads.ok() / seconds,
        "read p50 ms": reads.pct(0.5),
        "read p95 ms": reads.pct(0.95),
        "read errors": len(reads.latencies) - reads.ok(),
        "acked == stored": stored == writes.acknowledged,
        "_statuses": f"writes {dict(sorted(writes.statuses.items()))}, reads {dict(sorted(reads.statuses.items()))}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--writers", type=int, default=50)
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    parser.add_argument("--threads", type=int, default=32, help="gunicorn threads per worker (the Procfile: 32)")
    parser.add_argument("--sqlite-timeout", type=int, default=20, help="WAYMARK_SQLITE_TIMEOUT, seconds")
    options = parser.parse_args()
    kinds = [options.only] if options.only else ["sqlite", "postgres"]
    rows = []
    for kind in kinds:
        print(f"{kind}: {options.writers} writers + {READERS} readers for {options.seconds:.0f} s ...", flush=True)
        rows.append(bench(kind, options.writers, options.seconds, options.threads, options.sqlite_timeout))
    keys = [key for key in rows[0] if not key.startswith("_")]
    print()
    print("| " + " | ".join(keys) + " |")
    print("|" + "|".join("---" for _ in keys) + "|")
    for row in rows:
        cells = [f"{row[key]:.1f}" if isinstance(row[key], float) else str(row[key]) for key in keys]
        print("| " + " | ".join(cells) + " |")
    print()
    for row in rows:
        print(f"{row['database']} statuses (0: connection failed): {row['_statuses']}")


if __name__ == "__main__":
    main()
