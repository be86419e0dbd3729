"""Reads whose SQL and parameters never change, compiled by the ORM once per thread.

The ORM compiles a QuerySet on every evaluation; for the dashboard's small fixed reads (the newest runs, the newest
audit events) compiling cost about as much as running them. A `FixedQuery` compiles its `values_list` QuerySet the
first time a thread runs it, keeps the SQL, the parameters and the converters the ORM applies to each column, and
then runs the SQL on a plain cursor: its rows are the tuples the QuerySet gives. `rows_together` runs several in one
round trip.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet


class FixedQuery:
    def __init__(self, build: Callable[[], QuerySet]) -> None:
        """`build` returns the values_list QuerySet; nothing in it may depend on when or by whom it is run."""
        self._build = build
        self._local = threading.local()  # a compiler's converters belong to its thread's connection

    def _compiled(self) -> tuple[str, str, tuple[Any, ...], list[Any]]:
        compiled = getattr(self._local, "compiled", None)
        if compiled is None:
            queryset = self._build()
            compiler = queryset.query.get_compiler(queryset.db)
            sql, params = compiler.as_sql()
            columns = [column for column, _, _ in compiler.select[: compiler.col_count]]
            compiled = self._local.compiled = (queryset.db, sql, params, list(compiler.get_converters(columns).items()))
        return compiled

    def rows(self) -> list[tuple[Any, ...]]:
        return rows_together(self)[0]


def rows_together(*queries: FixedQuery, first: Sequence[tuple[str, list[Any]]] = ()) -> list[list[tuple[Any, ...]]]:
    """The rows of each query (on the default database), sent in one round trip on PostgreSQL: one query string of
    their statements, whose results are read one after the other. `first`: statements (sql, params) sent before
    them, in order (writes too, in the caller's transaction), whose rows come first, as the cursor gives them."""
    compiled = [query._compiled() for query in queries]
    connection = connections[compiled[0][0] if compiled else DEFAULT_DB_ALIAS]
    statements = [*first, *((sql, list(params)) for _, sql, params, _ in compiled)]
    converters: list[list[Any] | None] = [*(None for _ in first), *(convert for _, _, _, convert in compiled)]
    results = []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and len(statements) > 1:
            cursor.execute("; ".join(sql for sql, _ in statements), [p for _, params in statements for p in params])
            for number, convert in enumerate(converters):
                if number:
                    cursor.nextset()
                results.append(_converted(cursor.fetchall(), convert, connection))
            return results
        for (sql, params), convert in zip(statements, converters, strict=True):
            cursor.execute(sql, params)
            results.append(_converted(cursor.fetchall(), convert, connection))
    return results


def _converted(rows: list[Any], converters: list[Any] | None, connection: Any) -> list[tuple[Any, ...]]:
    if not converters:
        return [tuple(row) for row in rows]
    converted = []
    for row in map(list, rows):
        for position, (functions, expression) in converters:
            for function in functions:
                row[position] = function(row[position], expression, connection)
        converted.append(tuple(row))
    return converted
