"""Every write of a lease (common.leases re-exports them; the columns are common.leases.models.Leased).

A leased row carries two columns: `lease_owner`, the worker holding it
(`<host>:<pid>:<task id>` for Celery workers, see common/liveness.py; "" when free), and `lease_expires_at`, when the
hold runs out unless renewed (None when free). Every write of a lease is a conditional UPDATE, never a read then a
write, so two workers never both believe they hold a row:

* `lease_claim(rows, owner=..., seconds=..., now=...)` takes the row(s) of `rows` that are free (never leased, or
  leased with a lease that ran out) and returns how many it took: 0 means another worker holds it.
* `lease_write(rows, owner=..., what=...)` writes fields only while `owner` still holds the row, else `LeaseLost`;
  `lease_heartbeat` is the same write renewing the lease, and raises `RunCancelled` instead when the row is still
  held but matches the caller's `cancelled` condition (an operator asked it to stop).
* `lease_release(rows, owner=...)` gives the row up (optionally with other fields, e.g. the error of a transient
  failure); `RELEASED` are the two columns' free values and `lease_clear(row)` sets them on a row the caller
  read under its row lock and saves (a finish decided under the lock).
* `lease_wait(rows)`: seconds until the lease of the row runs out (None when no such row, or it is free).
* `lease_transaction()`: a transaction for the lease's own writes that a database crash may lose without harm.

A lease that is lost is found at the holder's next write and the work stops without writing (`LeaseLost`); whoever
claims next redoes what the lost holder had not committed. So work under a lease commits its results in the same
transaction as a `lease_write` (or under the row lock, checking `lease_owner`), never after it.

Take-over of dead holders: `register_lease_takeover(Model, running=Q(...), take_over=..., audit=...)` (from an
AppConfig.ready()) declares a model's leased work to common.liveness, whose beat task ends now the live leases of
owners whose worker process stopped stamping its liveness: one conditional update per row (only rows still running
under that owner), one audit event `<model>.lease_released` per row through the app's `audit` callable (common
imports no app, so the app passes its audit writer), and `take_over(pks)` on commit (the app's reaper or step).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, models, transaction
from django.db.models import Q, QuerySet
from django.db.models.sql import UpdateQuery
from django.utils import timezone

from common.fixed_queries import FixedQuery, rows_together
from common.liveness import register_leases

OWNER_LENGTH = 200  # Leased.lease_owner's max_length
RELEASED: dict[str, Any] = {"lease_owner": "", "lease_expires_at": None}


class LeaseLost(Exception):
    """Another worker took this work over (our lease ran out): stop without writing."""


class RunCancelled(Exception):
    """An operator asked the work to stop; raised at the holder's next heartbeat."""


def owner_name(worker: str) -> str:
    """The owner as stored (the column holds 200 characters)."""
    return worker[:OWNER_LENGTH]


def lease_until(seconds: float | timedelta, now: datetime | None = None) -> datetime:
    """When a lease taken or renewed `now` for `seconds` runs out."""
    span = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
    return (now or timezone.now()) + span


def lease_free(now: datetime, *, ended_at_expiry: bool = False) -> Q:
    """Rows nobody holds at `now`: no lease, or one that ran out (`ended_at_expiry`: a lease expiring at exactly
    `now` counts as run out too)."""
    ran_out = Q(lease_expires_at__lte=now) if ended_at_expiry else Q(lease_expires_at__lt=now)
    return Q(lease_expires_at__isnull=True) | ran_out


def lease_live(now: datetime) -> Q:
    """Rows somebody holds at `now`."""
    return Q(lease_expires_at__gt=now) & ~Q(lease_owner="")


def lease_held(rows: QuerySet, owner: str) -> QuerySet:
    return rows.filter(lease_owner=owner_name(owner))


def lease_claim(
    rows: QuerySet,
    *,
    owner: str,
    seconds: float | timedelta,
    now: datetime | None = None,
    ended_at_expiry: bool = False,
    reclaim: bool = False,
    **fields: Any,
) -> int:
    """Take the free rows among `rows` for `owner`, writing `fields` with the lease; how many were taken.
    `reclaim`: a row `owner` holds already is taken again too (its lease renewed)."""
    now = now or timezone.now()
    free = lease_free(now, ended_at_expiry=ended_at_expiry)
    if reclaim:
        free |= Q(lease_owner=owner_name(owner))
    return rows.filter(free).update(lease_owner=owner_name(owner), lease_expires_at=lease_until(seconds, now), **fields)


def lease_claim_row(
    rows: QuerySet,
    *,
    owner: str,
    seconds: float | timedelta,
    now: datetime | None = None,
    related: Sequence[str] = (),
    **fields: Any,
) -> models.Model | None:
    """`lease_claim` of the one row `rows` names, returning it as claimed (with the rows of the forward foreign keys
    `related` on it, as select_related gives them), or None when another worker holds it. On PostgreSQL one
    statement does it all, `UPDATE … RETURNING` in a WITH: outside a transaction it commits by itself, without
    waiting for its WAL flush, as a claim in `lease_transaction` does (set_config in the same statement)."""
    return lease_claim_row_reading(rows, owner=owner, seconds=seconds, now=now, related=related, **fields)[0]


def lease_claim_row_reading(
    rows: QuerySet,
    *,
    owner: str,
    seconds: float | timedelta,
    now: datetime | None = None,
    related: Sequence[str] = (),
    reads: Sequence[FixedQuery] = (),
    **fields: Any,
) -> tuple[models.Model | None, list[list[tuple[Any, ...]]]]:
    """`lease_claim_row`, and the rows of the fixed reads `reads` made after it (in the same round trip on
    PostgreSQL): what the holder reads first, read whether the claim took the row or not."""
    now = now or timezone.now()
    free = lease_free(now)
    fields = {"lease_owner": owner_name(owner), "lease_expires_at": lease_until(seconds, now), **fields}
    model = rows.model
    if connection.vendor != "postgresql":  # the claim, then a read of the row it took
        with lease_transaction():
            pks = list(rows.filter(free).values_list("pk", flat=True)[:1])
            if not pks or not rows.filter(pk=pks[0]).filter(free).update(**fields):
                return None, rows_together(*reads) if reads else []
            row = model._default_manager.select_related(*related).get(pk=pks[0])
        return row, rows_together(*reads) if reads else []
    query = rows.filter(free).query.chain(UpdateQuery)
    query.add_update_values(fields)
    update, params = query.get_compiler(rows.db).as_sql()
    quote = connection.ops.quote_name
    own = model._meta.concrete_fields
    joined = [model._meta.get_field(name) for name in related]
    returning = ", ".join(quote(field.column) for field in own)
    columns = [f'"claimed".{quote(field.column)}' for field in own]
    joins = []
    for number, fk in enumerate(joined):
        alias = f"related{number}"
        target = fk.related_model._meta
        columns += [f"{alias}.{quote(field.column)}" for field in target.concrete_fields]
        joins.append(
            f"LEFT JOIN {quote(target.db_table)} {alias} ON {alias}.{quote(fk.target_field.column)} = "
            f'"claimed".{quote(fk.column)}'
        )
    synchronous = ""
    if not connection.in_atomic_block:  # a claim's own commit: a database crash may lose it without harm
        synchronous = f", {_NO_FLUSH}"
        joins.append('CROSS JOIN "off"')
    sql = f'WITH "claimed" AS ({update} RETURNING {returning}){synchronous} SELECT {", ".join(columns)} FROM "claimed" '
    claimed, *read = rows_together(*reads, first=[(sql + " ".join(joins), params)])
    if not claimed:
        return None, read
    values = list(claimed[0])
    row = _from_db(model, own, values[: len(own)], rows.db)
    start = len(own)
    for fk in joined:
        target = fk.related_model._meta.concrete_fields
        found = values[start : start + len(target)]
        fk.set_cached_value(
            row, None if getattr(row, fk.attname) is None else _from_db(fk.related_model, target, found, rows.db)
        )
        start += len(target)
    return row, read


# A WITH part that turns synchronous_commit off for the statement's own transaction (what lease_transaction's SET LOCAL
# does), evaluated when the statement reads from it.
_NO_FLUSH = "\"off\" AS (SELECT set_config('synchronous_commit', 'off', true))"


def _from_db(model: type[models.Model], fields: Sequence[models.Field], values: list[Any], db: str) -> models.Model:
    """An instance of `model` from its columns as read, through the converters a query would apply."""
    converted = []
    for field, value in zip(fields, values, strict=True):
        column = field.get_col(model._meta.db_table)
        for converter in connection.ops.get_db_converters(column) + column.get_db_converters(connection):
            value = converter(value, column, connection)
        converted.append(value)
    return model.from_db(db, [field.attname for field in fields], converted)


def lease_write(rows: QuerySet, *, owner: str, what: str, **fields: Any) -> None:
    """Write `fields` on the rows `owner` holds among `rows`; LeaseLost (naming `what`) when it holds none."""
    if not lease_held(rows, owner).update(**fields):
        raise LeaseLost(f"{what} is no longer held by {owner}")


def lease_write_alone(rows: QuerySet, *, owner: str, what: str, **fields: Any) -> None:
    """`lease_write` outside any transaction, committed by itself as one in `lease_transaction` (without waiting for
    its WAL flush), in one statement on PostgreSQL rather than a transaction's four (a step's hand-over to the next).
    Inside a transaction it refuses, as `atomic(durable=True)` does."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        with lease_transaction(durable=True):
            lease_write(rows, owner=owner, what=what, **fields)
        return
    query = lease_held(rows, owner).query.chain(UpdateQuery)
    query.add_update_values(fields)
    update, params = query.get_compiler(rows.db).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(f'WITH "written" AS ({update} RETURNING 1), {_NO_FLUSH} SELECT 1 FROM "written", "off"', params)
        if cursor.fetchone() is None:
            raise LeaseLost(f"{what} is no longer held by {owner}")


def lease_heartbeat(
    rows: QuerySet,
    *,
    owner: str,
    seconds: float | timedelta,
    what: str,
    cancelled: Q | None = None,
    why: str = "cancelled",
    now: datetime | None = None,
    **fields: Any,
) -> None:
    """Renew the lease `owner` holds on `rows` (writing `fields` with it). RunCancelled when the row is held but
    matches `cancelled` (with `why` as its message); LeaseLost when it is not held any more."""
    held = lease_held(rows, owner)
    renewing = held.exclude(cancelled) if cancelled is not None else held
    if renewing.update(lease_expires_at=lease_until(seconds, now), **fields):
        return
    if cancelled is not None and held.exists():
        raise RunCancelled(why)
    raise LeaseLost(f"{what} is no longer held by {owner}")


def lease_release(rows: QuerySet, *, owner: str, **fields: Any) -> int:
    """Give up the rows `owner` holds among `rows`, writing `fields` with it; how many it gave up."""
    return lease_held(rows, owner).update(**RELEASED, **fields)


def lease_clear(row: models.Model) -> None:
    """Free the lease of a row read under its row lock, on the instance: the caller saves it with its other changes."""
    for field, value in RELEASED.items():
        setattr(row, field, value)


def lease_wait(rows: QuerySet, *, now: datetime | None = None) -> float | None:
    """Seconds until the lease of the (first) row of `rows` runs out; None when there is no such row or it is free."""
    expires = rows.values_list("lease_expires_at", flat=True).first()
    if expires is None:
        return None
    return max(0.0, (expires - (now or timezone.now())).total_seconds())


@contextlib.contextmanager
def lease_transaction(*, durable: bool = False) -> Iterator[None]:
    """A transaction of the lease's own writes (claim, heartbeat, hand-over to the next step), which a database crash
    may lose without harm: PostgreSQL commits it without waiting for its WAL flush (`synchronous_commit` off for
    this transaction only). Lost, a claim or a heartbeat is a lease that runs out and a hand-over one the next step
    waits out (lease_wait); the first durable write after it flushes it with its own. Inside a caller's transaction
    it is that transaction, unchanged."""
    outermost = not connection.in_atomic_block
    with transaction.atomic(durable=durable):
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield


# --- take-over of the leases of dead workers -----------------------------------------------------------------------
Audit = Callable[..., Any]  # audit(verb=..., target=(label, pk), before=..., after=...), inside the transaction


def lease_holders(rows: QuerySet, *, now: datetime | None = None) -> list[str]:
    """The owners of the live leases among `rows`."""
    return list(rows.filter(lease_live(now or timezone.now())).values_list("lease_owner", flat=True).distinct())


def leases_end(
    rows: QuerySet,
    *,
    owners: Collection[str],
    audit: Audit,
    take_over: Callable[[list[int]], None],
    now: datetime | None = None,
) -> int:
    """End now the live leases among `rows` held by `owners` (dead worker processes), each by a conditional update
    (a row renewed or finished meanwhile is left alone) audited `<model>.lease_released`; `take_over(pks)` runs on
    commit when any ended. Returns how many ended."""
    now = now or timezone.now()
    live = rows.filter(lease_live(now))
    label = rows.model._meta.label_lower
    verb = f"{rows.model._meta.model_name}.lease_released"
    ended: list[int] = []
    with transaction.atomic(durable=True):
        for pk, owner, expires in live.filter(lease_owner__in=list(owners)).values_list(
            "pk", "lease_owner", "lease_expires_at"
        ):
            if not live.filter(pk=pk, lease_owner=owner).update(lease_expires_at=now):
                continue  # renewed or finished meanwhile: its worker was not dead after all, or is done
            audit(
                verb=verb,
                target=(label, str(pk)),
                before={"lease_owner": owner, "lease_expires_at": expires.isoformat()},
                after={"lease_expires_at": now.isoformat(), "reason": "its worker process stopped"},
            )
            ended.append(pk)
        if ended:
            transaction.on_commit(lambda: take_over(ended))
    return len(ended)


def register_lease_takeover(
    model: type[models.Model],
    *,
    running: Q,
    take_over: Callable[[list[int]], None],
    audit: Audit,
) -> None:
    """Declare to common.liveness the leased work of `model`: its rows matching `running` whose owner's process is
    dead lose their lease now (`leases_end`), and `take_over(pks)` starts the app's usual take-over. Registering
    again replaces."""

    def rows() -> QuerySet:
        return model._default_manager.filter(running)

    register_leases(
        model._meta.label_lower,
        holders=lambda: lease_holders(rows()),
        release=lambda *, owners, now=None: leases_end(
            rows(), owners=owners, audit=audit, take_over=take_over, now=now
        ),
    )
