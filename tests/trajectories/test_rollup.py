"""Daily and all-time run totals (trajectories.rollup: RunDay, RunTotal): kept by ingest exactly as a recount from
the runs gives them, never counted twice, safe under concurrent batches; the explorer's totals read them, or a
bounded walk of the newest matching runs for filters only the runs can answer."""

import datetime as dt
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.services import Actor
from tests.conftest import logged_in
from trajectories import rollup, selectors
from trajectories.models import EVALUATION_SOURCE, Run, RunDay, RunTotal
from trajectories.selectors import RunFilters, run_totals
from trajectories.services import run_ingest_batch

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.django_db


def day_rows() -> set[tuple]:
    return set(RunDay.objects.values_list("day", "source", "intent", "outcome", "runs", "steps", "tokens", "cost"))


def total_rows() -> set[tuple]:
    return set(RunTotal.objects.values_list("source", "intent", "outcome", "runs", "steps", "tokens", "cost"))


def totals_of_days() -> set[tuple]:
    """The all-time rows a recount of the day rows gives (costs rounded: sums in another order)."""
    sums: dict[tuple, list] = {}
    for _, source, intent, outcome, runs, steps, tokens, cost in day_rows():
        row = sums.setdefault((source, intent, outcome), [0, 0, 0, 0.0])
        for index, value in enumerate((runs, steps, tokens, cost)):
            row[index] += value
    return {(*key, runs, steps, tokens, round(cost, 9)) for key, (runs, steps, tokens, cost) in sums.items()}


def rounded(rows: set[tuple]) -> set[tuple]:
    return {(*row[:-1], round(row[-1], 9)) for row in rows}


def mixed_batch(prefix: str) -> list[dict]:
    return [
        run_item(external_id=f"{prefix}-1", source="a", intent="refund", outcome="success"),
        run_item(external_id=f"{prefix}-2", source="a", intent="refund", outcome="failure", steps=[step_item()] * 3),
        run_item(external_id=f"{prefix}-3", source="b", intent="", outcome="unknown", steps=[]),
        run_item(external_id=f"{prefix}-4", source=EVALUATION_SOURCE, intent="refund", outcome="success"),
    ]


def test_ingest_keeps_the_daily_totals_a_recount_gives_and_a_resend_adds_nothing():
    ingest(*mixed_batch("x"))
    ingest(*mixed_batch("y"), *mixed_batch("x"))  # x again: existing runs, not counted twice
    kept = day_rows()
    assert sum(row[4] for row in kept) == Run.objects.count() == 8
    rollup.rebuild()
    assert day_rows() == kept
    a_refund = RunDay.objects.get(source="a", intent="refund", outcome="failure")
    assert (a_refund.runs, a_refund.steps) == (2, 6)
    # the all-time rows: the day rows without the day, kept by the same ingest and the same rebuild
    assert rounded(total_rows()) == totals_of_days()
    assert RunTotal.objects.get(source="a", intent="refund", outcome="failure").runs == 2
    kept_totals = total_rows()
    RunTotal.objects.all().delete()
    rollup.rebuild()
    assert rounded(total_rows()) == rounded(kept_totals)


def test_the_all_time_rows_span_days_and_answer_totals_without_a_day_bound(django_assert_num_queries):
    ids = ingest(*mixed_batch("old")).created_ids
    Run.objects.filter(pk__in=ids).update(created_at=timezone.now() - dt.timedelta(days=40))
    rollup.rebuild()
    ingest(*mixed_batch("new"))
    assert RunDay.objects.filter(source="a", intent="refund", outcome="success").count() == 2
    assert RunTotal.objects.get(source="a", intent="refund", outcome="success").runs == 2
    assert rounded(total_rows()) == totals_of_days()
    with CaptureQueriesContext(connection) as ctx:
        totals = run_totals(filters=RunFilters(kind="production", source="a"))
    assert (totals.runs, totals.successes) == (4, 2)
    assert "trajectories_runtotal" in ctx.captured_queries[0]["sql"]


@pytest.mark.postgres
def test_concurrent_batches_on_the_same_day_rows_add_up(transactional_db):
    errors = []

    def send(prefix: str) -> None:
        try:
            run_ingest_batch(actor=Actor.system(), items=[run_item(external_id=f"{prefix}-{n}") for n in range(20)])
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert RunDay.objects.get().runs == RunTotal.objects.get().runs == Run.objects.count() == 80


@pytest.fixture
def week():
    """Runs received on three days: today, two days ago, five days ago."""
    today = timezone.localdate()
    for days_ago, outcome, source in [
        (0, "success", "a"),
        (0, "failure", "a"),
        (2, "success", "b"),
        (5, "failure", "a"),
    ]:
        ids = ingest(run_item(outcome=outcome, source=source, intent="refund")).created_ids
        moment = timezone.make_aware(dt.datetime.combine(today - dt.timedelta(days=days_ago), dt.time(12)))
        Run.objects.filter(pk__in=ids).update(created_at=moment)
    ingest(run_item(source=EVALUATION_SOURCE, outcome="success"))
    rollup.rebuild()
    return today


def local_midnight(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min))


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "production"},
        {"kind": "evaluation"},
        {"kind": "all", "outcome": "failure"},
        {"kind": "production", "source": "a", "intent": "refund"},
        {"kind": "production", "from_days_ago": 2},
        {"kind": "all", "from_days_ago": 5, "before_days_ago": 1},
    ],
)
def test_totals_of_filters_the_daily_totals_know_come_from_them_and_equal_a_recount(week, fields):
    fields = dict(fields)
    if "from_days_ago" in fields:
        fields["received_from"] = local_midnight(week - dt.timedelta(days=fields.pop("from_days_ago")))
    if "before_days_ago" in fields:
        fields["received_before"] = local_midnight(week - dt.timedelta(days=fields.pop("before_days_ago")))
    filters = RunFilters(**fields)
    with CaptureQueriesContext(connection) as queries:
        totals = run_totals(filters=filters)
    dated = filters.received_from is not None or filters.received_before is not None
    assert len(queries) == 1
    assert ("trajectories_runday" if dated else "trajectories_runtotal") in queries[0]["sql"]
    matching = list(filters.apply(Run.objects.all()))
    assert totals.runs == len(matching) and not totals.capped
    assert totals.successes == sum(run.outcome == "success" for run in matching)
    assert totals.tokens == sum(run.total_tokens for run in matching)
    assert totals.cost == pytest.approx(sum(run.cost for run in matching))


def test_a_received_bound_inside_a_day_is_counted_from_the_runs(week):
    filters = RunFilters(kind="production", received_from=local_midnight(week) + dt.timedelta(hours=13))
    with CaptureQueriesContext(connection) as queries:
        totals = run_totals(filters=filters)
    assert "trajectories_runday" not in queries[0]["sql"]
    assert totals.runs == 0  # today's runs were received at noon


def test_other_filters_walk_at_most_the_newest_matching_runs(monkeypatch):
    monkeypatch.setattr(selectors, "TOTALS_CAP", 3)
    ids = ingest(*[run_item(steps=[step_item("special_tool", cost=0.25 * (n + 1))]) for n in range(5)]).created_ids
    ingest(run_item(steps=[step_item("other_tool")]))
    with CaptureQueriesContext(connection) as queries:
        totals = run_totals(filters=RunFilters(tool="special_tool"))
    assert len(queries) == 1
    newest = Run.objects.filter(pk__in=ids).order_by("-id")[:3]
    assert totals.capped and totals.runs == 3
    assert totals.cost == pytest.approx(sum(run.cost for run in newest))
    exact = run_totals(filters=RunFilters(tool="other_tool"))
    assert (exact.runs, exact.capped) == (1, False)


def test_the_explorer_says_when_its_totals_cover_only_the_newest_runs(operator, monkeypatch):
    monkeypatch.setattr(selectors, "TOTALS_CAP", 2)
    ingest(*[run_item(steps=[step_item("special_tool")]) for _ in range(3)])
    html = logged_in(operator).get("/trajectories/totals?tool=special_tool").content.decode()
    assert "More than 2" in html and "the newest 2" in html
    html = logged_in(operator).get("/trajectories/").content.decode()
    assert "More than" not in html and "<strong>3</strong> matching production runs" in html
