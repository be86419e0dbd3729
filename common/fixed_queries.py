"""Reads whose SQL and parameters never change, compiled by the ORM once per thread.

The ORM compiles a QuerySet on every evaluation; for the dashboard's small fixed reads (the newest runs, the newest
audit events) compiling cost about as much as running them. A `FixedQuery` compiles its `values_list` QuerySet the
first time a thread runs it, keeps the SQL, the parameters and the converters the ORM applies to each column, and
then runs the SQL on a plain cursor: its rows are the tuples the QuerySet gives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.models import QuerySet


class FixedQuery:
    def __init__(self, build: Callable[[], QuerySet]) -> None:
        """`build` returns the values_list QuerySet; nothing in it may depend on when or by whom it is run."""
        self._build = build
        self._local = threading.local()  # a compiler's converters belong to its thread's connection

    def rows(self) -> list[tuple[Any, ...]]:
        compiled = getattr(self._local, "compiled", None)
        if compiled is None:
            queryset = self._build()
            compiler = queryset.query.get_compiler(queryset.db)
            sql, params = compiler.as_sql()
            columns = [column for column, _, _ in compiler.select[: compiler.col_count]]
            compiled = self._local.compiled = (queryset.db, sql, params, list(compiler.get_converters(columns).items()))
        alias, sql, params, converters = compiled
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if not converters:
            return [tuple(row) for row in rows]
        converted = []
        for row in map(list, rows):
            for position, (functions, expression) in converters:
                for function in functions:
                    row[position] = function(row[position], expression, connection)
            converted.append(tuple(row))
        return converted
