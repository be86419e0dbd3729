#!/usr/bin/env python
"""Ingest throughput on PostgreSQL: runs/s and steps/s through POST /api/v1/trajectories (Django test client, bearer
token, JSON parsing, validation, normalization, idempotency check, audit) against a raw `bulk_create` of the same
rows, measured in the same process on a throwaway database `waymark_bench`. Prints the ratio (aim: >= 0.5).

Usage: .venv/bin/python bench/ingest.py   (DATABASE_URL names the PostgreSQL server; default 127.0.0.1:5432)
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_DATABASE = "waymark_bench"
RUNS_PER_BATCH = 500
STEPS_PER_RUN = 6
BATCHES = 5
TOOLS = ["lookup_policy", "check_account", "issue_refund", "notify", "lookup_order", "cancel_order"]


def _bench_url() -> tuple[str, str]:
    server = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres"
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path=f"/{BENCH_DATABASE}")), urlunsplit(parts._replace(path="/postgres"))


def _ensure_database(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DATABASE]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{BENCH_DATABASE}"')


def _setup_django() -> None:
    bench_url, admin_url = _bench_url()
    _ensure_database(admin_url)
    os.environ["WAYMARK_TEST_DATABASE_URL"] = bench_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        sys.exit("bench/ingest.py needs PostgreSQL (set DATABASE_URL or start it on 127.0.0.1:5432)")
    setup_test_environment()  # lets the test client talk to "testserver"
    call_command("migrate", verbosity=0)


def _batch(tag: str) -> list[dict]:
    return [
        {
            "source": "bench",
            "external_id": f"{tag}-{n}",
            "task": f"Refund order {n}: the parcel arrived damaged and the customer wants their money back.",
            "intent": "refund_request",
            "outcome": "success" if n % 3 else "failure",
            "score": 1.0 if n % 3 else 0.0,
            "metadata": {"agent": "bench", "n": n},
            "started_at": "2026-11-02T09:00:00Z",
            "ended_at": "2026-11-02T09:02:00Z",
            "steps": [
                {
                    "tool": TOOLS[i],
                    "arguments": {"order_id": f"ORD-{n}", "amount": 12.5, "api_key": "dropped"},
                    "observation": "ok: " + "x" * 200,
                    "ok": True,
                    "started_at": "2026-11-02T09:00:00Z",
                    "ended_at": "2026-11-02T09:00:02Z",
                    "input_tokens": 800,
                    "cached_input_tokens": 128,
                    "output_tokens": 60,
                    "cost": 0.0033,
                }
                for i in range(STEPS_PER_RUN)
            ],
        }
        for n in range(RUNS_PER_BATCH)
    ]


def _raw_insert(items: list[dict]) -> None:
    """The baseline: build the same rows as model instances and bulk_create them, nothing else."""
    from django.db import transaction
    from django.utils import timezone
    from django.utils.dateparse import parse_datetime

    from trajectories.models import Run, Step

    now = timezone.now()
    with transaction.atomic():
        runs = [
            Run(
                source=item["source"],
                external_id=item["external_id"],
                task=item["task"],
                intent=item["intent"],
                outcome=item["outcome"],
                score=item["score"],
                metadata=item["metadata"],
                started_at=parse_datetime(item["started_at"]),
                ended_at=parse_datetime(item["ended_at"]),
                created_at=now,
                step_count=len(item["steps"]),
                total_tokens=sum(
                    s["input_tokens"] + s["cached_input_tokens"] + s["output_tokens"] for s in item["steps"]
                ),
                cost=sum(s["cost"] for s in item["steps"]),
                tools=[s["tool"] for s in item["steps"]],
            )
            for item in items
        ]
        Run.objects.bulk_create(runs)
        steps = [
            Step(
                run_id=run.pk,
                ordinal=ordinal,
                tool=step["tool"],
                action_family="other",
                arguments={"order_id": step["arguments"]["order_id"], "amount": step["arguments"]["amount"]},
                observation=step["observation"],
                ok=step["ok"],
                started_at=parse_datetime(step["started_at"]),
                ended_at=parse_datetime(step["ended_at"]),
                input_tokens=step["input_tokens"],
                cached_input_tokens=step["cached_input_tokens"],
                output_tokens=step["output_tokens"],
                cost=step["cost"],
            )
            for run, item in zip(runs, items, strict=True)
            for ordinal, step in enumerate(item["steps"])
        ]
        Step.objects.bulk_create(steps, batch_size=2000)


def main() -> int:
    _setup_django()
    from django.db import connection
    from django.test import Client

    from accounts.models import User
    from accounts.services import Actor, api_token_create

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE trajectories_step, trajectories_run RESTART IDENTITY CASCADE")
    user, _ = User.objects.update_or_create(username="bench-agent", defaults={"is_agent": True})  # agent-only scope
    _, token = api_token_create(
        actor=Actor.system(), user=user, name=f"bench {uuid.uuid4().hex[:6]}", scopes=["trajectories:write"]
    )
    client = Client(headers={"Authorization": f"Bearer {token}"})

    def post(items: list[dict]) -> None:
        body = json.dumps({"runs": items})
        response = client.generic("POST", "/api/v1/trajectories", body, content_type="application/json")
        if response.status_code != 201:
            raise SystemExit(f"ingest answered {response.status_code}: {response.content[:300]!r}")

    post(_batch("warm-api"))  # warm-up: imports, connection, caches
    _raw_insert(_batch("warm-raw"))
    api_times, raw_times = [], []
    for number in range(BATCHES):  # interleaved, so both paths see the same table sizes and machine load
        api_items, raw_items = _batch(f"api-{number}"), _batch(f"raw-{number}")
        started = time.perf_counter()
        post(api_items)
        api_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        _raw_insert(raw_items)
        raw_times.append(time.perf_counter() - started)

    # Best batch of each path: the least disturbed by other processes on a shared machine.
    api_seconds, raw_seconds = min(api_times), min(raw_times)
    runs, steps = RUNS_PER_BATCH, RUNS_PER_BATCH * STEPS_PER_RUN
    print(f"{BATCHES} batches of {RUNS_PER_BATCH} runs x {STEPS_PER_RUN} steps per path, PostgreSQL ({BENCH_DATABASE})")
    print(f"ingest API       {runs / api_seconds:9.0f} runs/s {steps / api_seconds:9.0f} steps/s  (best batch)")
    print(f"raw bulk_create  {runs / raw_seconds:9.0f} runs/s {steps / raw_seconds:9.0f} steps/s  (best batch)")
    ratio = raw_seconds / api_seconds
    print(f"ratio (API / raw): {ratio:.2f}  (aim >= 0.5: {'met' if ratio >= 0.5 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
