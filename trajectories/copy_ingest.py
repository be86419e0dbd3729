"""The PostgreSQL write of the ingest (trajectories.services): runs by one INSERT, steps by one binary COPY.

- Runs: one `INSERT … SELECT … FROM unnest(<one array per column>) ON CONFLICT (source, external_id) DO NOTHING
  RETURNING id, source, external_id`. The unique constraint decides idempotency: a run whose identity a concurrent
  batch inserted meanwhile waits for that batch to commit and is then skipped (not returned), never an error; the
  caller looks its id up. COPY cannot do that (a conflict aborts the whole COPY), and measured against COPY into a
  temporary table then INSERT … SELECT, the single INSERT costs a few milliseconds more per 500 runs but keeps no
  per-connection state (docs/decisions.md).
- Steps: `COPY trajectories_step (…) FROM STDIN (FORMAT BINARY)`, only for the runs just inserted; the step ids come
  from the column's default.

Both run inside the caller's transaction: any refused value aborts the transaction and nothing is left. Database
errors are raised as Django's (IntegrityError, DataError…), as from the ORM. `insert_ignoring_conflicts` is the same
array INSERT for other tables (the OTLP trace rows).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import connection
from psycopg.types.json import Jsonb

from .models import Run, Step

# The PostgreSQL type each kind of model field is sent as (binary COPY and typed arrays need the type up front).
_PG_TYPES = {
    "BigAutoField": "int8",
    "ForeignKey": "int8",
    "CharField": "text",  # varchar and text share the binary format; the column's length check still applies
    "TextField": "text",
    "FloatField": "float8",
    "JSONField": "jsonb",
    "DateTimeField": "timestamptz",
    "PositiveIntegerField": "int4",
    "PositiveBigIntegerField": "int8",
    "BigIntegerField": "int8",
    "BooleanField": "bool",
}


def _types(model: type, columns: Sequence[str]) -> list[str]:
    """The PostgreSQL type of each column (by column name: a foreign key is `<field>_id`)."""
    fields = {field.column: field for field in model._meta.concrete_fields}  # type: ignore[attr-defined]
    return [_PG_TYPES[fields[name].get_internal_type()] for name in columns]


@functools.cache
def _insert_sql(model: type, columns: tuple[str, ...], conflict: tuple[str, ...], returning: str) -> str:
    table = model._meta.db_table  # type: ignore[attr-defined]
    aliases = ", ".join(f"c{i}" for i in range(len(columns)))
    arrays = ", ".join(f"%b::{kind}[]" for kind in _types(model, columns))
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT {aliases} FROM unnest({arrays}) WITH ORDINALITY "
        f"AS batch({aliases}, position) ORDER BY position ON CONFLICT ({', '.join(conflict)}) DO NOTHING"
        + (f" RETURNING {returning}" if returning else "")
    )


def _arrays(model: type, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    """One list per column (unnest's arguments); JSON values wrapped for jsonb."""
    arrays: list[list[Any]] = [list(column) for column in zip(*rows, strict=True)]
    for index, kind in enumerate(_types(model, columns)):
        if kind == "jsonb":
            arrays[index] = [Jsonb(value) for value in arrays[index]]
    return arrays


def insert_ignoring_conflicts(
    *, model: type, columns: tuple[str, ...], rows: Sequence[tuple[Any, ...]], conflict: tuple[str, ...]
) -> int:
    """Insert `rows` (tuples in `columns` order; foreign keys named `<field>_id`) in one statement, skipping those
    that conflict on `conflict` (bulk_create(ignore_conflicts=True) without the ORM's per-value compilation).
    Returns how many were inserted."""
    if not rows:
        return 0
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(_insert_sql(model, columns, conflict, ""), _arrays(model, columns, rows))
        return cursor.rowcount


@functools.cache
def _step_copy(step_columns: tuple[str, ...]) -> tuple[str, list[str]]:
    columns = ("run_id", *step_columns)
    return f"COPY trajectories_step ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)", _types(Step, columns)


def insert_runs(
    *,
    run_columns: tuple[str, ...],
    step_columns: tuple[str, ...],
    runs: Sequence[tuple[Any, ...]],
    steps: Sequence[Sequence[tuple[Any, ...]]],
) -> dict[tuple[str, str], int]:
    """Insert `runs` (tuples in `run_columns` order, source and external_id among them) and, for each run inserted,
    its `steps` (tuples in `step_columns` order, without run_id). Returns (source, external_id) → id of the runs
    inserted; a run whose identity exists already (or was committed meanwhile by another batch) is skipped with its
    steps. Must run inside a transaction."""
    if not runs:
        return {}
    arrays = _arrays(Run, run_columns, runs)
    insert_sql = _insert_sql(Run, run_columns, ("source", "external_id"), "id, source, external_id")
    copy_sql, copy_types = _step_copy(step_columns)
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(insert_sql, arrays)
        created = {(source, external_id): pk for pk, source, external_id in cursor.fetchall()}
        source_at, external_at = run_columns.index("source"), run_columns.index("external_id")
        pending = [
            (run_id, run_steps)
            for run, run_steps in zip(runs, steps, strict=True)
            if run_steps and (run_id := created.get((run[source_at], run[external_at]))) is not None
        ]
        if pending:
            with cursor.copy(copy_sql) as copy:
                copy.set_types(copy_types)
                write = copy.write_row
                for run_id, run_steps in pending:
                    for row in run_steps:
                        write((run_id, *row))
    return created
