"""Writes compiled by the ORM and sent together: several writes in one statement, one round trip.

A `Statement` is the (sql, params) of a write that was not sent: `update_statement(rows, **fields)` is the one of
`rows.update(**fields)`. `together(writes, last)` is one statement on PostgreSQL that does every write (UPDATEs, or
INSERTs without RETURNING) as a data-modifying WITH part, then `last` (whose rows it returns); `send(writes)` sends
writes that return nothing. One statement is all or nothing: outside a transaction it commits by itself, with no
BEGIN or COMMIT to wait for. Elsewhere (SQLite) the writes are sent one after the other, in a transaction of their own
when the caller has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet
from django.db.models.sql import UpdateQuery

Statement = tuple[str, list[Any]]


def update_statement(rows: QuerySet, **fields: Any) -> Statement:
    """The (sql, params) of `rows.update(**fields)`, compiled by the ORM, to send with another statement."""
    query = rows.query.chain(UpdateQuery)
    query.add_update_values(fields)
    sql, params = query.get_compiler(rows.db).as_sql()
    return sql, list(params)


def together(writes: Sequence[Statement], last: Statement) -> Statement:
    """One PostgreSQL statement doing `writes` (as data-modifying WITH parts, which see none of each other's changes:
    they must write different rows), then `last`."""
    if not writes:
        return last
    parts = ", ".join(f'"write{number}" AS ({sql})' for number, (sql, _) in enumerate(writes))
    params = [param for _, write_params in writes for param in write_params]
    return f"WITH {parts} {last[0]}", [*params, *last[1]]


def send(writes: Sequence[Statement]) -> None:
    """Send writes that return nothing: one statement on PostgreSQL (committed by itself outside a transaction)."""
    if not writes:
        return
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(*together(writes, ("SELECT 1", [])))
            return
        with transaction.atomic():
            for write in writes:
                cursor.execute(*write)
