#!/usr/bin/env python
"""Load on a live server, on the embedded default (SQLite in WAL) and on PostgreSQL, with error counts: ingest
throughput and active-graph read latency under 50 concurrent writers of small batches; then big batches (issue 30):
the web workers' memory per concurrent 3 MB batch, and how fairly many writers share ingest beside a greedy one.

For each database: a fresh database (a temp SQLite file; `waymark_load` on the PostgreSQL server), migrate, the demo
graphs, agent identities with a token each and a reader token (the token rate limit raised out of reach: the readers
measure the server), then gunicorn as the Procfile runs it (2 workers x 32 threads, Waymark's worker class).

Part 1 (small batches): readers alone first (the idle baseline), then 50 writers (each an agent with its own token:
the fair shares of common/fairshare.py would answer most of 50 concurrent requests of one token 429) POSTing batches
of 10 runs (3 steps each) while 4 readers GET /api/v1/graphs/two-hop-qa/active.

Part 2 (big batches: 250 runs x 10 steps, about 3 MB each; every writer its own agent and token; a writer answered
429 or 503 waits Retry-After, as waymark-client does):
- memory: one writer alone (the baseline: one batch at a time), then 10 writers at once, each phase against a fresh
  one-worker server (32 threads) so that neither inherits the other's heap. Figure: the worker's peak resident memory
  (the kernel's high-water mark, reset when the phase starts) above its resident size then, for 10 writers against
  the one-writer baseline, and per batch of the 10.
- fairness: 6 writers alone (the baseline), then the same 6 beside a greedy agent sending on 18 connections with one
  token (the per-token cap), then beside a greedy agent with 4 tokens sending on 6 connections each (the per-agent
  cap: its tokens' shares together would be 8 slots, its agent's is 4), on the Procfile's 2 workers. Figures: Jain's
  fairness index of the batches accepted per writer (a greedy agent counts as one writer; 1.0 = equal shares), the 6
  writers' accepted batches against the baseline, the greedy agent's share, 429 (by the cap that answered: token or
  agent) and 503.

Afterwards the runs stored are compared with the runs acknowledged. About six minutes for both databases on the
2-core development machine.

Usage: .venv/bin/python bench/load.py [--seconds 20] [--writers 50] [--only sqlite|postgres] [--part small|big]
       [--big-seconds 12] [--threads 32] [--sqlite-timeout 20]   (before issue 10: --threads 4 --sqlite-timeout 5)
       [--per-agent N]   (the per-agent cap of ingest in flight; 0: off, to see what it holds back)
       (DATABASE_URL names the PostgreSQL server; default postgres://postgres@127.0.0.1:5432)
"""

from __future__ import annotations

import argparse
import contextlib
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
from dataclasses import dataclass
from pathlib import Path

from _database import create as create_database
from _database import urls as database_urls

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
GUNICORN = str(Path(PYTHON).parent / "gunicorn")
PG_DATABASE = "waymark_load"
RUNS_PER_BATCH = 10
READERS = 4
WORKSPACE = "two-hop-qa"
# Part 2
BIG_RUNS, BIG_STEPS, BIG_OBSERVATION = 250, 10, 1000  # about 3 MB of JSON
MEMORY_WRITERS = 10
FAIR_WRITERS = 6
GREEDY_CONNECTIONS = 18
GREEDY_TOKENS, GREEDY_CONNECTIONS_PER_TOKEN = 4, 6  # the agent with several tokens: 24 connections
BIG_AGENTS = MEMORY_WRITERS + FAIR_WRITERS + 1  # part 2's writers, the greedy one last
TAG = b"@TAG@"

SETUP = """
import json
from accounts.models import User
from accounts.services import Actor, agent_create, api_token_create
from graphs.demo import seed_demo_graphs
seed_demo_graphs(actor=Actor.system())
reader = User.objects.create(username="load-reader")
writers = [
    api_token_create(actor=Actor.system(), user=agent_create(actor=Actor.system(), name=f"load-agent-{n}"), name="w",
                     scopes=["trajectories:write"])[1]
    for n in range(AGENTS)
]
read = api_token_create(actor=Actor.system(), user=reader, name="r", scopes=["graphs:read"])[1]
many = agent_create(actor=Actor.system(), name="load-agent-many-tokens")
greedy = [
    api_token_create(actor=Actor.system(), user=many, name=f"g{n}", scopes=["trajectories:write"])[1]
    for n in range(GREEDY_TOKENS)
]
print(json.dumps({"writers": writers, "reader": read, "greedy_tokens": greedy}))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def _big_template() -> bytes:
    """A 3 MB batch whose external ids hold TAG (replaced per request: building it costs the client ~1 ms)."""
    runs = [
        {
            "source": "load",
            "external_id": f"{TAG.decode()}-{i}",
            "task": f"Refund order {i}: the parcel arrived damaged and the customer wants a refund.",
            "intent": "refund_request",
            "outcome": "success",
            "metadata": {"agent": "load", "n": i},
            "steps": [
                {
                    "tool": f"tool_{s % 5}",
                    "arguments": {"order_id": f"o-{i}", "step": s},
                    "observation": "ok: " + "x" * BIG_OBSERVATION,
                    "ok": True,
                    "input_tokens": 120,
                    "output_tokens": 30,
                }
                for s in range(BIG_STEPS)
            ],
        }
        for i in range(BIG_RUNS)
    ]
    return json.dumps({"runs": runs}).encode()


def _call(request: urllib.request.Request) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)
    except OSError:
        return 0, b"", {}  # connection refused or reset


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: dict[int, int] = {}
        self.latencies: list[float] = []
        self.acknowledged: set[int] = set()
        self.accepted: dict[str, int] = {}  # batches accepted (200/201) per writer
        self.refused_by: dict[str, int] = {}  # 429 too_many_in_flight per cap ("token" or "agent")

    def add(self, status: int, seconds: float, ids: list[int] = (), writer: str = "", scope: str = "") -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if scope:
                self.refused_by[scope] = self.refused_by.get(scope, 0) + 1
            self.latencies.append(seconds)
            self.acknowledged.update(ids)
            if writer:
                self.accepted[writer] = self.accepted.get(writer, 0) + (status in (200, 201))

    def ok(self) -> int:
        return sum(n for status, n in self.statuses.items() if 200 <= status < 400)

    def count(self, *statuses: int) -> int:
        return sum(self.statuses.get(status, 0) for status in statuses)

    def other_errors(self, *expected: int) -> int:
        return sum(
            n for status, n in self.statuses.items() if not 200 <= status < 400 and status not in (503, *expected)
        )

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _post(base: str, token: str, body: bytes) -> tuple[int, list[int], float, dict[str, str], str]:
    """(status, run ids acknowledged, seconds, headers, the cap that refused it: "token", "agent" or "")."""
    request = urllib.request.Request(
        base + "/api/v1/trajectories",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    start = time.perf_counter()
    status, answer, headers = _call(request)
    ids, scope = [], ""
    if status in (200, 201):
        parsed = json.loads(answer)
        ids = parsed["created_ids"] + parsed["existing_ids"]
    elif status == 429:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            scope = json.loads(answer)["details"]["scope"]
    return status, ids, time.perf_counter() - start, headers, scope


def _load(base: str, writer_tokens: list[str], reader_token: str, seconds: float) -> tuple[Tally, Tally]:
    """One writer per token (each an agent of its own), POSTing small batches until the deadline, beside readers."""
    deadline = time.monotonic() + seconds
    writes, reads = Tally(), Tally()

    def writer(token: str) -> None:
        tag = uuid.uuid4().hex
        n = 0
        while time.monotonic() < deadline:
            n += 1
            status, ids, elapsed, _, _ = _post(base, token, _batch(f"{tag}-{n}"))
            writes.add(status, elapsed, ids)

    def reader() -> None:
        while time.monotonic() < deadline:
            request = urllib.request.Request(
                f"{base}/api/v1/graphs/{WORKSPACE}/active", headers={"Authorization": f"Bearer {reader_token}"}
            )
            start = time.perf_counter()
            status, _, _ = _call(request)
            reads.add(status, time.perf_counter() - start)

    threads = [threading.Thread(target=writer, args=(token,)) for token in writer_tokens]
    threads += [threading.Thread(target=reader) for _ in range(READERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return writes, reads


def _big_writers(base: str, writers: dict[str, tuple[str | list[str], int]], seconds: float, template: bytes) -> Tally:
    """`writers`: name -> (token or tokens, connections per token). Each connection POSTs big batches until the
    deadline, waiting Retry-After (at most the time left) after a 429 or 503."""
    deadline = time.monotonic() + seconds
    tally = Tally()

    def connection(name: str, token: str) -> None:
        tag = uuid.uuid4().hex
        n = 0
        while time.monotonic() < deadline:
            n += 1
            status, ids, elapsed, headers, scope = _post(base, token, template.replace(TAG, f"{tag}-{n}".encode()))
            tally.add(status, elapsed, ids, writer=name, scope=scope)
            if status in (429, 503):
                wait = float(headers.get("Retry-After") or 1)
                time.sleep(max(0.0, min(wait, deadline - time.monotonic())))

    threads = [
        threading.Thread(target=connection, args=(name, token))
        for name, (tokens, connections) in writers.items()
        for token in ([tokens] if isinstance(tokens, str) else tokens)
        for _ in range(connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tally


def jain(values: list[float]) -> float:
    """Jain's fairness index: (sum x)^2 / (n * sum x^2); 1.0 when every share is equal, 1/n when one takes all."""
    square_sum = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * square_sum) if square_sum else float("nan")


# --- the web workers' memory (Linux /proc) -------------------------------------------------------------------------


def _workers(master: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


@contextlib.contextmanager
def _peak_memory(master: int):
    """Yields a dict filled on exit with each worker's peak resident memory above its resident size at the start
    (MiB): the kernel's high-water mark, reset at the start (writing 5 to clear_refs)."""
    pids = _workers(master)
    start = {}
    for pid in pids:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        start[pid] = _status_kib(pid, "VmRSS")
    found: dict[int, float] = {}
    yield found
    for pid in pids:
        found[pid] = (_status_kib(pid, "VmHWM") - start[pid]) / 1024


# --- a database and its servers --------------------------------------------------------------------------------------


@dataclass
class Server:
    kind: str
    env: dict[str, str]
    threads: int
    writers: list[str]  # part 1's agent tokens, then part 2's
    reader: str
    greedy_tokens: list[str]  # the tokens of part 2's agent with several
    var_dir: Path
    pg_url: str

    def tokens(self, part: int) -> list[str]:
        return self.writers[-BIG_AGENTS:] if part == 2 else self.writers[:-BIG_AGENTS]

    @contextlib.contextmanager
    def gunicorn(self, workers: int = 2):
        """gunicorn as the Procfile runs it on this database; yields (base URL, master pid)."""
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        log = (self.var_dir / f"gunicorn-{port}.log").open("wb")
        args = ["--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--threads", str(self.threads)]
        args += ["--timeout", "120", "--worker-class", "config.gunicorn_worker.WaymarkThreadWorker"]
        server = subprocess.Popen(
            [GUNICORN, "config.wsgi:application", *args], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            for _ in range(300):
                if _call(urllib.request.Request(base + "/healthz"))[0]:
                    break
                time.sleep(0.1)
            yield base, server.pid
        finally:
            server.terminate()
            server.wait(timeout=60)
            log.close()


def _database(kind: str, threads: int, sqlite_timeout: int, small_writers: int, per_agent: int | None) -> Server:
    var_dir = Path(tempfile.mkdtemp(prefix=f"waymark-load-{kind}-"))
    pg_url, _ = database_urls(PG_DATABASE)
    if kind == "postgres":
        create_database(PG_DATABASE, fresh=True)
    env = _env(var_dir, pg_url if kind == "postgres" else None)
    env["WAYMARK_SQLITE_TIMEOUT"] = str(sqlite_timeout)
    if per_agent is not None:
        env["WAYMARK_INGEST_CONCURRENT_PER_AGENT"] = str(per_agent)
    env["WAYMARK_API_RATE_PER_TOKEN"] = "1000000"  # readers call as fast as they can: measure the server, not the limit
    _manage(env, "migrate", "--no-input", "-v", "0")
    setup = SETUP.replace("AGENTS", str(small_writers + BIG_AGENTS)).replace("GREEDY_TOKENS", str(GREEDY_TOKENS))
    tokens = json.loads(_manage(env, "shell", "-c", setup).strip().splitlines()[-1])
    return Server(kind, env, threads, tokens["writers"], tokens["reader"], tokens["greedy_tokens"], var_dir, pg_url)


def _stored_ids(server: Server) -> set[int]:
    query = "SELECT id FROM trajectories_run WHERE source = 'load'"
    if server.kind == "sqlite":
        with sqlite3.connect(server.var_dir / "waymark.sqlite3") as conn:
            return {row[0] for row in conn.execute(query)}
    import psycopg

    with psycopg.connect(server.pg_url) as conn:
        return {row[0] for row in conn.execute(query)}


def small_batches(server: Server, seconds: float) -> tuple[dict, set[int]]:
    with server.gunicorn() as (base, _):
        _, idle = _load(base, [], server.reader, min(5.0, seconds))
        writes, reads = _load(base, server.tokens(1), server.reader, seconds)
    row = {
        "database": server.kind,
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
        "_statuses": f"writes {dict(sorted(writes.statuses.items()))}, reads {dict(sorted(reads.statuses.items()))}",
    }
    return row, writes.acknowledged


def _memory_phase(server: Server, writers: dict[str, tuple[str, int]], seconds: float, template: bytes):
    """`writers` against a fresh one-worker server: (tally, the worker's peak MiB above its idle resident size)."""
    with server.gunicorn(workers=1) as (base, master):
        _post(base, server.reader, b"{}")  # imports and the database connection (a 403: the reader cannot write)
        with _peak_memory(master) as peak:
            tally = _big_writers(base, writers, seconds, template)
    return tally, max(peak.values())


def big_batches(server: Server, seconds: float) -> tuple[dict, set[int]]:
    template = _big_template()
    body_mb = len(template) / 1e6
    tokens = iter(server.tokens(2))
    memory_writers = {f"m{n}": (next(tokens), 1) for n in range(MEMORY_WRITERS)}
    fair_writers = {f"f{n}": (next(tokens), 1) for n in range(FAIR_WRITERS)}
    greedy = {"greedy": (next(tokens), GREEDY_CONNECTIONS)}
    many = {"greedy-many-tokens": (server.greedy_tokens, GREEDY_CONNECTIONS_PER_TOKEN)}
    alone, alone_mib = _memory_phase(server, dict(list(memory_writers.items())[:1]), seconds, template)
    crowd, crowd_mib = _memory_phase(server, memory_writers, seconds, template)
    with server.gunicorn() as (base, _):
        fair_alone = _big_writers(base, fair_writers, seconds, template)
        beside = _big_writers(base, {**fair_writers, **greedy}, seconds, template)
        beside_many = _big_writers(base, {**fair_writers, **many}, seconds, template)
    acknowledged: set[int] = set()
    for tally in (alone, crowd, fair_alone, beside, beside_many):
        acknowledged |= tally.acknowledged
    honest_alone = sum(fair_alone.accepted.get(name, 0) for name in fair_writers)
    honest_beside = sum(beside.accepted.get(name, 0) for name in fair_writers)
    honest_many = sum(beside_many.accepted.get(name, 0) for name in fair_writers)
    shares = [beside.accepted.get(name, 0) for name in [*fair_writers, *greedy]]
    many_shares = [beside_many.accepted.get(name, 0) for name in [*fair_writers, *many]]
    row = {
        "database": server.kind,
        "body MB": body_mb,
        "1 writer: peak MiB": alone_mib,
        f"{MEMORY_WRITERS} writers: peak MiB": crowd_mib,
        "ratio": crowd_mib / alone_mib if alone_mib else float("nan"),
        f"MiB per batch of {MEMORY_WRITERS}": crowd_mib / MEMORY_WRITERS,
        f"{MEMORY_WRITERS} writers ok/429/503": f"{crowd.ok()}/{crowd.count(429)}/{crowd.count(503)}",
        "Jain alone": jain([fair_alone.accepted.get(name, 0) for name in fair_writers]),
        "Jain beside greedy": jain(shares),
        "honest ok beside/alone": honest_beside / honest_alone if honest_alone else float("nan"),
        "greedy share": shares[-1] / sum(shares) if sum(shares) else float("nan"),
        "beside greedy 429/503": f"{beside.count(429)}/{beside.count(503)}",
        f"Jain beside {GREEDY_TOKENS}-token greedy": jain(many_shares),
        "honest ok beside/alone (tokens)": honest_many / honest_alone if honest_alone else float("nan"),
        f"{GREEDY_TOKENS}-token greedy share": many_shares[-1] / sum(many_shares) if sum(many_shares) else float("nan"),
        "beside it 429 token/agent, 503": (
            f"{beside_many.refused_by.get('token', 0)}/{beside_many.refused_by.get('agent', 0)}, "
            f"{beside_many.count(503)}"
        ),
        "other errors": sum(t.other_errors(429) for t in (alone, crowd, fair_alone, beside, beside_many)),
        "_statuses": (
            f"1 writer {dict(sorted(alone.statuses.items()))}, {MEMORY_WRITERS} writers "
            f"{dict(sorted(crowd.statuses.items()))}, fair alone {dict(sorted(fair_alone.statuses.items()))}, "
            f"beside greedy {dict(sorted(beside.statuses.items()))}, beside the {GREEDY_TOKENS}-token greedy "
            f"{dict(sorted(beside_many.statuses.items()))}; accepted per writer alone "
            f"{[fair_alone.accepted.get(name, 0) for name in fair_writers]}, beside greedy {shares}, beside the "
            f"{GREEDY_TOKENS}-token greedy {many_shares}"
        ),
    }
    return row, acknowledged


def _table(rows: list[dict]) -> None:
    keys = [key for key in rows[0] if not key.startswith("_")]
    print()
    print("| " + " | ".join(keys) + " |")
    print("|" + "|".join("---" for _ in keys) + "|")
    for row in rows:
        cells = [f"{row[key]:.2f}" if isinstance(row[key], float) else str(row[key]) for key in keys]
        print("| " + " | ".join(cells) + " |")
    print()
    for row in rows:
        print(f"{row['database']} statuses (0: connection failed): {row['_statuses']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--writers", type=int, default=50)
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    parser.add_argument("--part", choices=["small", "big"], help="only part 1 (small batches) or part 2 (big)")
    parser.add_argument("--big-seconds", type=float, default=12.0, help="each phase of part 2")
    parser.add_argument("--threads", type=int, default=32, help="gunicorn threads per worker (the Procfile: 32)")
    parser.add_argument("--sqlite-timeout", type=int, default=20, help="WAYMARK_SQLITE_TIMEOUT, seconds")
    parser.add_argument(
        "--per-agent", type=int, help="WAYMARK_INGEST_CONCURRENT_PER_AGENT (default: the settings'; 0 turns it off)"
    )
    options = parser.parse_args()
    kinds = [options.only] if options.only else ["sqlite", "postgres"]
    small_rows, big_rows = [], []
    for kind in kinds:
        server = _database(kind, options.threads, options.sqlite_timeout, options.writers, options.per_agent)
        acknowledged: set[int] = set()
        rows = []
        if options.part != "big":
            print(f"{kind}: {options.writers} writers + {READERS} readers for {options.seconds:.0f} s ...", flush=True)
            row, ids = small_batches(server, options.seconds)
            small_rows.append(row)
            rows.append(row)
            acknowledged |= ids
        if options.part != "small":
            print(f"{kind}: big batches, 5 phases of {options.big_seconds:.0f} s ...", flush=True)
            row, ids = big_batches(server, options.big_seconds)
            big_rows.append(row)
            rows.append(row)
            acknowledged |= ids
        stored = _stored_ids(server)
        for row in rows:
            row["acked == stored"] = stored == acknowledged
    for rows in (small_rows, big_rows):
        if rows:
            _table(rows)


if __name__ == "__main__":
    main()
