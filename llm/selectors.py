"""Reads of the ModelCall ledger for the calls page: a fixed number of queries whatever the data size, whose totals
and menus read the ledger's totals (llm.models.LedgerTotal) and the calls above their mark, not the whole ledger."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db import connections
from django.db.models import IntegerField, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Left

from .models import LedgerMark, LedgerTotal, ModelCall

PAGE_SIZE = 50
COST_PLACES = Decimal("0.000001")  # ModelCall.cost's decimal places
REPLY_HEAD_CHARS = 300


@dataclass(frozen=True)
class CallFilters:
    role: str = ""
    model_id: str = ""
    status: str = ""

    @classmethod
    def from_query(cls, query) -> CallFilters:
        status = query.get("status", "").strip()
        return cls(
            role=query.get("role", "").strip()[:60],
            model_id=query.get("model", "").strip()[:100],
            status=status if status in ModelCall.Status.values else "",
        )

    @property
    def active(self) -> bool:
        return bool(self.role or self.model_id or self.status)

    def as_query(self) -> dict[str, str]:
        return {
            key: value
            for key, value in (("role", self.role), ("model", self.model_id), ("status", self.status))
            if value
        }


@dataclass(frozen=True)
class CallTotals:
    calls: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cost: Decimal
    unpriced: int

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cached_input_tokens


def model_calls(filters: CallFilters) -> QuerySet[ModelCall]:
    calls = ModelCall.objects.all()
    if filters.role:
        calls = calls.filter(role=filters.role)
    if filters.model_id:
        calls = calls.filter(model_id=filters.model_id)
    if filters.status:
        calls = calls.filter(status=filters.status)
    return calls.order_by("-started_at", "-id")


def _ledger_sql(filters: CallFilters, select_totals: str, select_calls: str) -> tuple[str, list[str]]:
    """One statement over the rows the filters match of the ledger's totals (LedgerTotal: every call below the mark)
    and of the calls above the mark (llm.services.model_call_totals_roll): one snapshot, so a roll-up committing
    meanwhile counts no call twice or not at all."""
    connection = connections[ModelCall.objects.db]
    quote = connection.ops.quote_name
    where, params = ["1 = 1"], []
    for column, value in (("role", filters.role), ("model_id", filters.model_id), ("status", filters.status)):
        if value:
            where.append(f"{quote(column)} = %s")
            params.append(value)
    matching = " AND ".join(where)
    mark = f"COALESCE((SELECT below_id FROM {quote(LedgerMark._meta.db_table)} WHERE id = 1), 0)"
    sql = (
        f"SELECT {select_totals} FROM {quote(LedgerTotal._meta.db_table)} WHERE {matching} UNION ALL "
        f"SELECT {select_calls} FROM {quote(ModelCall._meta.db_table)} WHERE id >= {mark} AND {matching}"
    )
    return sql, params * 2


def model_call_totals(filters: CallFilters) -> CallTotals:
    """One query: counts, token sums and the cost of the priced calls of everything the filters match, read from the
    ledger's totals and the calls above their mark (the last minutes' calls, whatever the ledger's size)."""
    columns = "calls, input_tokens, output_tokens, cached_input_tokens, cost, unpriced"
    sql, params = _ledger_sql(
        filters,
        columns,
        "1, input_tokens, output_tokens, cached_input_tokens, COALESCE(cost, 0), "
        f"CASE WHEN cost IS NULL AND status = '{ModelCall.Status.SUCCEEDED}' THEN 1 ELSE 0 END",
    )
    sums = ", ".join(f"COALESCE(SUM({column}), 0)" for column in columns.split(", "))
    with connections[ModelCall.objects.db].cursor() as cursor:
        cursor.execute(f"SELECT {sums} FROM ({sql}) AS ledger", params)
        calls, input_tokens, output_tokens, cached, cost, unpriced = cursor.fetchone()
    return CallTotals(
        calls=int(calls),
        input_tokens=int(input_tokens),
        output_tokens=int(output_tokens),
        cached_input_tokens=int(cached),
        cost=Decimal(str(cost)).quantize(COST_PLACES),
        unpriced=int(unpriced),
    )


def model_call_choices() -> tuple[list[str], list[str]]:
    """The roles and model ids seen in the ledger, for the filter menus: one query over the ledger's totals and the
    calls above their mark."""
    sql, params = _ledger_sql(CallFilters(), "role, model_id", "role, model_id")
    with connections[ModelCall.objects.db].cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT role, model_id FROM ({sql}) AS ledger", params)
        pairs = cursor.fetchall()
    return sorted({role for role, _ in pairs}), sorted({model_id for _, model_id in pairs})


@dataclass(frozen=True)
class CallPage:
    calls: list[ModelCall]
    number: int
    pages: int
    totals: CallTotals

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.pages


def model_call_page(filters: CallFilters, page: str | int | None) -> CallPage:
    """One page of calls, newest first, with the totals of everything the filters match (two queries)."""
    calls = model_calls(filters)
    totals = model_call_totals(filters)
    pages = max(1, -(-totals.calls // PAGE_SIZE))
    try:
        number = min(max(1, int(page or 1)), pages)
    except (TypeError, ValueError):
        number = 1
    offset = (number - 1) * PAGE_SIZE
    # Replies can be long: the page reads only their head (one character more, to know when to show "…").
    rows = calls.defer("response_text").annotate(reply_head=Left("response_text", REPLY_HEAD_CHARS + 1))
    return CallPage(list(rows[offset : offset + PAGE_SIZE]), number, pages, totals)


def calls_for_subject(subject_type: str, subject_id: str) -> QuerySet[ModelCall]:
    """The calls made for one subject (e.g. one round of an evolution run)."""
    return ModelCall.objects.filter(subject_type=subject_type, subject_id=subject_id)


def subject_totals(subject_type: str, subject_id: str) -> tuple[RawSQL, RawSQL]:
    """How many calls one subject made and their cost (0 when none has a price), as subqueries for another statement
    to write (an evolution round's row and its run's cost): plain SQL over the subject index, which the ORM does not
    build and compile anew for every round."""
    table = connections[ModelCall.objects.db].ops.quote_name(ModelCall._meta.db_table)
    where = f"FROM {table} WHERE subject_type = %s AND subject_id = %s"
    calls = RawSQL(f"SELECT COUNT(*) {where}", (subject_type, subject_id), output_field=IntegerField())
    cost_field = ModelCall._meta.get_field("cost")
    cost = RawSQL(f"SELECT COALESCE(SUM(cost), 0) {where}", (subject_type, subject_id), output_field=cost_field)
    return calls, cost


def calls_for_subject_prefix(subject_type: str, prefix: str) -> QuerySet[ModelCall]:
    """The calls whose subject id starts with `prefix` (e.g. every round of one evolution run: "12:")."""
    return ModelCall.objects.filter(subject_type=subject_type, subject_id__startswith=prefix)


COUNTED_UP_TO = 1_000  # counted exactly up to this many calls (as the explorer walks 1,000 runs); beyond, an estimate


@dataclass(frozen=True)
class LedgerSize:
    """How many calls the ledger holds: `calls`, exactly when `qualifier` is "", else "about" that many (the
    database's estimate) or "more than" COUNTED_UP_TO."""

    calls: int
    qualifier: str = ""


def model_call_count() -> LedgerSize:
    """How many model calls the ledger holds (the dashboard's count), in one statement whatever the ledger's size. A
    full COUNT(*) grows with the ledger (14 ms at 300,000 calls here, twice the rest of the dashboard): the calls are
    counted up to COUNTED_UP_TO + 1, and beyond that PostgreSQL's own estimate of the table's rows is given
    (pg_class.reltuples, kept by autovacuum's ANALYZE); SQLite has none, nor a table never analysed."""
    connection = connections[ModelCall.objects.db]
    table = ModelCall._meta.db_table
    counted = f"SELECT COUNT(*) FROM (SELECT 1 FROM {connection.ops.quote_name(table)} LIMIT %s) AS counted"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            estimate = "SELECT reltuples FROM pg_class WHERE oid = %s::regclass"
            cursor.execute(f"SELECT ({counted}), ({estimate})", [COUNTED_UP_TO + 1, table])
            calls, estimated = cursor.fetchone()
        else:
            cursor.execute(counted, [COUNTED_UP_TO + 1])
            calls, estimated = cursor.fetchone()[0], None
    if calls <= COUNTED_UP_TO:
        return LedgerSize(calls)
    if estimated is not None and estimated > COUNTED_UP_TO:
        return LedgerSize(int(estimated), "about")
    return LedgerSize(COUNTED_UP_TO, "more than")
