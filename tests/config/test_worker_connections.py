"""A worker's database connections follow Django's rules, as a request's do (config/celery.py): kept from one task to
the next while younger than CONN_MAX_AGE, closed after every task with CONN_MAX_AGE 0, and replaced before a task
when the server dropped the one kept (the task runs, it does not fail)."""

import pytest
from django.db import connection

from config.celery import app
from tests.helpers.celery_workers import redis_app, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
__all__ = ["redis_app"]  # the worker fixture, used by name
SEEN: list[int] = []


@app.task(name="tests.config.backend_pid", ignore_result=True)
def backend_pid(close: bool = False) -> None:
    """Note the server process the worker's connection talks to; `close` drops the connection afterwards (so the
    test database can be dropped at the end of the session)."""
    from django.db import connection as worker_connection

    with worker_connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        SEEN.append(cursor.fetchone()[0])
    if close:
        worker_connection.close()


def pids_of(tasks: int, *, close_last: bool = True) -> list[int]:
    SEEN.clear()
    for number in range(tasks):
        backend_pid.delay(close_last and number == tasks - 1)
        assert wait_for(lambda ran=number + 1: len(SEEN) == ran, 20), "the worker did not run the task"
    return list(SEEN)


def test_a_connection_younger_than_its_max_age_serves_the_next_task(transactional_db, redis_app, monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    first, second, third = pids_of(3)
    assert first == second == third


def test_with_no_max_age_every_task_opens_its_own_connection(transactional_db, redis_app, monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    first, second = pids_of(2)
    assert first != second


def test_a_kept_connection_the_server_dropped_is_replaced_before_the_next_task(
    transactional_db, redis_app, monkeypatch
):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    (kept,) = pids_of(1, close_last=False)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [kept])
    assert wait_for(lambda: not _alive(kept), 10)
    (replaced,) = pids_of(1)
    assert replaced != kept


def _alive(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is not None
