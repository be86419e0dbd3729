"""Shared plumbing of the fault tests: a real Celery worker subprocess (prefork pool, one process) on a Redis broker
and the test's PostgreSQL database, whose pool process SIGKILLs itself once at named points.

Test side (the pytest process): `broker_url`, `point_app_at` / `restore_app` (this process's Celery app sends to the
worker's broker), `wait_for` (with an optional `tick`, the test playing Celery beat), and `fault_worker(...)`, a
context manager that starts the worker with a test-only Celery module and stops it however the test ends.

Worker side (the `-A` module of the subprocess, e.g. tests/procedures/fault_worker.py): `worker_app()` sets Django up
and points the project's Celery app at the broker the test chose; `die_once_at(point)` kills the current process
(the pool process, when called from a task) the first time it reaches a point named in FAULT_KILL_POINTS, leaving a
marker so the next process goes on; `note(name, line)` appends a line to a file the test reads afterwards (to count
what happened across processes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KILLED_PREFIX = "killed-"


# --- the test process ------------------------------------------------------------------------------------------------
def database_url() -> str:
    """The URL of the database this test process is on, for a subprocess on the test settings to connect to
    (WAYMARK_TEST_DATABASE_URL): under xdist each worker's own (pytest-django suffixes the test database's name with
    the worker id), with the user, password, host and port of the running settings."""
    from urllib.parse import quote

    from django.db import connection

    database = connection.settings_dict
    user = quote(database["USER"] or "postgres", safe="")
    password = ":" + quote(database["PASSWORD"], safe="") if database.get("PASSWORD") else ""
    host = database["HOST"] or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"postgres://{user}{password}@{host}:{database['PORT'] or 5432}/{quote(database['NAME'], safe='')}"


def broker_url(db: int) -> str:
    """The test Redis server, database `db` (each fault test uses its own so queues never mix)."""
    from django.conf import settings

    return settings.TEST_REDIS_URL.rsplit("/", 1)[0] + f"/{db}"


def point_app_at(url: str, queue: str = "celery") -> dict:
    """Send this process's tasks to `queue` on `url` (not eagerly), after emptying it; returns what restore_app
    needs."""
    from config.celery import app

    keys = ("broker_url", "task_always_eager", "broker_transport_options", "task_default_queue")
    saved = {key: app.conf[key] for key in keys}
    # The app's queue table is built once, from the default queue of that moment: build it with the usual one first,
    # so an in-process worker started later (celery.contrib.testing) still consumes from "celery".
    app.amqp.queues[saved["task_default_queue"]]
    app.conf.update(
        broker_url=url,
        task_always_eager=False,
        broker_transport_options={"visibility_timeout": 60},
        task_default_queue=queue,
    )
    app._pool = None
    app.amqp._producer_pool = None
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)
    return saved


def restore_app(saved: dict) -> None:
    from config.celery import app

    app.conf.update(saved)
    app._pool = None
    app.amqp._producer_pool = None


def wait_for(
    predicate: Callable[[], bool], seconds: float, *, tick: Callable[[], object] | None = None, every: float = 1.5
) -> bool:
    """Poll `predicate` until it holds or `seconds` pass; `tick` (if given) runs every `every` seconds meanwhile,
    the way Celery beat would send its periodic tasks."""
    deadline = time.monotonic() + seconds
    next_tick = time.monotonic()
    while time.monotonic() < deadline:
        if predicate():
            return True
        if tick is not None and time.monotonic() >= next_tick:
            tick()
            next_tick = time.monotonic() + every
        time.sleep(0.2)
    return False


class FaultWorker:
    """A `celery worker` subprocess running `module` (a test-only Celery module) with one prefork pool process."""

    def __init__(
        self, module: str, directory: Path, url: str, queue: str, points: list[str], env: dict[str, str]
    ) -> None:
        self.directory = directory
        self.points = points
        self.log_path = directory / "worker.log"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "WAYMARK_TEST_DATABASE_URL": database_url(),
            "FAULT_BROKER_URL": url,
            "FAULT_QUEUE": queue,
            "FAULT_DIR": str(directory),
            "FAULT_KILL_POINTS": ",".join(points),
            **env,
        }
        self.command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            module,
            "worker",
            "--queues",
            queue,
            "--pool",
            "prefork",
            "--concurrency",
            "1",
            "--loglevel",
            "INFO",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ]
        self.process: subprocess.Popen | None = None

    def start(self) -> FaultWorker:
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(self.command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        return self

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text()[-chars:] if self.log_path.exists() else "(no worker log)"

    def killed(self) -> list[str]:
        """The points at which a pool process was killed, sorted."""
        return sorted(path.read_text().split("\n", 1)[0] for path in self.directory.glob(f"{KILLED_PREFIX}*"))

    def lines(self, name: str) -> list[str]:
        """The lines the worker appended to `name` with note()."""
        path = self.directory / name
        return path.read_text().splitlines() if path.exists() else []


@contextmanager
def fault_worker(
    module: str, directory: Path, *, redis_db: int, points: list[str], env: dict[str, str] | None = None
) -> Iterator[FaultWorker]:
    """Start the worker on Redis database `redis_db` with this process's Celery app pointed at it; stop both
    whatever happens. The queue's name is new each time, so a worker of another test run sharing the database never
    takes these messages. Use inside a `transactional_db` test (the worker must see committed rows)."""
    url = broker_url(redis_db)
    queue = f"fault-{uuid.uuid4().hex[:12]}"
    saved = point_app_at(url, queue)
    worker = FaultWorker(module, directory, url, queue, points, env or {}).start()
    try:
        yield worker
    finally:
        worker.stop()
        restore_app(saved)
        _delete_queue(url, queue)


def _delete_queue(url: str, queue: str) -> None:
    from kombu import Connection

    with Connection(url) as conn:
        conn.default_channel.queue_delete(queue)


# --- the worker process ----------------------------------------------------------------------------------------------
def worker_app():
    """In the worker's `-A` module, first: Django on the test settings and the app on the test's broker."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from config.celery import app

    app.conf.update(
        broker_url=os.environ["FAULT_BROKER_URL"],
        task_always_eager=False,
        task_default_queue=os.environ.get("FAULT_QUEUE", "celery"),
    )
    return app


def _fault_dir() -> Path:
    return Path(os.environ["FAULT_DIR"])


def kill_points() -> list[str]:
    return [point for point in os.environ.get("FAULT_KILL_POINTS", "").split(",") if point]


def die_once_at(point: str) -> None:
    """SIGKILL this process the first time `point` is reached (when FAULT_KILL_POINTS names it)."""
    if point not in kill_points():
        return
    marker = _fault_dir() / (KILLED_PREFIX + "".join(c if c.isalnum() or c in "-_." else "-" for c in point))
    if marker.exists():
        return
    marker.write_text(f"{point}\n{os.getpid()}\n")
    os.kill(os.getpid(), signal.SIGKILL)


def note(name: str, line: str) -> None:
    """Append a line to FAULT_DIR/name (the test reads it with FaultWorker.lines)."""
    with open(_fault_dir() / name, "a") as log:
        log.write(line + "\n")
