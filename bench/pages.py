#!/usr/bin/env python
"""Pages at scale: with 1,000,000 runs, 10,000,000 steps and 300,000 model calls stored on PostgreSQL, the
trajectories list with each filter, a text search, a run's page, the dashboard and the model calls page (its totals
rolled up as beat rolls them) answer with a fixed number of queries, in a time close to the login page's on the same
server.

The database `waymark_pages` on the PostgreSQL server is migrated and filled with PostgreSQL `COPY` (several minutes
at full scale), then kept: a later run at the same scale reuses it (`--fresh` rebuilds it). Each page is fetched once
in-process through Django's test client to count its queries, then timed over HTTP against gunicorn as the Procfile
runs it (logged in as an operator), `--requests` rounds of one request to each page in turn (so that every page meets
the shared machine's slow and quiet moments alike). The ratio is each page's time to the login
page's (GET /accounts/login/, a form rendered with no query of ours), after WARM_REQUESTS untimed requests per page
(enough that each of gunicorn's two workers has most likely served it), at the median and the 95th percentile; the aim
is ≤ 3× at the 95th percentile. The floor nothing can beat is the login page itself (ratio 1). A filter whose
totals need a walk of the matching runs shows its rows first and asks for the totals in a request of its own,
timed as a page of its own ("· its totals"); one text search is new in every request ("{round}" in its path), so
it never finds the probe's answer kept from a request before.

Usage: .venv/bin/python bench/pages.py [--runs 1000000] [--steps 10] [--requests 100] [--fresh]
       (DATABASE_URL names the PostgreSQL server; default postgres://postgres@127.0.0.1:5432)
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _database import create as create_database
from _database import urls as database_urls

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from trajectories.core.search import SearchStep, search_document  # noqa: E402 - a pure core, no Django

PYTHON = sys.executable
GUNICORN = str(Path(PYTHON).parent / "gunicorn")
DATABASE = "waymark_pages"
PASSWORD = "bench-pages-password"
SOURCES = ["support-agent", "billing-agent", "search-agent", "ops-agent", "waymark-evaluation"]
INTENTS = [f"intent_{n:02d}" for n in range(20)]
TOOLS = [f"tool_{n:02d}" for n in range(30)]
WORDS = [
    "order",
    "refund",
    "parcel",
    "damaged",
    "kettle",
    "invoice",
    "account",
    "password",
    "reset",
    "shipping",
    "address",
    "label",
    "carrier",
    "warehouse",
    "policy",
    "window",
    "customer",
    "ticket",
    "escalate",
    "manager",
    "approve",
    "deny",
    "balance",
    "charge",
    "card",
    "expired",
]
RARE_WORD = "zanzibarite"  # in one observation of every 10,000th run: the text search's needle
START = datetime(2026, 9, 1, tzinfo=UTC)
WARM_REQUESTS = 6  # untimed requests per page first: gunicorn's two workers each take some
ROUND = "{round}"  # in a page's path: replaced by the request's number, so that no two requests are the same
RUNS_FOR_TIME = 1_000_000  # runs spread over 90 days at full scale (fewer runs: fewer days)


def _env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "WAYMARK_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.local",
        DATABASE_URL=database_url,
        WAYMARK_DEBUG="false",
        WAYMARK_VAR_DIR=str(ROOT / "var" / "bench-pages"),
    )
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"manage.py {args[0]} failed:\n{done.stderr[-3000:]}")
    return done.stdout


# --- the data ------------------------------------------------------------------------------------------------------
def _scale_of(url: str) -> tuple[int, int] | None:
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT runs, steps FROM bench_scale WHERE calls IS NOT NULL").fetchone()
    except psycopg.Error:
        return None
    return tuple(row) if row else None


def _steps_of(run: int, steps: int) -> list[tuple]:
    """The steps of one run, the same every time they are drawn (seeded by the run's id)."""
    rng = random.Random(run)
    at = START + timedelta(seconds=run * 90 * 86400 // RUNS_FOR_TIME)
    rows = []
    for ordinal in range(steps):
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        if ordinal == steps - 1 and run % 10_000 == 0:
            words += f" {RARE_WORD}"
        took = timedelta(milliseconds=rng.randint(50, 4000))
        tool = TOOLS[(run + ordinal * 7) % len(TOOLS)]
        arguments = {"order_id": f"ORD-{run}", "n": ordinal}
        ok = ordinal != steps - 1 or run % 5 != 0
        rows.append((ordinal, tool, arguments, words, ok, at, at + took, rng.randint(100, 800), rng.randint(10, 80)))
        at += took
    return rows


def _run_rows(runs: int, steps: int):
    rng = random.Random(7)
    for pk in range(1, runs + 1):
        drawn = _steps_of(pk, steps)
        task = f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} for customer {pk % 9973}"
        outcome = "success" if rng.random() < 0.7 else ("failure" if rng.random() < 0.8 else "unknown")
        tools = list(dict.fromkeys(step[1] for step in drawn))
        tokens = sum(step[7] + step[8] for step in drawn)
        started, ended = drawn[0][5], drawn[-1][6]
        document = search_document(task, [SearchStep(step[1], step[2], step[3]) for step in drawn])
        yield (
            pk,
            SOURCES[pk % len(SOURCES)],
            f"run-{pk}",
            task,
            INTENTS[rng.randrange(len(INTENTS))],
            outcome,
            round(rng.random(), 3) if pk % 3 else None,
            "",
            "",
            json.dumps({"model": "bench", "n": pk % 7}),
            started,
            ended,
            started,
            steps,
            tokens,
            round(steps * 0.0003, 6),
            json.dumps(tools),
            (ended - started).total_seconds(),
            document,
        )


def _step_rows(runs: int, steps: int):
    pk = 0
    for run in range(1, runs + 1):
        for ordinal, tool, arguments, words, ok, began, ended, tokens_in, tokens_out in _steps_of(run, steps):
            pk += 1
            family = "read" if ordinal % 3 else "execute"
            yield (
                pk,
                run,
                ordinal,
                tool,
                family,
                json.dumps(arguments),
                words,
                ok,
                began,
                ended,
                tokens_in,
                0,
                tokens_out,
                0.0003,
            )


RUN_COLUMNS = (
    "id, source, external_id, task, intent, outcome, score, graph_workspace, graph_revision, metadata, started_at, "
    "ended_at, created_at, step_count, total_tokens, cost, tools, duration_seconds, search_document"
)
STEP_COLUMNS = (
    "id, run_id, ordinal, tool, action_family, arguments, observation, ok, started_at, ended_at, input_tokens, "
    "cached_input_tokens, output_tokens, cost"
)


def _fill(url: str, runs: int, steps: int) -> None:
    import psycopg

    began = time.perf_counter()
    with psycopg.connect(url) as conn:
        with conn.cursor() as cur:
            with cur.copy(f"COPY trajectories_run ({RUN_COLUMNS}) FROM STDIN") as copy:
                for row in _run_rows(runs, steps):
                    copy.write_row(row)
            print(f"  {runs:,} runs copied in {time.perf_counter() - began:.0f} s", flush=True)
            with cur.copy(f"COPY trajectories_step ({STEP_COLUMNS}) FROM STDIN") as copy:
                for row in _step_rows(runs, steps):
                    copy.write_row(row)
            print(f"  {runs * steps:,} steps copied in {time.perf_counter() - began:.0f} s", flush=True)
            # The model-call ledger: 3 calls for every 10 runs (a refiner's, a proposer's, a rubric judge's), every
            # page's count of it read from this table.
            cur.execute(LEDGER, (START, RUNS_FOR_TIME, START, RUNS_FOR_TIME, runs * 3 // 10))
            print(f"  {runs * 3 // 10:,} model calls written in {time.perf_counter() - began:.0f} s", flush=True)
            for table in ("trajectories_run", "trajectories_step", "llm_modelcall"):
                cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        conn.commit()
    # Runs written behind ingest's back: the daily totals are recounted as after any such write (trajectories.rollup).
    _manage(_env(url), "shell", "-c", "from trajectories import rollup; rollup.rebuild()")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CREATE TABLE bench_scale (runs int, steps int, calls int)")
        conn.execute("INSERT INTO bench_scale VALUES (%s, %s, %s)", (runs, steps, runs * 3 // 10))
    print(f"  filled and analysed in {time.perf_counter() - began:.0f} s", flush=True)


# The calls, spread over the runs' days like the runs (a minute apart at full scale), succeeded with a short reply.
LEDGER = """
INSERT INTO llm_modelcall (role, model_id, provider, status, max_tokens, input_tokens, output_tokens,
    cached_input_tokens, latency_ms, cost, request_digest, request_preview, response_text, response_id, stop_reason,
    error, subject_type, subject_id, started_at, finished_at, diagnostics)
SELECT (ARRAY['refiner', 'intent_proposer', 'rubric_judge'])[1 + mod(n, 3)], 'claude-sonnet-4-5', 'anthropic',
    'succeeded', 1024, 3000 + mod(n, 500), 200 + mod(n, 50), 0, 2000 + mod(n, 900), 0.012, md5(n::text), 'a prompt',
    'a reply of a few words', 'msg_' || n, 'end_turn', '', 'bench', n::text,
    %s::timestamptz + make_interval(secs => (n::float8 * 90 * 86400 * 10 / 3 / %s)),
    %s::timestamptz + make_interval(secs => (n::float8 * 90 * 86400 * 10 / 3 / %s) + 2), '[]'::jsonb
FROM generate_series(1, %s) AS n
"""

SETUP = f"""
from accounts.models import Role, User
from accounts.services import Actor, user_roles_set
user, _ = User.objects.get_or_create(username="bench-operator")
user.set_password({PASSWORD!r})
user.save()
user_roles_set(actor=Actor.system(), user=user, roles=[Role.OPERATOR])
"""


# --- the pages -----------------------------------------------------------------------------------------------------
def pages(runs: int, steps: int) -> dict[str, str]:
    day = (START + timedelta(days=30)).date().isoformat()
    listed = {
        "login (floor)": "/accounts/login/",
        "dashboard": "/",
        "runs: newest": "/trajectories/",
        "runs: outcome": "/trajectories/?outcome=failure",
        "runs: source": "/trajectories/?source=billing-agent",
        "runs: intent": "/trajectories/?intent=intent_07",
        "runs: tool": "/trajectories/?tool=tool_13",
        "runs: time range": f"/trajectories/?received_from={day}&received_to={day}",
        "runs: score range": "/trajectories/?score_min=0.2&score_max=0.3",
        "runs: cost range": "/trajectories/?cost_min=0.002&cost_max=0.004",
        "runs: steps range": f"/trajectories/?steps_min={steps}&steps_max={steps}",
        "runs: latency range": "/trajectories/?duration_min=10&duration_max=20",
        "runs: evaluation kind": "/trajectories/?kind=evaluation",
        "runs: sorted by cost": "/trajectories/?sort=cost_desc",
        "runs: text search (rare)": f"/trajectories/?q={RARE_WORD}",
        "runs: text search (common)": "/trajectories/?q=kettle+refund",
        # the same search with a word excluded that no run has, new in every round: the probe's answer is never kept
        # from a request before (a first search), where the two above reuse it after their first request
        "runs: text search (rare), new each time": f"/trajectories/?q={RARE_WORD}+-unseen{ROUND}",
        "run page": f"/trajectories/{runs // 2}/",
        "model calls": "/models/",
        "model calls: one role": "/models/?role=refiner",
    }
    # Totals the daily totals cannot answer (a walk of the newest matching runs) come in a request of their own, which
    # the list page makes once it is shown: timed as pages of their own.
    walked = ("tool", "score_min", "cost_min", "steps_min", "duration_min", "q")
    for name, url in list(listed.items()):
        query = urllib.parse.urlsplit(url).query
        if url.startswith("/trajectories/?") and any(key in walked for key in urllib.parse.parse_qs(query)):
            listed[f"{name} · its totals"] = f"/trajectories/totals?{query}"
    return listed


def _query_counts(env: dict[str, str], urls: dict[str, str]) -> dict[str, int]:
    script = f"""
import json
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from accounts.models import User
client = Client()
client.force_login(User.objects.get(username="bench-operator"))
out = {{}}
for name, url in {urls!r}.items():
    anonymous = Client() if url.startswith("/accounts/login") else client
    with CaptureQueriesContext(connection) as ctx:
        status = anonymous.get(url, HTTP_HOST="127.0.0.1").status_code
    out[name] = [status, len(ctx.captured_queries)]
print(json.dumps(out))
"""
    return json.loads(_manage(env, "shell", "-c", script).strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _opener(base: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(base + "/accounts/login/").read()
    token = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
    body = urllib.parse.urlencode(
        {"username": "bench-operator", "password": PASSWORD, "csrfmiddlewaretoken": token}
    ).encode()
    opener.open(urllib.request.Request(base + "/accounts/login/", data=body, headers={"Referer": base + "/"})).read()
    if not any(cookie.name == "sessionid" for cookie in jar):
        sys.exit("could not log in")
    return opener


def _time(opener, anonymous, base: str, urls: dict[str, str], requests: int) -> dict[str, list[float]]:
    """Each page's times over `requests` rounds, every round one request to each page in turn: the pages share the
    machine's slow and quiet moments alike (on a shared machine a page timed in one block could land in a slow
    minute that its baseline missed)."""

    def client_for(path: str):
        return anonymous if path.startswith("/accounts/login") else opener

    for path in urls.values():
        for number in range(WARM_REQUESTS):  # warm every worker process (first-hit costs: templates, kept days, SQL)
            client_for(path).open(base + path.replace(ROUND, f"w{number}")).read()
    times: dict[str, list[float]] = {name: [] for name in urls}
    for number in range(requests):
        for name, path in urls.items():
            began = time.perf_counter()
            with client_for(path).open(base + path.replace(ROUND, str(number))) as response:
                response.read()
            times[name].append(time.perf_counter() - began)
    return times


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=10, help="steps per run")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per page")
    parser.add_argument("--fresh", action="store_true", help="rebuild the database even if its scale matches")
    options = parser.parse_args()
    url, _ = database_urls(DATABASE)
    env = _env(url)
    if options.fresh or _scale_of(url) != (options.runs, options.steps):
        print(f"building {DATABASE}: {options.runs:,} runs x {options.steps} steps ...", flush=True)
        create_database(DATABASE, fresh=True)
        _manage(env, "migrate", "--no-input", "-v", "0")
        _fill(url, options.runs, options.steps)
    else:
        _manage(env, "migrate", "--no-input", "-v", "0")
        print(f"reusing {DATABASE}: {options.runs:,} runs x {options.steps} steps", flush=True)
    _manage(env, "shell", "-c", SETUP)
    # The ledger's totals, rolled up as beat does every ten minutes (llm.services.model_call_totals_roll).
    _manage(env, "shell", "-c", "from llm.services import model_call_totals_roll; model_call_totals_roll()")
    urls = pages(options.runs, options.steps)
    counts = _query_counts(env, urls)

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (ROOT / "var" / "bench-pages-gunicorn.log").open("wb")
    server = subprocess.Popen(
        [GUNICORN, "config.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        opener, anonymous = _opener(base), urllib.request.build_opener()
        timings = _time(opener, anonymous, base, urls, options.requests)
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()

    floor50, floor95 = _pct(timings["login (floor)"], 0.5), _pct(timings["login (floor)"], 0.95)
    print()
    print(
        f"{options.runs:,} runs, {options.runs * options.steps:,} steps on PostgreSQL;"
        f" {options.requests} requests a page"
    )
    print("| page | status | queries | p50 ms | p95 ms | p50 / login | p95 / login |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for name, times in timings.items():
        status, queries = counts[name]
        p50, p95 = _pct(times, 0.5), _pct(times, 0.95)
        worst = max(worst, p95 / floor95)
        print(
            f"| {name} | {status} | {queries} | {p50 * 1000:.1f} | {p95 * 1000:.1f} | {p50 / floor50:.2f}x | "
            f"{p95 / floor95:.2f}x |"
        )
    print(f"\nworst p95 ratio to the login page: {worst:.2f}x (aim <= 3x)")


if __name__ == "__main__":
    main()
