"""Competing activations on PostgreSQL: row locks and the expected-version check leave exactly one winner."""

import threading

import pytest
from django.db import connection

from accounts.models import AuditEvent
from reviews import services
from reviews.errors import Conflict
from reviews.models import PromotionRequest, PromotionStatus
from tests.helpers.concurrency import run_at_once

from .conftest import act, activations

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 20


def test_twenty_competing_promotions_of_one_parent_apply_exactly_once(fake_kind, proposer, reviewer, second_reviewer):
    fake_kind.add("v0")
    fake_kind.seed_active("v0")
    requests = []
    for n in range(THREADS):
        fake_kind.add(f"c{n}")
        request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id=f"c{n}", rationale="go")
        services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
        requests.append(request)
    barrier = threading.Barrier(THREADS)
    outcomes: dict[int, str] = {}

    def final_approval(request: PromotionRequest) -> None:
        try:
            barrier.wait()
            services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
            outcomes[request.pk] = "applied"
        except Conflict as exc:
            outcomes[request.pk] = f"conflict:{exc.code}"
        except Exception as exc:
            outcomes[request.pk] = f"error:{exc!r}"
        finally:
            connection.close()

    threads = [threading.Thread(target=final_approval, args=(request,)) for request in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(outcomes.values()).count("applied") == 1, outcomes
    losers = [outcome for outcome in outcomes.values() if outcome != "applied"]
    assert len(losers) == THREADS - 1
    assert all(outcome in ("conflict:stale", "conflict:not_open") for outcome in losers), losers
    statuses = list(PromotionRequest.objects.values_list("status", flat=True))
    assert statuses.count(PromotionStatus.APPLIED) == 1
    assert statuses.count(PromotionStatus.SUPERSEDED) == THREADS - 1
    winner = PromotionRequest.objects.get(status=PromotionStatus.APPLIED)
    assert fake_kind.current_active("p1") == winner.candidate_id
    assert activations() == 2  # the seed and the one applied change
    assert AuditEvent.objects.filter(verb="promotion.apply").count() == 1


def test_an_activation_slipping_in_between_read_and_write_makes_the_request_stale(
    fake_kind, proposer, reviewer, second_reviewer, monkeypatch
):
    fake_kind.add("v0")
    fake_kind.seed_active("v0")
    fake_kind.add("v1")
    fake_kind.add("rival")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="go")
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")

    def competing_activation(_request):
        def other_connection():
            try:
                fake_kind.seed_active("rival")
            finally:
                connection.close()

        thread = threading.Thread(target=other_connection)
        thread.start()
        thread.join(timeout=30)

    monkeypatch.setattr(services, "_after_expected_read", competing_activation)
    with pytest.raises(Conflict) as exc:
        services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
    assert exc.value.code == "stale"
    assert exc.value.details["active"] == "rival"
    request.refresh_from_db()
    assert request.status == PromotionStatus.SUPERSEDED
    assert request.judgments.count() == 1  # the losing approval was rolled back with the activation
    assert fake_kind.current_active("p1") == "rival"
    assert not AuditEvent.objects.filter(verb="promotion.apply").exists()


def test_a_reviewer_submitting_twice_at_once_records_one_judgment(fake_kind, proposer, reviewer):
    fake_kind.add("v1")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="go")
    results = run_at_once(
        [lambda: services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")] * 5
    )
    conflicts = [r for r in results if isinstance(r, Conflict)]
    assert len(conflicts) == 4 and all(c.code == "already_judged" for c in conflicts), results
    assert request.judgments.count() == 1


def test_two_reviewers_taking_the_next_item_at_once_get_different_items(fake_kind, proposer, reviewer, second_reviewer):
    for candidate in ("a", "b"):
        fake_kind.add(candidate, parent=f"p-{candidate}")
        services.promotion_propose(actor=act(proposer), kind="fake", candidate_id=candidate, rationale="go")
    results = run_at_once(
        [lambda: services.queue_next(actor=act(reviewer)), lambda: services.queue_next(actor=act(second_reviewer))]
    )
    assert all(isinstance(r, PromotionRequest) for r in results), results
    assert results[0].pk != results[1].pk
