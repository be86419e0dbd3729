"""Concurrent appends on PostgreSQL: several writers with the same expected head, exactly one wins, no fork."""

import threading
from itertools import pairwise

import pytest
from django.db import connection

from graphs import revisions
from graphs.models import Revision
from graphs.revisions import HeadMoved
from tests.graphs.factories import make_empty_workspace

WRITERS = 6


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seeded", [False, True], ids=["first-revision", "after-a-head"])
def test_exactly_one_concurrent_writer_wins(seeded):
    assert connection.vendor == "postgresql"
    ws = make_empty_workspace(f"race-{int(seeded)}")
    expected = revisions.append(ws, "graph", {"n": -1}, expected_head=None).digest if seeded else None
    barrier = threading.Barrier(WRITERS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def write(number: int) -> None:
        from django.db import connections

        try:
            barrier.wait(timeout=10)
            revisions.append(ws, "graph", {"n": number}, expected_head=expected)
            result = "won"
        except HeadMoved:
            result = "head_moved"
        finally:
            connections.close_all()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["head_moved"] * (WRITERS - 1) + ["won"]
    chain = list(Revision.objects.filter(workspace=ws, kind="graph").order_by("seq"))
    assert [r.seq for r in chain] == list(range(len(chain)))
    assert len(chain) == (2 if seeded else 1)
    for parent, child in pairwise(chain):
        assert child.parent_digest == parent.digest
