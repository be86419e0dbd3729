"""The watch after activation on a procedure: a canary served by run key and pinned by revision; each look counts the
runs of each arm and decides — a significant regression is rolled back atomically as the system (history row,
audit, webhook, queue card), a non-inferior canary is promoted, a thin window expires; after a full activation a
regression opens a rollback request instead; two workers act once; a worker killed mid-look is taken over; operators
change the share and stop the canary."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.roles import RoleRequired
from accounts.services import Actor
from procedures import active_body
from procedures.mining import intent_key
from procedures.models import Procedure, VersionStatus
from procedures.promotable import KIND
from reviews import registry
from reviews.models import Activation, PromotionRequest, WebhookDelivery, WebhookEndpoint
from tests.conftest import logged_in
from tests.helpers.watch import look, runs
from tests.procedures.factories import REFUND, stored_version
from uplift import watch_services
from uplift.core.canary import CANARY, arm_for
from uplift.models import Watch

pytestmark = pytest.mark.django_db
SYSTEM = Actor.system()
LIST = "/api/v1/procedures"


@pytest.fixture
def canary(settings):
    """refund v1 active, v2 live as a canary for half of the runs, watched."""
    settings.WAYMARK_WATCH_MIN_RUNS = 20
    procedure = Procedure.objects.create(intent=intent_key(REFUND), title="refund")
    v1 = stored_version(procedure, "lookup_policy", "issue_refund", number=1, status=VersionStatus.ACTIVE)
    Procedure.objects.filter(pk=procedure.pk).update(active_version=v1)
    v2 = stored_version(procedure, "check_account", "lookup_policy", "issue_refund", number=2)
    with transaction.atomic():
        registry.get_kind(KIND).start_canary(
            actor=SYSTEM, candidate_id=str(v2.pk), expected_active_id=str(v1.pk), share=0.5
        )
        watch = watch_services.watch_start(
            actor=SYSTEM, kind=KIND, parent_key=str(procedure.pk), candidate_id=str(v2.pk), control_id=str(v1.pk),
            mode="canary", share=0.5, request_id=None,
        )  # fmt: skip
    active_body.recent.clear()
    return procedure, v1, v2, watch


def test_a_worse_canary_is_rolled_back_once_as_the_system_with_its_history_audit_webhook_and_card(
    canary, viewer, admin_user
):
    procedure, v1, v2, watch = canary
    WebhookEndpoint.objects.create(
        url="https://hooks.example.com/waymark", secret="s", events=["promotion.rolled_back"], created_by=admin_user
    )
    runs(v1, 200, success_rate=0.9)
    runs(v2, 200, success_rate=0.5)
    decided = look(watch)
    assert decided.status == Watch.Status.ROLLED_BACK and "worse in success" in decided.reason
    procedure.refresh_from_db()
    assert procedure.active_version_id == v1.pk and procedure.canary_control_id is None
    rollback = PromotionRequest.objects.get(pk=decided.rollback_request_id)
    assert rollback.is_rollback and rollback.status == "applied" and rollback.proposer.username == "waymark-watch"
    assert Activation.objects.filter(request=rollback, version_id=str(v1.pk), replaced_id=str(v2.pk)).exists()
    assert AuditEvent.objects.filter(verb="promotion.rollback_automatic").count() == 1
    assert WebhookDelivery.objects.filter(event="promotion.rolled_back").exists()
    queue = logged_in(viewer).get(reverse("reviews:queue")).content.decode()
    assert "Rolled back by the watch" in queue and "worse in success" in queue
    assert look(watch) is None  # decided: nothing more happens
    assert Activation.objects.filter(version_id=str(v1.pk)).count() == 1


def test_a_non_inferior_canary_is_promoted_and_every_run_gets_it(canary):
    procedure, v1, v2, watch = canary
    runs(v1, 600, success_rate=0.8)
    runs(v2, 600, success_rate=0.95)
    decided = look(watch)
    assert decided.status == Watch.Status.PROMOTED and "no worse than the control" in decided.reason
    procedure.refresh_from_db()
    assert procedure.active_version_id == v2.pk and procedure.canary_control_id is None
    assert AuditEvent.objects.filter(verb="procedure.canary_end").count() == 1


def test_too_few_runs_go_on_then_expire_at_the_end_of_the_window(canary):
    _, v1, _, watch = canary
    runs(v1, 5, success_rate=1.0)
    assert look(watch).status == Watch.Status.RUNNING
    later = timezone.now() + timedelta(days=8)
    expired = look(watch, now=later)
    assert expired.status == Watch.Status.EXPIRED and "operators decide" in expired.reason
    assert len(expired.history) >= 1


def test_a_look_counts_each_run_once_and_a_dead_workers_lease_is_taken_over(canary):
    _, v1, v2, watch = canary
    runs(v1, 10, success_rate=1.0)
    assert watch_services._claim(watch.pk, "dead-worker", timezone.now())  # claimed, then the worker dies
    assert look(watch, worker="w2") is None  # its lease still runs
    taken = look(watch, worker="w2", now=timezone.now() + watch_services.LEASE + timedelta(seconds=1))
    assert taken is not None and taken.sums["success"]["control"][0] == 10
    runs(v2, 3, success_rate=1.0)
    again = look(watch, worker="w3")
    assert again.sums["success"]["control"][0] == 10 and again.sums["success"]["canary"][0] == 3


def test_a_full_activation_that_gets_worse_opens_a_rollback_request_for_people(settings):
    settings.WAYMARK_WATCH_MIN_RUNS = 20
    procedure = Procedure.objects.create(intent=intent_key(REFUND), title="refund")
    v1 = stored_version(procedure, "lookup_policy", number=1, status=VersionStatus.ACTIVE)
    Procedure.objects.filter(pk=procedure.pk).update(active_version=v1)
    runs(v1, 200, success_rate=0.9)  # before the activation
    v2 = stored_version(procedure, "issue_refund", number=2)
    with transaction.atomic():
        registry.get_kind(KIND).activate(actor=SYSTEM, candidate_id=str(v2.pk), expected_active_id=str(v1.pk))
        watch = watch_services.watch_start(
            actor=SYSTEM, kind=KIND, parent_key=str(procedure.pk), candidate_id=str(v2.pk), control_id=str(v1.pk),
            mode="full", share=0.0, request_id=None,
        )  # fmt: skip
    # The rollback target comes from the activation history: record it as a review would have.
    Activation.objects.create(
        kind=KIND, parent_key=str(procedure.pk), version_id=str(v2.pk), replaced_id=str(v1.pk),
        activated_at=timezone.now(),
    )  # fmt: skip
    runs(v2, 200, success_rate=0.5)
    decided = look(watch)
    assert decided.status == Watch.Status.ROLLBACK_REQUESTED
    request = PromotionRequest.objects.get(pk=decided.rollback_request_id)
    assert request.is_rollback and request.status == "open" and request.candidate_id == str(v1.pk)
    assert "confounded" not in request.rationale and "differ in time" in request.rationale
    procedure.refresh_from_db()
    assert procedure.active_version_id == v2.pk  # nothing moved: reviewers decide


def test_the_canary_is_served_by_run_key_pinned_by_revision_with_an_etag_per_arm(
    canary, viewer, make_token, api_client, django_assert_max_num_queries
):
    procedure, v1, v2, watch = canary
    token = make_token(viewer, "procedures:read")
    keys = [f"run-{n}" for n in range(40)]
    canary_key = next(k for k in keys if arm_for(str(procedure.pk), k, 0.5) == CANARY)
    control_key = next(k for k in keys if arm_for(str(procedure.pk), k, 0.5) != CANARY)
    served = api_client.get(LIST, token=token, **{"X-Waymark-Run": canary_key})
    other = api_client.get(LIST, token=token, **{"X-Waymark-Run": control_key})
    assert served.json()["items"][0]["active_version"]["id"] == v2.pk
    assert other.json()["items"][0]["active_version"]["id"] == v1.pk
    assert served["ETag"] != other["ETag"]
    assert served["X-Waymark-Revision"] == v2.content_revision and other["X-Waymark-Revision"] == v1.content_revision
    with django_assert_max_num_queries(1):  # the stamps, as without a canary: choosing the arm costs no query
        again = api_client.get(LIST, token=token, **{"X-Waymark-Run": canary_key, "If-None-Match": served["ETag"]})
    assert again.status_code == 304
    assert api_client.get(LIST, token=token).json()["items"][0]["active_version"]["id"] == v1.pk  # no key: control
    for garbage in ("x" * 500, "run\u202e1", "  "):
        assert api_client.get(LIST, token=token, **{"X-Waymark-Run": garbage}).status_code == 200
    # The share changes; a run pinned to the canary stays there.
    watch_services.watch_set(actor=SYSTEM, watch=watch, share=0.01)
    active_body.recent.clear()
    pinned = api_client.get(
        LIST, token=token, **{"X-Waymark-Run": canary_key, "X-Waymark-Revision": v2.content_revision}
    )
    assert pinned.json()["items"][0]["active_version"]["id"] == v2.pk


def test_operators_change_the_share_and_stop_the_canary_others_may_not(canary, operator, viewer):
    procedure, v1, _, watch = canary
    with pytest.raises(RoleRequired):
        watch_services.watch_set(actor=Actor(user=viewer), watch=watch, share=0.2)
    with pytest.raises(watch_services.WatchInvalid):
        watch_services.watch_set(actor=Actor(user=operator), watch=watch, share=1.5)
    changed = watch_services.watch_set(actor=Actor(user=operator), watch=watch, share=0.2, margin=0.05)
    assert changed.share == 0.2 and changed.policy["margin"] == 0.05
    assert Procedure.objects.get(pk=procedure.pk).canary_share == 0.2
    assert AuditEvent.objects.filter(verb="watch.set").count() == 1
    with pytest.raises(watch_services.WatchInvalid):
        watch_services.watch_stop(actor=Actor(user=operator), watch=watch, reason="")
    stopped = watch_services.watch_stop(actor=Actor(user=operator), watch=watch, reason="customers complain")
    assert stopped.status == Watch.Status.STOPPED
    procedure.refresh_from_db()
    assert procedure.active_version_id == v1.pk and procedure.canary_control_id is None


def test_an_approved_canary_request_starts_the_canary_and_its_watch(operator, reviewer, admin_user, settings):
    from accounts.roles import Role
    from reviews import services as review_services
    from tests.factories import user_with

    procedure = Procedure.objects.create(intent=intent_key(REFUND), title="refund")
    v1 = stored_version(procedure, "lookup_policy", number=1, status=VersionStatus.ACTIVE)
    Procedure.objects.filter(pk=procedure.pk).update(active_version=v1)
    v2 = stored_version(procedure, "check_account", "lookup_policy", number=2)
    with pytest.raises(review_services.Invalid, match="share"):
        review_services.promotion_propose(
            actor=Actor(user=operator), kind=KIND, candidate_id=str(v2.pk), rationale="try", rollout="canary",
            canary_share=1.5,
        )  # fmt: skip
    request = review_services.promotion_propose(
        actor=Actor(user=operator), kind=KIND, candidate_id=str(v2.pk), rationale="try it on a tenth",
        rollout="canary", canary_share=0.1,
    )  # fmt: skip
    review_services.promotion_override(actor=Actor(user=admin_user), request=request, reason="no replay in this test")
    for judge in (reviewer, user_with(Role.REVIEWER, username="rob")):
        request = review_services.judgment_submit(actor=Actor(user=judge), request=request, verdict="approve")
    assert request.status == "applied"
    procedure.refresh_from_db()
    assert (procedure.active_version_id, procedure.canary_control_id, procedure.canary_share) == (v2.pk, v1.pk, 0.1)
    watch = Watch.objects.get(kind=KIND, parent_key=str(procedure.pk))
    assert (watch.mode, watch.status, watch.request_id) == ("canary", "running", request.pk)
    assert (watch.candidate_ref, watch.control_ref) == (v2.content_revision, v1.content_revision)


def test_the_watch_pages_show_it_and_only_operators_change_it(canary, operator, viewer):
    _, v1, v2, watch = canary
    runs(v1, 30, success_rate=0.9)
    runs(v2, 30, success_rate=0.9)
    look(watch)
    listing = logged_in(viewer).get(reverse("uplift:watches")).content.decode()
    assert f"#{watch.pk}" in listing and "canary, 50%" in listing
    page = logged_in(viewer).get(reverse("uplift:watch", args=[watch.pk])).content.decode()
    assert "watch-bound-chart" in page and "Watching: no decision yet" in page and "Stop the canary" not in page
    client = logged_in(viewer)
    client.get(reverse("uplift:watches"))
    csrf = client.cookies["csrftoken"].value
    assert (
        client.post(
            reverse("uplift:watch_stop", args=[watch.pk]), {"csrfmiddlewaretoken": csrf, "reason": "x"}
        ).status_code
        == 403
    )
    client = logged_in(operator)
    client.get(reverse("uplift:watches"))
    csrf = client.cookies["csrftoken"].value
    bad = client.post(reverse("uplift:watch_set", args=[watch.pk]), {"csrfmiddlewaretoken": csrf, "share": "150"})
    assert bad.status_code == 400 and "Not changed" in bad.content.decode()
    good = client.post(reverse("uplift:watch_set", args=[watch.pk]), {"csrfmiddlewaretoken": csrf, "share": "25"})
    assert good.status_code == 302 and Watch.objects.get(pk=watch.pk).share == 0.25
    stop = client.post(reverse("uplift:watch_stop", args=[watch.pk]), {"csrfmiddlewaretoken": csrf, "reason": "x"})
    assert stop.status_code == 302 and Watch.objects.get(pk=watch.pk).status == "stopped"


def test_the_api_lists_shows_changes_and_stops_watches(canary, operator, viewer, make_token, api_client):
    _, _, v2, watch = canary
    read = make_token(viewer, "certification:read")
    listed = api_client.get("/api/v1/certification/watches?status=running", token=read).json()
    assert [row["id"] for row in listed] == [watch.pk]
    one = api_client.get(f"/api/v1/certification/watches/{watch.pk}", token=read).json()
    assert one["mode"] == "canary" and one["candidate_ref"] == v2.content_revision
    assert api_client.get("/api/v1/certification/watches/987654", token=read).status_code == 404
    write = make_token(operator, "certification:write")
    bad = api_client.post(f"/api/v1/certification/watches/{watch.pk}", {"share": 2}, token=write)
    assert bad.status_code == 422
    changed = api_client.post(f"/api/v1/certification/watches/{watch.pk}", {"share": 0.3}, token=write)
    assert changed.status_code == 200 and changed.json()["share"] == 0.3
    assert api_client.post(f"/api/v1/certification/watches/{watch.pk}/stop", {}, token=write).status_code == 422
    stopped = api_client.post(f"/api/v1/certification/watches/{watch.pk}/stop", {"reason": "why"}, token=write)
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    again = api_client.post(f"/api/v1/certification/watches/{watch.pk}/stop", {"reason": "why"}, token=write)
    assert again.status_code == 422 and "already" in again.json()["message"]


def test_the_propose_form_offers_the_canary_and_refuses_one_for_a_first_version(operator):
    procedure = Procedure.objects.create(intent=intent_key(REFUND), title="refund")
    v1 = stored_version(procedure, "lookup_policy", number=1)
    client = logged_in(operator)
    page = client.get(reverse("reviews:propose")).content.decode()
    assert 'name="rollout" value="canary"' in page
    data = {
        "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        "candidate": f"{KIND}:{v1.pk}",
        "rationale": "first",
        "rollout": "canary",
        "canary_percent": "10",
    }
    refused = client.post(reverse("reviews:propose"), data)
    assert refused.status_code == 422 and "first version" in refused.content.decode()
    assert not PromotionRequest.objects.exists()
