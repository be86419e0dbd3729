"""The dashboard's day totals (trajectories.selectors.production_window): closed days (before yesterday) kept per
process under the shared generation, the open days (yesterday and today) read on every call, the answer always the
same as reading every day."""

import datetime as dt

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.trajectories.factories import ingest, run_item
from trajectories import closed_days, rollup
from trajectories.models import Run
from trajectories.selectors import _day_totals, production_window

pytestmark = pytest.mark.django_db


def today() -> dt.date:
    return timezone.localdate()


def received(days_ago: int, *, count: int = 1, rebuild: bool = True, **fields) -> list[int]:
    """Runs ingested, then moved `days_ago` days back (set-up only); the day rows recounted unless told not to."""
    ids = ingest(*[run_item(**fields) for _ in range(count)]).created_ids
    moment = timezone.make_aware(dt.datetime.combine(today() - dt.timedelta(days=days_ago), dt.time(12)))
    Run.objects.filter(pk__in=ids).update(created_at=moment)
    if rebuild:
        rollup.rebuild()
    return ids


def production_day_totals(first: dt.date) -> list:
    """The window's day totals themselves (the summary `list`), the closed days' then the open days'."""
    closed, open_days = production_window(first, list, name="totals")
    return [*closed, *open_days]


def totals(first: dt.date) -> list[tuple]:
    return sorted((t.day, t.intent, t.outcome, t.runs) for t in production_day_totals(first))


def every_day(first: dt.date) -> list[tuple]:
    return sorted((t.day, t.intent, t.outcome, t.runs) for t in _day_totals(first, None))


def queries_of(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured)


FIRST = dt.timedelta(days=29)


def test_closed_days_are_read_once_and_the_open_days_every_time():
    received(10, count=2)
    received(3)
    first = today() - FIRST
    assert queries_of(lambda: production_day_totals(first)) == 2  # the closed days, then the open ones
    assert queries_of(lambda: production_day_totals(first)) == 1  # the open days only
    assert totals(first) == every_day(first) and sum(row[3] for row in totals(first)) == 3


def test_runs_received_today_and_yesterday_show_at_once():
    received(5)
    first = today() - FIRST
    production_day_totals(first)  # the closed days kept
    ingest(run_item(outcome="failure"))  # today, through ingest: recorded in today's row
    # a run stored just before midnight whose batch is recorded after it: added to yesterday's row
    late = {**run_item(intent="late"), "step_count": 1, "total_tokens": 0, "cost": 0.0}
    rollup.record([{**late, "created_at": timezone.now() - dt.timedelta(days=1)}])
    assert totals(first) == every_day(first)
    assert (today() - dt.timedelta(days=1), "late", "success", 1) in totals(first)
    assert {row[0] for row in totals(first)} >= {today(), today() - dt.timedelta(days=1)}


def test_a_rebuild_in_this_process_shows_at_once_and_in_another_once_it_replaces_the_generation():
    received(8)
    first = today() - FIRST
    before = totals(first)
    received(9, count=3)  # rebuilds: this process forgets its closed days at once
    assert totals(first) == every_day(first) != before
    kept = totals(first)
    # another process's rebuild, committed: the generation changes and this process reads the closed days again
    Run.objects.filter(created_at__date__lt=today() - dt.timedelta(days=1)).delete()
    with connection.cursor() as cursor:  # recounted behind this process's back (no bump here)
        cursor.execute("DELETE FROM trajectories_runday WHERE day < %s", [today() - dt.timedelta(days=1)])
    assert totals(first) == kept  # still this process's copy: nothing told it
    cache.set(closed_days.GENERATION_KEY, "another-process-rebuilt")
    assert queries_of(lambda: production_day_totals(first)) == 2
    assert totals(first) == every_day(first) == []


def test_when_the_shared_cache_is_down_every_day_is_read_every_time(monkeypatch):
    received(12)
    first = today() - FIRST

    def down(*args, **kwargs):
        raise ConnectionError("cache down")

    monkeypatch.setattr(cache, "get", down)
    assert queries_of(lambda: production_day_totals(first)) == 2
    assert queries_of(lambda: production_day_totals(first)) == 2
    assert totals(first) == every_day(first)


def test_a_window_of_open_days_only_reads_them_alone():
    received(0)
    assert queries_of(lambda: production_day_totals(today())) == 1
    assert totals(today() - dt.timedelta(days=1)) == every_day(today() - dt.timedelta(days=1))
