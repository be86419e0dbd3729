"""Every write to the database comes from a write module (issue 14, item 2): checked on every statement the tests run.

The autouse fixture `_writes_go_through_services` (tests/conftest.py) wraps the test's database connection
(`connection.execute_wrapper`). For each INSERT, UPDATE or DELETE (or a WITH statement with one in it) it walks the
Python stack outward from the statement, past Django and the other installed libraries and past the models modules (a
model's own `save()`), to the first frame in Waymark's code. That frame must be in a write module:

* an app's (or a sub-domain's) `services.py`, a module of a `services/` package, or a `*_services.py`: every write
  of the design;
* one of WRITE_MODULES below, each with the reason it writes;
* a migration (tests of data migrations run them);
* tests/ itself: tests and their factories arrange rows directly.

A helper in PASS_THROUGH writes only the model its caller hands it, so the walk goes on to its caller.
The session store's table (FRAMEWORK_TABLES) is left to Django. The admin is read-only (config/admin_site.py), so
it never writes; if it did, admin.py is not a write module.

Anything else (a view, an API operation, a task, a selector, a form, a management command, config, the admin) that
writes makes the test fail, naming the module, the line and the statement. Only write statements are checked, so
the cost is a stack walk per write and nothing per read.

Scope: the statements of this process on the connection of the test's own thread. Writes made by a Celery worker, a
gunicorn server or a thread with its own connection that a test starts are not seen here (the same code runs in
this process in the other tests). COPY on PostgreSQL (trajectories.copy_ingest) goes through `cursor.copy()`, not
`execute()`, and is not seen either; that module is a write module anyway.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
VENV = ROOT / ".venv"

# Modules that write although their name is not services: (path relative to the root, why).
WRITE_MODULES = {
    "trajectories/copy_ingest.py": "ingest's bulk insert (COPY on PostgreSQL), called by trajectories.services",
    "trajectories/rollup.py": "the daily run totals, kept by ingest in its own transaction",
    "graphs/revisions.py": "appends to a revision chain, called by graphs' services and the evolution stores",
    "graphs/evolution/stores.py": "the evolution loop's stores write the chains and rounds as the loop runs",
    "procedures/versions/split.py": "the seeded split's run lists, written with the version or replay that holds them",
    "reviews/webhooks.py": "the webhook outbox, endpoints and delivery attempts",
    "accounts/token_cache.py": "tokens' last-used times, flushed in batches by the token cache",
}
# Helpers that write only the rows of the model their caller passes in: the caller is the write's origin.
PASS_THROUGH = {
    ("reviews/registry.py", "move_active_version"): "the activation a promotable kind runs on its own parent model",
    ("common/statements.py", "send"): "sends the writes its caller built (update_statement, a service's statement)",
    ("common/fixed_queries.py", "rows_together"): "sends first the writes its caller built (a claim), then reads",
}
# Tables Django's own machinery writes for a request (the session store): the framework's state, not an app's rows.
FRAMEWORK_TABLES = ("django_session",)
# Every app's promotable.py: `activate()` moves the app's own pointer inside reviews.services' transaction.
WRITE_MODULE_NAMES = ("services.py", "promotable.py")
WRITE_STATEMENTS = ("INSERT", "UPDATE", "DELETE")


@dataclass(frozen=True)
class Violation:
    module: str
    line: int
    function: str
    statement: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} ({self.function}) writes outside services: {self.statement[:120]}"


def _is_write_module(relative: str) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return (
        relative in WRITE_MODULES
        or name in WRITE_MODULE_NAMES
        or name.endswith("_services.py")
        or "/services/" in relative
        or "/migrations/" in relative
    )


_verdicts: dict[str, str | None] = {}  # filename -> None (not ours: keep walking), "ok", or the relative path


def _verdict(filename: str) -> str | None:
    """None for library code and models modules (look further out), "ok" for a write module or tests/, else the
    module's path relative to the root (a write from there is a violation)."""
    if filename in _verdicts:
        return _verdicts[filename]
    path = Path(filename)
    verdict: str | None
    if not path.is_absolute() or not path.is_relative_to(ROOT) or path.is_relative_to(VENV):
        verdict = None
    elif path.is_relative_to(TESTS):
        verdict = "ok"
    else:
        relative = path.relative_to(ROOT).as_posix()
        name = path.name
        if name == "models.py" or name.endswith("_models.py"):
            verdict = None
        elif _is_write_module(relative):
            verdict = "ok"
        else:
            verdict = relative
    _verdicts[filename] = verdict
    return verdict


def write_origin(frame) -> tuple[str, int, str] | None:
    """(module, line, function) of the first Waymark frame outward from `frame` when it is not a write module; None
    when the write is allowed (a write module, tests/, or no Waymark frame at all)."""
    while frame is not None:
        verdict = _verdict(frame.f_code.co_filename)
        if verdict == "ok":
            return None
        if verdict is not None and (verdict, frame.f_code.co_name) not in PASS_THROUGH:
            return verdict, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


def _is_checked_write(sql: str) -> bool:
    """An INSERT, UPDATE or DELETE of an app's table (the first quoted name is the table written), or a WITH
    statement with a data-modifying part (common/statements.py, the leases' claims: they write app tables only)."""
    head = sql.lstrip()[:6].upper()
    if head[:4] == "WITH":
        return _DATA_MODIFYING.search(sql) is not None
    if head not in WRITE_STATEMENTS:
        return False
    quoted = sql.split('"', 2)
    return len(quoted) < 3 or quoted[1] not in FRAMEWORK_TABLES


_DATA_MODIFYING = re.compile(r"\b(?:INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM)\b", re.IGNORECASE)


@contextmanager
def writes_recorded(conn=connection) -> Iterator[list[Violation]]:
    """Within the block, every write statement on `conn` whose origin is not a write module is recorded."""
    violations: list[Violation] = []

    def check(execute, sql, params, many, context):
        if isinstance(sql, str) and _is_checked_write(sql):
            origin = write_origin(sys._getframe(1))
            if origin is not None:
                violations.append(Violation(*origin, " ".join(sql.split())))
        return execute(sql, params, many, context)

    with conn.execute_wrapper(check):
        yield violations
