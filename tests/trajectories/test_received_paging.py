"""Within a received range, newest and oldest walk runs by (received, id) — the index that reaches an old day at
once — and keyset pages still give every matching run exactly once, in order."""

import datetime as dt

import pytest
from django.utils import timezone

from common.cursors import InvalidCursor
from trajectories.models import Run
from trajectories.selectors import RunFilters, run_page

from .factories import ingest, run_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def spread():
    """Nine runs received over three hours of one day, three per moment (a batch shares its received time)."""
    start = timezone.make_aware(dt.datetime(2026, 10, 1, 9))
    for hour in range(3):
        ids = ingest(*[run_item() for _ in range(3)]).created_ids
        Run.objects.filter(pk__in=ids).update(created_at=start + dt.timedelta(hours=hour))
    ingest(run_item())  # received now: outside the range
    return start


@pytest.mark.parametrize("sort", ["newest", "oldest"])
def test_pages_of_a_received_range_give_every_run_once_in_received_order(spread, sort):
    filters = RunFilters(received_from=spread, received_before=spread + dt.timedelta(hours=3))
    seen, cursor = [], None
    while True:
        page = run_page(filters=filters, cursor=cursor, limit=2, sort=sort)
        seen.extend(page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    keys = [(run.created_at, run.pk) for run in seen]
    assert len(seen) == 9 and len(set(keys)) == 9
    assert keys == sorted(keys, reverse=sort == "newest")


def test_a_cursor_of_another_order_is_refused(spread):
    filters = RunFilters(received_from=spread)
    cursor = run_page(filters=filters, limit=2).next_cursor
    with pytest.raises(InvalidCursor):
        run_page(filters=filters, cursor=cursor, limit=2, sort="oldest")
    with pytest.raises(InvalidCursor):
        run_page(filters=RunFilters(), cursor=cursor, limit=2)
