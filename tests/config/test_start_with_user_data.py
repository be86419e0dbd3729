"""`make run` over a var directory that already holds the user's data (issue 24, items 1 and 2; issue 30, item 5).

The whole stack is started as `make run` starts it (scripts/run.sh: port check, migrate, seed_demo, honcho with the
Procfile) on an embedded var directory (SQLite, filesystem broker) that already holds 6,000 runs of the user's own
agent (more than a scheduled intent proposal takes at once) and a beat schedule left by a stack stopped two hours
ago, so that beat sends every periodic task at once when it starts, as after a restart. It must serve the login page
within a bound, answer a missing page with the styled 404, run beat's first tasks without a failure (the scheduled
intent proposal takes the oldest 5,000 runs), print no failure, and leave nothing behind when its process group is
killed with SIGKILL: every process gone, the port free for the next `make run`.

The other start-up steps that read the user's data are tested on their own in tests/config/test_start_steps.py
(docs/decisions.md, "Start-up steps over the user's data").
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from http.client import HTTPConnection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and /proc (Linux)")

USER_RUNS = 6000
LOGIN_WITHIN = 45.0  # seconds from `scripts/run.sh` starting to the login page served (about 15 s on 2 cores)
NAV = 'aria-label="Main"'
DEBUG_TEXT = ("Traceback", "URLconf", "DEBUG = True", "Request Method", "settings.py", "Django tried")
# What a start that went wrong prints: a traceback, a seeder or task that failed, a process that ended.
FAILURE_TEXT = (
    "Traceback",
    "failed",
    "raised",
    " ERROR ",
    "CRITICAL",
    "could not be seeded",
    "exited with code",
    "was killed by",
    "stopping what it left running",
)

# The var directory as a user's leaves it: migrated, 6,000 of their runs (through the ingest service, 1,000 a batch
# as an agent sends them), and beat's schedule with every entry last sent two hours ago.
PREPARE = textwrap.dedent(
    """
    import sys
    from datetime import timedelta

    import django

    django.setup()
    from celery.beat import PersistentScheduler
    from django.core.management import call_command

    from config.celery import app
    from tests.demo_data import push_user_runs

    call_command("migrate", interactive=False, verbosity=0)
    push_user_runs(int(sys.argv[1]))
    scheduler = PersistentScheduler(app=app, schedule_filename=sys.argv[2], lazy=True)
    scheduler.setup_schedule()
    for entry in scheduler.schedule.values():
        entry.last_run_at = app.now() - timedelta(hours=2)
    print("entries", *sorted(entry["task"] for entry in app.conf.beat_schedule.values()))
    scheduler.sync()
    scheduler.close()
    """
)


def embedded_env(var_dir: Path, port: int) -> dict[str, str]:
    """What `make run` runs with: the embedded default (no DATABASE_URL, REDIS_URL or test settings), var/ here."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WAYMARK_", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "CELERY_"))
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", WAYMARK_VAR_DIR=str(var_dir), PORT=str(port))
    return env


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A free port from 8700 up (8000-8010 belong to the developers' own stacks)."""
    return next(port for port in range(8700, 8800) if port_free(port) and port_free(port + 1))


def fetch(port: int, path: str) -> tuple[int, str]:
    connection = HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def process_table() -> dict[int, int]:
    """pid → parent pid of every live (not zombie) process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            table[int(entry.name)] = int(fields[1])
    return table


def descendants(root: int) -> set[int]:
    table = process_table()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in table.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    return pids & set(process_table())


def wait_for(predicate, seconds: float, step: float = 0.25):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(step)
    return predicate()


def succeeded_tasks(output: str) -> set[str]:
    """The task names the worker logged as succeeded."""
    names = set()
    for line in output.splitlines():
        if " succeeded in " in line and "Task " in line:
            names.add(line.split("Task ", 1)[1].split("[", 1)[0])
    return names


def test_make_run_over_6000_user_runs_serves_runs_beats_first_tasks_and_dies_whole_under_kill_9(tmp_path):
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    port = free_port()
    env = embedded_env(var_dir, port)
    prepared = subprocess.run(
        [sys.executable, "-c", PREPARE, str(USER_RUNS), str(var_dir / "celerybeat-schedule")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert prepared.returncode == 0, prepared.stderr
    beat_tasks = set(prepared.stdout.split("entries", 1)[1].split())
    assert "intents.propose_new_runs" in beat_tasks  # the schedule that reads the user's runs is on

    log = (tmp_path / "make-run.log").open("w+")
    # `make run` is `bash scripts/run.sh $(PORT)`; a session of its own, as a terminal's job is a process group.
    stack = subprocess.Popen(
        ["bash", "scripts/run.sh", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    processes: set[int] = set()
    try:

        def login_served() -> bool:
            assert stack.poll() is None, f"make run ended ({stack.returncode}):\n{Path(log.name).read_text()}"
            try:
                return fetch(port, "/accounts/login/")[0] == 200
            except OSError:
                return False

        assert wait_for(login_served, LOGIN_WITHIN), (
            f"no login page within {LOGIN_WITHIN} s:\n{Path(log.name).read_text()}"
        )

        status, page = fetch(port, "/does-not-exist")
        assert status == 404
        assert NAV in page and "Page not found" in page and "waymark.css" in page
        assert not [text for text in DEBUG_TEXT if text in page], page

        # Beat sent every overdue task at start; the worker runs each, the intent proposal over the user's runs too.
        ran = wait_for(lambda: beat_tasks <= succeeded_tasks(Path(log.name).read_text()), 40)
        output = Path(log.name).read_text()
        assert ran, f"not run: {sorted(beat_tasks - succeeded_tasks(output))}\n{output}"
        assert stack.poll() is None, output
        assert not [text for text in FAILURE_TEXT if text in output], output
        assert "Waymark is starting at" in output and "beat: Starting" in output

        processes = descendants(stack.pid) | {stack.pid}
        names = {Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in processes}
        for part in ("gunicorn", "celery -A config worker", "celery -A config beat", "run_demo_agent"):
            assert [name for name in names if part in name], (part, names)

        os.killpg(stack.pid, signal.SIGKILL)  # `kill -9 -- -PGID` of make run's process group
        stack.wait(timeout=10)
        left = wait_for(lambda: not alive(processes), 20)
        assert left, {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in alive(processes)}
        assert wait_for(lambda: port_free(port), 10), f"port {port} still taken"
        check = subprocess.run(
            [sys.executable, "scripts/check_port.py", str(port)], cwd=ROOT, capture_output=True, text=True, timeout=30
        )
        assert check.returncode == 0, check.stderr  # a next `make run` starts
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGKILL)
        for pid in alive(processes):
            os.kill(pid, signal.SIGKILL)
        log.close()

    # What beat's first tasks did with the user's data: the demo's proposal covers the demo's runs only; the scheduled
    # one took the oldest 5,000 of the user's runs (the next schedule takes the rest) and did not fail.
    with sqlite3.connect(var_dir / "waymark.sqlite3") as db:
        proposals = db.execute(
            "SELECT scheduled, runs_total, status FROM intents_intentproposalrun ORDER BY id"
        ).fetchall()
        count = "SELECT COUNT(*) FROM trajectories_run WHERE source = ?"
        users_runs = db.execute(count, ("acme-support-bot",)).fetchone()[0]
        demo_runs = db.execute(count, ("demo-support-agent",)).fetchone()[0]
    assert users_runs == USER_RUNS and demo_runs > 0
    assert proposals[0][:2] == (0, demo_runs)
    assert [(scheduled, total) for scheduled, total, _ in proposals[1:]] == [(1, 5000)]
    assert proposals[1][2] in ("queued", "running", "succeeded"), proposals


def test_every_procfile_line_execs_its_command_under_the_supervisor():
    """The group kill above reaches every command only through scripts/supervise.py, and only when the shell honcho
    runs a line in is replaced by it (`exec`): a shell left in between would not pass the stop on."""
    lines = [line for line in (ROOT / "Procfile").read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert {line.split(":", 1)[0] for line in lines} == {"web", "worker", "beat", "agent"}
    for line in lines:
        name, command = (part.strip() for part in line.split(":", 1))
        assert command.startswith(f"exec .venv/bin/python scripts/supervise.py {name} -- "), line
