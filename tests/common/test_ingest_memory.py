"""The ingest bodies one process works on at once (common/ingest_memory.py): a request waits for room, holding no
body, and answers 503 `busy` with Retry-After when none comes."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.test import Client

from common.ingest_memory import ByteBudget, IngestBusy, budget
from tests.trajectories.factories import run_item


def test_a_reservation_that_fits_goes_at_once_and_one_that_does_not_waits_for_room():
    shared = ByteBudget()
    order: list[str] = []
    with shared.reserved(60, capacity=100, wait=5):
        with shared.reserved(40, capacity=100, wait=5):
            assert shared.used == 100

        def later() -> None:
            with shared.reserved(50, capacity=100, wait=5):
                order.append("second")

        thread = threading.Thread(target=later)
        thread.start()
        time.sleep(0.2)
        assert order == []  # 60 + 50 > 100: it waits
        order.append("first done")
    thread.join(5)
    assert order == ["first done", "second"]
    assert shared.used == 0


def test_no_room_within_the_wait_answers_busy():
    shared = ByteBudget()
    with shared.reserved(100, capacity=100, wait=1):
        started = time.monotonic()
        with pytest.raises(IngestBusy) as refused, shared.reserved(1, capacity=100, wait=0.2):
            pass
        assert time.monotonic() - started >= 0.2
    assert refused.value.status_code == 503 and refused.value.headers == {"Retry-After": "2"}
    assert shared.used == 0


def test_a_body_larger_than_the_budget_runs_alone():
    shared = ByteBudget()
    with shared.reserved(500, capacity=100, wait=1):
        assert shared.used == 100
        with pytest.raises(IngestBusy), shared.reserved(1, capacity=100, wait=0):
            pass


@pytest.mark.django_db
def test_an_ingest_request_without_room_answers_503_and_writes_nothing(settings, make_agent_token):
    from trajectories.models import Run

    settings.WAYMARK_INGEST_PROCESS_BYTES = 10_000
    settings.WAYMARK_INGEST_PROCESS_WAIT_SECONDS = 0
    token = make_agent_token("trajectories:write")
    body = json.dumps({"runs": [run_item()]})
    headers = {"Authorization": f"Bearer {token}"}

    def send():
        return Client().generic("POST", "/api/v1/trajectories", body, content_type="application/json", headers=headers)

    with budget.reserved(10_000, capacity=10_000, wait=0):  # other requests of this process hold it all
        response = send()
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "2"
    assert response.json()["code"] == "busy"
    assert not Run.objects.exists()
    assert send().status_code == 201
    assert budget.used == 0
