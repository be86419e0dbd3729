#!/usr/bin/env python
"""Guidance benchmarks: (a) raw localized guidance (core Guide, raw_subgraph) on graphs of 10 to 10,000 nodes, time
per call as a ratio to the 10-node graph (must stay flat: the cost follows the neighbourhood, not the graph);
(b) the calls an agent makes on every step — GET /api/v1/graphs/{ws}/active (200 and 304), raw POST …/guidance and
GET /api/v1/procedures, the active procedures (200 and 304) — through the whole stack (gunicorn on 127.0.0.1,
PostgreSQL, Redis cache) against a trivial JSON endpoint on the same stack: requests/s as a ratio with p50/p99
latency. Issue 13's aim: each at least 0.8 of the baseline, the 304s at least 1.0; issue 29 item 4 raises it to 0.9
for the 200s (the 304s still at least 1.0), including the per-step calls of a workspace whose active graph is a
canary (issue 27): the same two-hop graph under workspace `bench-canary`, a revision with one description changed
live for half the runs, called with a run key (`X-Waymark-Run`) and the pin of the revision the run was served
(`X-Waymark-Revision`), as an agent in a canary run calls.

The baseline is `/bench/ping`: a plain Django JsonResponse without authentication, through the same middleware, in
this script's own URLconf (the gunicorn workers load `guidance:wsgi_app()` from this file, which serves that URLconf:
the ping, then config.urls' patterns at the top level as production resolves them). `/bench/api/ping`, a trivial
ninja operation behind the same bearer-token auth, is printed for context. The bench database gets one active
procedure, written directly (set-up only, as the tests' factories do), so the procedures list is not empty. Nothing
listens beyond 127.0.0.1 and every request count is bounded; the script starts and stops its own gunicorn.

Usage: .venv/bin/python bench/guidance.py [--quick] [--core-only]
(DATABASE_URL names the PostgreSQL server, default 127.0.0.1:5432; WAYMARK_BENCH_REDIS_URL the Redis database,
default redis://127.0.0.1:6379/7)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from _database import create as create_database
from _database import urls as database_urls

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_DATABASE = "waymark_bench"
SIZES = (10, 100, 1_000, 10_000)
OUT_DEGREE = 3
WORKSPACE = "two-hop-qa"
CANARY_WORKSPACE = "bench-canary"
CANARY_SHARE = 0.5
CLIENT_THREADS = 4
GUNICORN_WORKERS = 2
BASELINE = "trivial JSON, no auth"
TOKEN_PING = "trivial ninja op, token auth"
AIM, AIM_304 = 0.9, 1.0  # issue 29 item 4 (issue 13's aim for the 200s was 0.8)


# -- (a) the core Guide ----------------------------------------------------------------------------------------------


def chain_graph(size: int):
    """Start → t0 → … → End, each tool leading to the next OUT_DEGREE tools: N_2 has the same size at any scale."""
    from graphs.core import END, START, Edge, Graph, Node

    tools = [f"t{i}" for i in range(size - 2)]
    nodes = [Node(START, "STATUS", "Task start"), Node(END, "STATUS", "Task end")]
    nodes += [Node(t, "ACTION", f"tool number {i}") for i, t in enumerate(tools)]
    attributes = {"condition": "the previous step succeeded", "guidance": "call it with the id", "pitfalls": None}
    edges = [Edge(START, "LEADS_TO", tools[0], attributes)]
    for i, tool in enumerate(tools):
        targets = tools[i + 1 : i + 1 + OUT_DEGREE] or [END]
        edges += [Edge(tool, "LEADS_TO", target, attributes) for target in targets]
    return Graph(nodes=nodes, edges=tuple(edges))


def bench_core(calls: int, repeats: int) -> dict[int, tuple[float, int]]:
    """Best time per call of each size; sizes interleaved in every repeat so they share the machine's load."""
    from graphs.core import GuidanceConfig, Guide

    guides = {}
    for size in SIZES:
        graph = chain_graph(size)
        # the middle tool, or the last one whose 2-hop neighbourhood is complete on the smallest graph
        middle = f"t{max(0, min((size - 2) // 2, size - 3 - 2 * OUT_DEGREE))}"
        steps = [{"action": "t0", "args": {"id": 1}, "observation": "ok"}, {"action": middle, "args": {"id": 2}}]
        guide = Guide(graph, config=GuidanceConfig(mode="raw_subgraph", hops=2))
        for _ in range(20):  # warm-up: adjacency is computed once per graph, lazily
            guide.guidance("what next?", steps)
        guides[size] = (guide, steps)
    best = dict.fromkeys(SIZES, float("inf"))
    for _ in range(repeats):
        for size, (guide, steps) in guides.items():
            started = time.perf_counter()
            for _ in range(calls):
                guide.guidance("what next?", steps)
            best[size] = min(best[size], (time.perf_counter() - started) / calls)
            guide.guidance_log.clear()
            guide.visited.clear()
    return {size: (best[size], len(guides[size][0].graph.edges)) for size in SIZES}


def report_core(per_call: dict[int, tuple[float, int]], calls: int) -> None:
    base = per_call[SIZES[0]][0]
    print(f"(a) raw localized guidance, core Guide (raw_subgraph, hops 2), best of {calls} calls per size")
    print(f"    {'nodes':>7} {'edges':>7} {'µs/call':>9} {'ratio to 10 nodes':>18}")
    for size, (seconds, edges) in per_call.items():
        print(f"    {size:>7,} {edges:>7,} {seconds * 1e6:>9.1f} {seconds / base:>18.2f}")


# -- (b) the whole stack ---------------------------------------------------------------------------------------------


def stack_environment() -> dict[str, str]:
    database, _ = database_urls(BENCH_DATABASE)
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": database,
        "REDIS_URL": os.environ.get("WAYMARK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"),
        "WAYMARK_DEBUG": "false",
        "WAYMARK_VAR_DIR": os.environ.get("WAYMARK_BENCH_VAR_DIR", "/tmp/waymark-bench-guidance"),
        "WAYMARK_LOG_LEVEL": "WARNING",
        # the bench sends far more than an agent's per-token minute allows: measure the work, not the limit
        "WAYMARK_API_RATE_PER_TOKEN": "1000000000",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "bench")]),
    }


def prepare_stack() -> str:
    """Migrate the bench database, seed the demo workspace and return a fresh token (graphs:read, graphs:guide)."""
    create_database(BENCH_DATABASE)
    os.environ.update(stack_environment())
    import django

    django.setup()
    from django.conf import settings
    from django.core.cache import cache
    from django.core.management import call_command

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        sys.exit("bench/guidance.py needs PostgreSQL (set DATABASE_URL or start it on 127.0.0.1:5432)")
    call_command("migrate", verbosity=0)
    from accounts.models import User
    from accounts.services import Actor, api_token_create
    from graphs.demo import seed_demo_graphs

    seed_demo_graphs(actor=Actor.system())
    seed_canary_workspace()
    seed_active_procedure()
    cache.clear()
    user = User.objects.filter(username="bench-agent").first() or User.objects.create_user("bench-agent")
    _, token = api_token_create(
        actor=Actor.system(),
        user=user,
        name=f"bench {uuid.uuid4().hex[:6]}",
        scopes=["graphs:read", "graphs:guide", "procedures:read"],
    )
    return token


def seed_canary_workspace() -> None:
    """`bench-canary`: the two-hop graph active, then the same graph with one description changed live as a canary
    for CANARY_SHARE of runs, the first one the control (idempotent; set-up only: the canary is started through the
    graph kind's hook, as an applied promotion starts it, without a review)."""
    from django.db import transaction

    from accounts.services import Actor
    from graphs import services
    from graphs.core import Graph
    from graphs.demo import TWO_HOP_GRAPH
    from graphs.models import Workspace
    from reviews.registry import get_kind

    actor = Actor.system()
    workspace = Workspace.objects.filter(slug=CANARY_WORKSPACE).first()
    if workspace is None:
        workspace = services.workspace_create(actor=actor, slug=CANARY_WORKSPACE, graph=TWO_HOP_GRAPH).workspace
    if workspace.canary_control_id is not None:
        return
    control = workspace.active_revision
    changed = {**TWO_HOP_GRAPH, "nodes": [dict(node) for node in TWO_HOP_GRAPH["nodes"]]}
    changed["nodes"][-1]["description"] = "Give the final answer: the country name only"
    graph, _ = Graph.from_human(changed)
    candidate = services.graph_append_accepted(
        actor=actor, workspace=workspace, graph=graph, expected_head=control.digest
    )
    with transaction.atomic():
        get_kind("graph_revision").start_canary(
            actor=actor, candidate_id=str(candidate.pk), expected_active_id=str(control.pk), share=CANARY_SHARE
        )


def canary_run_key() -> str:
    """A run key the canary serves its candidate (uplift.core.canary: the same on every process)."""
    from uplift.core.canary import CANARY, arm_for

    return next(
        f"bench-run-{n}" for n in range(1000) if arm_for(CANARY_WORKSPACE, f"bench-run-{n}", CANARY_SHARE) == CANARY
    )


def seed_active_procedure() -> None:
    """One procedure with an active three-step version (idempotent; bench set-up only, no review)."""
    from procedures.mining import content_revision
    from procedures.models import Procedure, ProcedureVersion, VersionStatus

    procedure, _ = Procedure.objects.get_or_create(intent="refund request", defaults={"title": "Refund request"})
    if procedure.active_version_id is None:
        steps = [{"tool": tool, "arguments": {}} for tool in ("lookup_policy", "issue_refund", "notify")]
        version = ProcedureVersion.objects.create(
            procedure=procedure,
            number=1,
            steps=steps,
            candidate_revision=f"sha256:{1:064d}",
            content_revision=content_revision(intent=procedure.intent, steps=steps),
            status=VersionStatus.ACTIVE,
        )
        Procedure.objects.filter(pk=procedure.pk).update(active_version=version, revision=1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_gunicorn(port: int) -> subprocess.Popen:
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "guidance:wsgi_app()",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(GUNICORN_WORKERS),
        "--log-level",
        "warning",
        "--chdir",
        str(ROOT),
    ]
    server = subprocess.Popen(command, env=stack_environment(), start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            status, _, _ = request(port, "GET", "/bench/ping", {})
            if status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    stop_gunicorn(server)
    sys.exit("gunicorn did not start on 127.0.0.1")


def stop_gunicorn(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def request(port: int, method: str, path: str, headers: dict, body: bytes | None = None) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def load(port: int, method: str, path: str, headers: dict, body: bytes | None, total: int, expect: int) -> dict:
    """`total` requests from CLIENT_THREADS threads; requests/s and latency percentiles."""
    latencies: list[float] = []
    lock = threading.Lock()
    remaining = [total]
    failures: list[str] = []

    def worker() -> None:
        while True:
            with lock:
                if remaining[0] == 0:
                    return
                remaining[0] -= 1
            started = time.perf_counter()
            status, _, content = request(port, method, path, headers, body)
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if status != expect and len(failures) < 3:
                    failures.append(f"{status}: {content[:200]!r}")

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(CLIENT_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{method} {path} answered {failures}")
    ordered = sorted(latencies)
    return {
        "rps": total / seconds,
        "p50": statistics.median(ordered) * 1000,
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


def bench_stack(total: int, rounds: int) -> dict[str, tuple]:
    """(b); returns the cases, for (c)."""
    token = prepare_stack()
    port = _free_port()
    server = start_gunicorn(port)
    try:
        auth = {"Authorization": f"Bearer {token}"}
        status, headers, _ = request(port, "GET", f"/api/v1/graphs/{WORKSPACE}/active", auth)
        if status != 200:
            raise SystemExit(f"GET active answered {status}")
        etag = headers["ETag"]
        status, headers, body = request(port, "GET", "/api/v1/procedures", auth)
        if status != 200 or not json.loads(body)["items"]:
            raise SystemExit(f"GET procedures answered {status} {body[:200]!r}")
        procedures_etag = headers["ETag"]
        run = {**auth, "X-Waymark-Run": canary_run_key()}
        status, headers, _ = request(port, "GET", f"/api/v1/graphs/{CANARY_WORKSPACE}/active", run)
        if status != 200 or headers.get("Vary") is None:
            raise SystemExit(f"GET the canary workspace's active graph answered {status} without a canary")
        pinned = {**run, "X-Waymark-Revision": headers["X-Waymark-Revision"]}  # the run's pin, sent on every step
        canary_etag = headers["ETag"]
        guidance = json.dumps(
            {"query": "Which country?", "steps": [{"action": "search"}, {"action": "read"}], "mode": "raw_subgraph"}
        ).encode()
        post_headers = {**auth, "Content-Type": "application/json"}
        cases = {
            BASELINE: ("GET", "/bench/ping", {}, None, 200),
            TOKEN_PING: ("GET", "/bench/api/ping", auth, None, 200),
            "GET active (200)": ("GET", f"/api/v1/graphs/{WORKSPACE}/active", auth, None, 200),
            "GET active (304)": (
                "GET",
                f"/api/v1/graphs/{WORKSPACE}/active",
                {**auth, "If-None-Match": etag},
                None,
                304,
            ),
            "POST guidance (raw)": ("POST", f"/api/v1/graphs/{WORKSPACE}/guidance", post_headers, guidance, 200),
            "GET active canary (200)": ("GET", f"/api/v1/graphs/{CANARY_WORKSPACE}/active", pinned, None, 200),
            "GET active canary (304)": (
                "GET",
                f"/api/v1/graphs/{CANARY_WORKSPACE}/active",
                {**pinned, "If-None-Match": canary_etag},
                None,
                304,
            ),
            "POST guidance canary (raw)": (
                "POST",
                f"/api/v1/graphs/{CANARY_WORKSPACE}/guidance",
                {**pinned, "Content-Type": "application/json"},
                guidance,
                200,
            ),
            "GET procedures (200)": ("GET", "/api/v1/procedures", auth, None, 200),
            "GET procedures (304)": (
                "GET",
                "/api/v1/procedures",
                {**auth, "If-None-Match": procedures_etag},
                None,
                304,
            ),
        }
        for case in cases.values():  # warm-up: imports, connections, caches in every worker
            load(port, *case[:4], total=40, expect=case[4])
        best: dict[str, dict] = {}
        ratios: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):  # interleaved rounds: each case measured right after the baseline of its round
            this_round = {}
            for name, case in cases.items():
                result = this_round[name] = load(port, *case[:4], total=total, expect=case[4])
                if name not in best or result["rps"] > best[name]["rps"]:
                    best[name] = result
            for name, result in this_round.items():
                ratios[name].append(result["rps"] / this_round[BASELINE]["rps"])
    finally:
        stop_gunicorn(server)
    print(
        f"(b) whole stack: gunicorn ({GUNICORN_WORKERS} sync workers) on 127.0.0.1, PostgreSQL ({BENCH_DATABASE}), "
        f"Redis cache; {CLIENT_THREADS} client threads, {total} requests per case, {rounds} interleaved rounds;"
        " req/s and latency of each case's best round, its ratio the median over the rounds of its req/s over the"
        " baseline's in the same round (one round's ratio varies by several percent on this shared machine)"
    )
    print(f"    {'case':<30} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs baseline':>12} {'aim':>5}")
    missed = []
    for name, result in best.items():
        ratio = statistics.median(ratios[name])
        aim = "" if name in (BASELINE, TOKEN_PING) else AIM_304 if "(304)" in name else AIM
        if aim and ratio < aim:
            missed.append(name)
        print(
            f"    {name:<30} {result['rps']:>8.0f} {result['p50']:>8.1f} {result['p99']:>8.1f} {ratio:>12.2f} {aim:>5}"
        )
    verdict = "met" if not missed else "NOT met by " + ", ".join(missed)
    print(f"    issue 29 aims (>= {AIM}, >= {AIM_304} for a 304): {verdict}")
    return cases


# -- (c) the same requests in process ----------------------------------------------------------------------------------


def bench_in_process(cases: dict[str, tuple], calls: int, rounds: int) -> None:
    """The WSGI application called directly with each case's request (no HTTP, no client, no gunicorn): the server's
    own time per request, best of `rounds` interleaved batches of `calls`. The bench's client threads share the two
    cores with the server, which narrows the ratios of (b); these show the server-side cost alone."""
    import io

    application = wsgi_app()

    def environ(method: str, path: str, headers: dict, body: bytes | None) -> dict:
        body = body or b""
        env = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "CONTENT_LENGTH": str(len(body)),
        }
        for name, value in headers.items():
            key = name.upper().replace("-", "_")
            env[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
        return env

    def run(method: str, path: str, headers: dict, body: bytes | None, expect: int) -> None:
        statuses = []
        chunks = application(environ(method, path, headers, body), lambda status, _headers: statuses.append(status))
        b"".join(chunks)
        chunks.close()
        if not statuses[0].startswith(str(expect)):
            raise SystemExit(f"{method} {path} answered {statuses[0]} in process")

    for case in cases.values():  # warm-up
        for _ in range(50):
            run(*case)
    best = dict.fromkeys(cases, float("inf"))
    ratios: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        this_round = {}
        for name, case in cases.items():
            started = time.perf_counter()
            for _ in range(calls):
                run(*case)
            seconds = this_round[name] = (time.perf_counter() - started) / calls
            best[name] = min(best[name], seconds)
        for name, seconds in this_round.items():
            ratios[name].append(this_round[BASELINE] / seconds)
    print(
        f"(c) the same requests to the WSGI application in process, {rounds} interleaved rounds of {calls} calls: the"
        " best time per call, the ratio the median over the rounds (as in (b))"
    )
    print(f"    {'case':<30} {'µs/call':>8} {'vs baseline':>12}")
    for name, seconds in best.items():
        print(f"    {name:<30} {seconds * 1e6:>8.1f} {statistics.median(ratios[name]):>12.2f}")


# -- the WSGI side (imported by gunicorn as module `guidance`) -------------------------------------------------------


def ping(request):
    from django.http import JsonResponse

    return JsonResponse({"ok": True})


_URLPATTERNS: list = []


def _bench_api():
    """A NinjaAPI of its own with one trivial operation behind the same bearer-token auth as the graphs API."""
    from ninja import NinjaAPI

    from accounts.api_auth import scoped

    api = NinjaAPI(urls_namespace="bench", docs_url=None, openapi_url=None)

    @api.get("/ping", auth=scoped("graphs:read"))
    def authenticated_ping(request):
        return {"ok": True}

    return api


def __getattr__(name: str):
    if name == "urlpatterns":  # built lazily, once: config.urls needs the app registry
        from django.urls import path

        from config import urls
        from config.step_api import STEP_CALLS

        if not _URLPATTERNS:
            # config.urls' own patterns at the top level, as in production (not under an include, one level deeper):
            # the per-step calls come first there; here the ping comes just before them (the baseline resolves
            # first, a per-step call after one failed pattern) and the bench's own API after them (its resolver,
            # which production does not have, must not be tried before every per-step call)
            steps = len(STEP_CALLS)
            if not all(pattern.callback.__name__.startswith("step_") for pattern in urls.urlpatterns[:steps]):
                raise LookupError("config.urls no longer starts with the per-step calls")
            _URLPATTERNS.extend(
                [
                    path("bench/ping", ping),
                    *urls.urlpatterns[:steps],
                    path("bench/api/", _bench_api().urls),
                    *urls.urlpatterns[steps:],
                ]
            )
        return _URLPATTERNS
    raise AttributeError(name)


def wsgi_app():
    """gunicorn's application factory: config.urls behind this module's URLconf (which adds /bench/ping)."""
    import django
    from django.conf import settings

    django.setup()
    settings.ROOT_URLCONF = __name__
    from django.core.wsgi import get_wsgi_application

    from config.heap import freeze_startup_objects

    application = get_wsgi_application()
    freeze_startup_objects()  # as config/wsgi.py
    return application


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and requests (for make bench)")
    parser.add_argument("--core-only", action="store_true", help="only (a): no database, no server")
    options = parser.parse_args()
    calls, repeats = (300, 3) if options.quick else (2_000, 5)
    report_core(bench_core(calls, repeats), calls)
    if not options.core_only:
        total, rounds = (150, 3) if options.quick else (400, 15)
        cases = bench_stack(total, rounds)
        bench_in_process(cases, calls=100, rounds=5 if options.quick else 30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
