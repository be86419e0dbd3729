"""Every start-up step that reads the user's data completes over a large store of it (issue 24, item 1): the same test
as `make run` with 6,000 of the user's runs (tests/config/test_start_with_user_data.py), step by step. The survey of
the steps is in docs/decisions.md ("Start-up steps over the user's data"); seed_demo's own tests are in
tests/test_seed_demo.py.

- migrate: the data migrations that read every stored run (trajectories 0004 search documents and durations, 0005
  NFC identities, 0006 day totals, 0008 all-time totals) over 6,000 runs stored before them;
- beat's first tasks after a restart: every periodic task once, over 6,000 of the user's runs beside the demo; the
  scheduled intent proposal takes the oldest 5,000 (services.MAX_RUNS) and the next schedule the rest, never
  failing;
- the demo agent's first claims: thousands of the user's evaluation jobs queued ahead of the demo's own.
"""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from accounts.services import Actor
from intents import services as intent_services
from intents.models import IntentBatchRun, IntentProposalBatch, IntentProposalRun
from tests.demo_data import USER_SOURCE, push_user_runs, user_runs

ROOT = Path(__file__).resolve().parents[2]
USER_RUNS = 6000

# --- migrate ----------------------------------------------------------------------------------------------------
MIGRATE_OVER_STORED_RUNS = textwrap.dedent(
    """
    import sys, time

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    count = int(sys.argv[1])
    before = [("trajectories", "0003_job_claimed_by_token")]  # the last migration before the data migrations
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    Run, Step = old.get_model("trajectories", "Run"), old.get_model("trajectories", "Step")
    intents = ("refund_request", "cancel_order", "change_address", "order_status")
    runs = Run.objects.bulk_create(
        [
            Run(
                source="acme-support-bot",
                external_id=f"user-{number}",
                task=f"Refund order U-{number}",
                intent=intents[number % 4],
                outcome="failure" if number % 5 == 0 else "success",
                step_count=2,
                total_tokens=10,
            )
            for number in range(count)
        ],
        batch_size=1000,
    )
    Step.objects.bulk_create(
        [
            Step(run=run, ordinal=ordinal, tool=tool, arguments={"order_id": run.external_id}, observation="done")
            for run in runs
            for ordinal, tool in enumerate(("lookup_order", "issue_refund"))
        ],
        batch_size=2000,
    )
    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    print("migrated in", time.monotonic() - started)
    after = MigrationExecutor(connection)
    print("unapplied", len(after.migration_plan(after.loader.graph.leaf_nodes())))
    """
)
MIGRATE_WITHIN = 60.0  # seconds for the whole migration over 6,000 runs (about 10 s on 2 cores)


def embedded_env(var_dir: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WAYMARK_", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "CELERY_"))
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", WAYMARK_VAR_DIR=str(var_dir))
    return env


def test_migrate_over_6000_runs_stored_before_the_data_migrations_completes_and_fills_them(tmp_path):
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", MIGRATE_OVER_STORED_RUNS, str(USER_RUNS)],
        cwd=ROOT,
        env=embedded_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "migrated in" in result.stdout and elapsed < MIGRATE_WITHIN, (elapsed, result.stdout)
    with sqlite3.connect(tmp_path / "waymark.sqlite3") as db:
        unfilled = db.execute("SELECT COUNT(*) FROM trajectories_run WHERE search_document NOT LIKE '%issue_refund%'")
        assert unfilled.fetchone() == (0,)  # 0004: every run's search document
        assert db.execute("SELECT SUM(runs), SUM(steps) FROM trajectories_runday").fetchone() == (USER_RUNS, 12000)
        totals = db.execute("SELECT outcome, SUM(runs) FROM trajectories_runtotal GROUP BY outcome ORDER BY outcome")
        assert totals.fetchall() == [("failure", 1200), ("success", 4800)]  # 0006 and 0008
    assert "unapplied 0" in result.stdout


# --- beat's first tasks -------------------------------------------------------------------------------------------
@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


@pytest.fixture
def restarted(db, var_dir):
    """The demo seeded, then 6,000 of the user's runs: what beat's first tasks find after a restart."""
    call_command("seed_demo", stdout=io.StringIO(), stderr=io.StringIO())
    push_user_runs(USER_RUNS)


def beat_tasks() -> dict[str, str]:
    from config.celery import app

    app.loader.import_default_modules()  # what a worker imports: every app's tasks
    return {name: entry["task"] for name, entry in settings.CELERY_BEAT_SCHEDULE.items()}


def test_every_periodic_task_runs_over_6000_of_the_users_runs(restarted):
    from config.celery import app

    tasks = beat_tasks()
    assert "intents.propose_new_runs" in tasks.values()
    failed = {}
    for name, task in tasks.items():
        result = app.tasks[task].apply()  # as the worker runs beat's message (errors raise here: eager propagation)
        if not result.successful():
            failed[name] = repr(result.result)
    assert failed == {}


def test_the_scheduled_proposal_over_more_than_5000_new_runs_takes_the_oldest_5000_then_the_rest(restarted):
    from intents import tasks

    assert user_runs().count() > intent_services.MAX_RUNS

    first = IntentProposalRun.objects.get(pk=tasks.propose_new_runs())

    users = list(user_runs().order_by("id").values_list("pk", flat=True))
    taken = set(IntentBatchRun.objects.filter(batch__run=first).values_list("trajectory_run_id", flat=True))
    assert first.scheduled and first.runs_total == intent_services.MAX_RUNS
    assert taken == set(users[: intent_services.MAX_RUNS])  # the oldest, none of the demo's (covered at seeding)
    assert tasks.propose_new_runs() is None  # while it is open, the next schedule waits

    # As if the worker had worked its 1,000 batches (test set-up: the steps themselves are tested in tests/intents).
    IntentProposalBatch.objects.filter(run=first).update(status=IntentProposalBatch.Status.SUCCEEDED)
    IntentProposalRun.objects.filter(pk=first.pk).update(status=IntentProposalRun.Status.SUCCEEDED)
    second = IntentProposalRun.objects.get(pk=tasks.propose_new_runs())

    rest = set(IntentBatchRun.objects.filter(batch__run=second).values_list("trajectory_run_id", flat=True))
    assert rest == set(users[intent_services.MAX_RUNS :])
    assert (
        not IntentBatchRun.objects.filter(batch__run__in=[first, second])
        .exclude(trajectory_run__source=USER_SOURCE)
        .exists()
    )


# --- the demo agent's first claims --------------------------------------------------------------------------------
@pytest.mark.postgres
def test_the_demo_agent_answers_its_own_jobs_behind_thousands_of_the_users_and_leaves_theirs(
    transactional_db, live_server, operator, make_agent_token
):
    from procedures.mining import services as mining_services
    from procedures.replay.services import live as live_replay_services
    from tests.procedures.factories import REFUND, refund_runs
    from trajectories.models import Job, JobStatus

    # The user's own evaluation jobs, queued before the demo's: their intents and workspaces, not the demo's.
    Job.objects.bulk_create(
        [
            Job(kind="procedure_replay", subject="user-replay", payload={"intent": "warranty_claim", "n": n})
            for n in range(2500)
        ]
        + [
            Job(kind="graph_evaluation", subject="user-evolution", payload={"workspace": "support", "n": n})
            for n in range(2500)
        ]
    )
    theirs = set(Job.objects.values_list("pk", flat=True))
    refund_runs(successes=10, failures=2)
    live = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True).version.replays.get(
        mode="live"
    )
    ours = Job.objects.filter(subject=live_replay_services.replay_subject(live))
    assert ours.exists() and min(ours.values_list("pk", flat=True)) > max(theirs)
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()

    call_command(
        "run_demo_agent",
        "--once",
        "--token",
        make_agent_token("evaluations:run"),
        "--url",
        live_server.url,
        stdout=out,
        stderr=err,
    )

    assert time.monotonic() - started < 30
    assert set(ours.values_list("status", flat=True)) == {JobStatus.DONE}
    assert f"answered {ours.count()} job(s)" in out.getvalue(), (out.getvalue(), err.getvalue())
    assert set(Job.objects.filter(pk__in=theirs).values_list("status", flat=True)) == {JobStatus.QUEUED}
