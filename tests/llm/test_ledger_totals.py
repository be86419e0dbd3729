"""The calls page's totals and menus come from the ledger's totals (every settled call below a mark, rolled up by beat)
plus the calls above the mark: always exactly what the whole ledger sums to, under every filter, however the roll-ups
and the calls interleave; a call that may still change (running, or abandoned recently enough that a late reply is
still recorded) is never rolled up."""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Count, Q, Sum
from django.utils import timezone

from llm.core import ModelResponse, Usage
from llm.models import LedgerMark, LedgerTotal, ModelCall
from llm.selectors import CallFilters, CallTotals, model_call_choices, model_call_totals
from llm.services import (
    LATE_REPLY,
    SETTLED,
    model_call_succeed,
    model_call_totals_roll,
    model_calls_abandon_stuck,
)
from tests.conftest import logged_in

from .factories import recorded_call

pytestmark = pytest.mark.django_db
ROLES = ["refiner", "guidance", "intents"]
MODELS = ["claude-sonnet-4-6", "claude-haiku-4-5", "unpriced-model"]
OUTCOMES = ["succeeded", "succeeded", "failed", "running"]


def whole_ledger(filters: CallFilters) -> CallTotals:
    """What the page showed before the totals: one aggregate over every call the filters match."""
    calls = ModelCall.objects.all()
    for field, value in (("role", filters.role), ("model_id", filters.model_id), ("status", filters.status)):
        if value:
            calls = calls.filter(**{field: value})
    row = calls.aggregate(
        n=Count("id"),
        i=Sum("input_tokens", default=0),
        o=Sum("output_tokens", default=0),
        c=Sum("cached_input_tokens", default=0),
        money=Sum("cost", default=Decimal(0)),
        u=Count("id", filter=Q(cost__isnull=True, status=ModelCall.Status.SUCCEEDED)),
    )
    return CallTotals(row["n"], row["i"], row["o"], row["c"], row["money"], row["u"])


def every_filter() -> list[CallFilters]:
    statuses = ["", *ModelCall.Status.values]
    return [
        CallFilters(role=role, model_id=model, status=status)
        for role in ["", *ROLES, "nobody"]
        for model in ["", *MODELS]
        for status in statuses
    ]


def assert_exact() -> None:
    for filters in every_filter():
        assert model_call_totals(filters) == whole_ledger(filters), filters
    roles = sorted(set(ModelCall.objects.values_list("role", flat=True)))
    models = sorted(set(ModelCall.objects.values_list("model_id", flat=True)))
    assert model_call_choices() == (roles, models)


def some_calls(rng: random.Random, count: int, *, minutes_ago: int) -> list[ModelCall]:
    now = timezone.now()
    return [
        recorded_call(
            role=rng.choice(ROLES),
            model_id=rng.choice(MODELS),
            outcome=rng.choice(OUTCOMES),
            usage=Usage(rng.randrange(1, 5000), rng.randrange(1, 900), rng.randrange(0, 300)),
            started_at=now - timedelta(minutes=minutes_ago + rng.randrange(0, 30)),
        )
        for _ in range(count)
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_totals_are_the_whole_ledgers_however_roll_ups_and_calls_interleave(seed):
    rng = random.Random(seed)
    assert_exact()  # an empty ledger, never rolled up
    some_calls(rng, 25, minutes_ago=60 * 30)  # older than a late reply: settled once finished
    some_calls(rng, 15, minutes_ago=120)
    assert_exact()
    assert model_call_totals_roll() > 0
    assert_exact()
    model_calls_abandon_stuck(cutoff=timezone.now() - timedelta(hours=1))  # the reaper: old running calls abandoned
    assert_exact()
    model_call_totals_roll()
    assert_exact()
    some_calls(rng, 20, minutes_ago=0)  # new calls above the mark, some still running
    assert_exact()
    model_call_totals_roll(now=timezone.now() + timedelta(days=2))  # everything settled but what may still change
    assert_exact()
    for call in ModelCall.objects.filter(status=ModelCall.Status.RUNNING):  # the rest answer
        model_call_succeed(call=call, response=ModelResponse(text="{}", usage=Usage(7, 3, 0)), latency_ms=5)
    assert_exact()
    model_call_totals_roll(now=timezone.now() + timedelta(days=3))
    assert_exact()
    assert LedgerMark.objects.get().below_id == ModelCall.objects.order_by("-pk").first().pk + 1  # all settled


def test_the_mark_stops_at_a_running_call_and_at_one_abandoned_too_recently_for_a_late_reply():
    now = timezone.now()
    first = recorded_call(started_at=now - timedelta(hours=3))
    running = recorded_call(outcome="running", started_at=now - timedelta(hours=2))
    recorded_call(started_at=now - timedelta(hours=1))

    assert model_call_totals_roll(now=now) == 1
    assert LedgerMark.objects.get().below_id == running.pk  # the running call and all after it wait

    model_calls_abandon_stuck(cutoff=now - timedelta(minutes=30))
    assert model_call_totals_roll(now=now) == 0  # abandoned an hour ago: a reply may still come
    late = now + LATE_REPLY - timedelta(hours=1)
    model_call_succeed(call=running, response=ModelResponse(text="{}", usage=Usage(11, 2, 0)), latency_ms=9)
    assert ModelCall.objects.get(pk=running.pk).status == ModelCall.Status.SUCCEEDED  # recorded: the tokens were spent
    assert model_call_totals_roll(now=late) == 2
    assert LedgerTotal.objects.get(status="succeeded").calls == 3
    assert first.pk < running.pk and model_call_totals(CallFilters()) == whole_ledger(CallFilters())


def test_a_reply_later_than_the_late_reply_window_leaves_the_call_abandoned():
    now = timezone.now()
    call = recorded_call(outcome="running", started_at=now - LATE_REPLY - timedelta(hours=1))
    model_calls_abandon_stuck(cutoff=now - timedelta(minutes=30))
    assert model_call_totals_roll(now=now) == 1  # settled: nothing may change it any more

    model_call_succeed(call=call, response=ModelResponse(text="{}", usage=Usage(11, 2, 0)), latency_ms=9)

    call.refresh_from_db()
    assert call.status == ModelCall.Status.ABANDONED and call.output_tokens == 0
    assert model_call_totals(CallFilters()) == whole_ledger(CallFilters())


def test_a_call_begun_in_the_last_minutes_is_left_above_the_mark():
    now = timezone.now()
    recorded_call(started_at=now - SETTLED - timedelta(minutes=1))
    recent = recorded_call(started_at=now - SETTLED + timedelta(minutes=1))

    assert model_call_totals_roll(now=now) == 1
    assert LedgerMark.objects.get().below_id == recent.pk


def test_rolling_up_again_counts_nothing_twice():
    recorded_call(started_at=timezone.now() - timedelta(hours=1))
    assert model_call_totals_roll() == 1
    assert model_call_totals_roll() == 0
    assert LedgerTotal.objects.get().calls == 1


def test_the_calls_page_shows_the_whole_ledgers_totals_after_a_roll_up(viewer):
    for days in range(3):
        recorded_call(role="refiner", usage=Usage(100, 10, 0), started_at=timezone.now() - timedelta(days=days + 1))
    model_call_totals_roll()
    recorded_call(role="guidance", model_id="unpriced-model", usage=Usage(100, 10, 0))  # above the mark

    response = logged_in(viewer).get("/models/")

    assert response.status_code == 200
    totals = response.context["page"].totals
    assert (totals.calls, totals.unpriced) == (4, 1)
    assert response.context["roles"] == ["guidance", "refiner"]
    assert response.context["model_ids"] == ["claude-sonnet-4-6", "unpriced-model"]
