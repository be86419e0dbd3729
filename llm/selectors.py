"""Reads of the ModelCall ledger for the calls page: a fixed number of queries whatever the data size."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db import connections
from django.db.models import Count, IntegerField, Q, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import Left

from .models import ModelCall

PAGE_SIZE = 50
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


def model_call_totals(calls: QuerySet[ModelCall]) -> CallTotals:
    """One query: counts, token sums and the cost of the priced calls."""
    row = calls.aggregate(
        n_calls=Count("id"),
        sum_input=Sum("input_tokens", default=0),
        sum_output=Sum("output_tokens", default=0),
        sum_cached=Sum("cached_input_tokens", default=0),
        sum_cost=Sum("cost", default=Decimal(0)),
        n_unpriced=Count("id", filter=Q(cost__isnull=True, status=ModelCall.Status.SUCCEEDED)),
    )
    return CallTotals(
        calls=row["n_calls"],
        input_tokens=row["sum_input"],
        output_tokens=row["sum_output"],
        cached_input_tokens=row["sum_cached"],
        cost=row["sum_cost"],
        unpriced=row["n_unpriced"],
    )


def model_call_choices() -> tuple[list[str], list[str]]:
    """The roles and model ids seen in the ledger, for the filter menus (two queries)."""
    roles = list(ModelCall.objects.order_by("role").values_list("role", flat=True).distinct())
    model_ids = list(ModelCall.objects.order_by("model_id").values_list("model_id", flat=True).distinct())
    return roles, model_ids


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
    totals = model_call_totals(calls)
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
