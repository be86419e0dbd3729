"""The kinds registered by graphs and procedures, through the review flow: agents see the new active version."""

import threading

import pytest
from django.db import connection
from django.urls import reverse

from accounts.models import AuditEvent
from accounts.services import Actor
from graphs import services as graph_services
from graphs.demo import two_hop_graph
from procedures.models import Procedure, ReplayRun, ReplayStatus, VersionStatus
from reviews import services
from reviews.errors import Conflict
from reviews.models import PromotionStatus
from tests.conftest import logged_in
from tests.helpers.reviews import graph_workspace
from tests.procedures.factories import stored_version
from tests.promote import promote_graph_revision, promote_procedure_version

from .conftest import act

SYSTEM = Actor.system()


def approve(request, *reviewers):
    for reviewer in reviewers:
        request = services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    return request


@pytest.mark.django_db
def test_a_graph_revision_is_promoted_and_agents_get_the_new_etag(
    proposer, reviewer, second_reviewer, make_token, api_client, django_capture_on_commit_callbacks
):
    workspace, seed, candidate = graph_workspace()
    token = make_token(reviewer, "graphs:read")
    before = api_client.get("/api/v1/graphs/ws/active", token=token)
    request = services.promotion_propose(
        actor=act(proposer), kind="graph_revision", candidate_id=str(candidate.pk), rationale="evolved"
    )
    assert request.replaces_id == str(seed.pk) and request.gate_snapshot["passing"] is True
    with django_capture_on_commit_callbacks(execute=True):
        request = approve(request, reviewer, second_reviewer)
    assert request.status == PromotionStatus.APPLIED
    workspace.refresh_from_db()
    assert workspace.active_revision_id == candidate.pk
    after = api_client.get("/api/v1/graphs/ws/active", token=token, HTTP_IF_NONE_MATCH=before["ETag"])
    assert after.status_code == 200 and after["ETag"] != before["ETag"]
    assert AuditEvent.objects.filter(verb="workspace.set_active_revision", target_id=str(workspace.pk)).count() == 1


@pytest.mark.django_db
def test_a_hand_seeded_graph_has_no_gate_and_needs_an_admin_override(
    proposer, reviewer, second_reviewer, admin_user, django_capture_on_commit_callbacks
):
    workspace, seed, candidate = graph_workspace()
    with django_capture_on_commit_callbacks(execute=True):
        approve(
            services.promotion_propose(
                actor=act(proposer), kind="graph_revision", candidate_id=str(candidate.pk), rationale="evolved"
            ),
            reviewer,
            second_reviewer,
        )
    kind_rollback = services.promotion_propose(
        actor=act(proposer), kind="graph_revision", candidate_id=str(seed.pk), rationale="back", is_rollback=True
    )
    assert kind_rollback.gate_snapshot["passing"] is None
    assert approve(kind_rollback, reviewer, second_reviewer).status == PromotionStatus.APPROVED
    with django_capture_on_commit_callbacks(execute=True):
        done = services.promotion_override(
            actor=act(admin_user), request=kind_rollback, reason="the seed is known good"
        )
    assert done.status == PromotionStatus.APPLIED
    workspace.refresh_from_db()
    assert workspace.active_revision_id == seed.pk


@pytest.mark.django_db
def test_a_graph_pointer_moved_by_another_promotion_makes_the_request_stale(proposer, reviewer):
    workspace, _seed, candidate = graph_workspace()
    request = services.promotion_propose(
        actor=act(proposer), kind="graph_revision", candidate_id=str(candidate.pk), rationale="evolved"
    )
    rival = graph_services.graph_append_accepted(
        actor=SYSTEM, workspace=workspace, graph=two_hop_graph(), expected_head=candidate.digest, meta={}
    )
    promote_graph_revision(rival, on_commit=False)  # judged before the winner's after-commit sweep
    with pytest.raises(Conflict):
        services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    request.refresh_from_db()
    assert request.status == PromotionStatus.SUPERSEDED


def procedure_with_versions(count: int = 2):
    procedure = Procedure.objects.create(intent="refund_request", title="Refund")
    versions = [
        stored_version(procedure, "lookup_policy", f"tool_{n}", "issue_refund", number=n + 1) for n in range(count)
    ]
    return procedure, versions


@pytest.mark.django_db
def test_a_procedure_version_with_a_passing_replay_is_promoted_and_the_old_one_retired(
    proposer, reviewer, second_reviewer, admin_user, make_token, api_client, django_capture_on_commit_callbacks
):
    procedure, (first, second) = procedure_with_versions()
    promote_procedure_version(first)
    ReplayRun.objects.create(
        version=second,
        status=ReplayStatus.DONE,
        held_out_run_ids=[1, 2],
        gate_report={"passed": True, "checks": [{"metric": "task_success", "value": 0.9, "passed": True}]},
    )
    token = make_token(reviewer, "procedures:read")
    before = api_client.get("/api/v1/procedures", token=token)
    request = services.promotion_propose(
        actor=act(proposer), kind="procedure_version", candidate_id=str(second.pk), rationale="fewer steps"
    )
    assert request.replaces_id == str(first.pk) and request.gate_snapshot["passing"] is True
    with django_capture_on_commit_callbacks(execute=True):
        approve(request, reviewer, second_reviewer)
    procedure.refresh_from_db()
    first.refresh_from_db()
    second.refresh_from_db()
    assert procedure.active_version_id == second.pk and procedure.revision == 2
    assert (first.status, second.status) == (VersionStatus.RETIRED, VersionStatus.ACTIVE)
    after = api_client.get("/api/v1/procedures", token=token, HTTP_IF_NONE_MATCH=before["ETag"])
    assert after.status_code == 200 and after["ETag"] != before["ETag"]
    rollback = services.rollback_emergency(
        actor=act(admin_user), kind="procedure_version", parent_key=str(procedure.pk), reason="refunds fail"
    )
    procedure.refresh_from_db()
    assert rollback.candidate_id == str(first.pk) and procedure.active_version_id == first.pk


@pytest.mark.django_db
def test_a_procedure_version_without_a_replay_has_no_gate(proposer):
    _, (first, _) = procedure_with_versions()
    request = services.promotion_propose(
        actor=act(proposer), kind="procedure_version", candidate_id=str(first.pk), rationale="first"
    )
    assert request.gate_snapshot["passing"] is None and request.replaces_id is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_competing_procedure_promotions_leave_exactly_one_active_version(
    proposer, reviewer, second_reviewer, admin_user
):
    procedure, versions = procedure_with_versions(21)
    setup = promote_procedure_version(versions[0])
    requests = []
    for version in versions[1:]:
        request = services.promotion_propose(
            actor=act(proposer), kind="procedure_version", candidate_id=str(version.pk), rationale="go"
        )
        # A missing gate is overridden by the admin so the twenty requests are all one approval from applying.
        services.promotion_override(actor=act(admin_user), request=request, reason="load test")
        requests.append(approve(request, reviewer))
    barrier = threading.Barrier(len(requests))
    outcomes = []

    def final_approval(request):
        try:
            barrier.wait()
            services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
            outcomes.append("applied")
        except Conflict as exc:
            outcomes.append(exc.code)
        except Exception as exc:
            outcomes.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=final_approval, args=(request,)) for request in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert outcomes.count("applied") == 1, outcomes
    assert set(outcomes) - {"applied"} <= {"stale", "not_open"}, outcomes
    procedure.refresh_from_db()
    assert procedure.versions.filter(status=VersionStatus.ACTIVE).count() == 1
    assert procedure.active_version.status == VersionStatus.ACTIVE
    assert AuditEvent.objects.filter(verb="procedure.activate", target_id=str(procedure.pk)).count() == 2
    assert AuditEvent.objects.filter(verb="promotion.apply").exclude(target_id=str(setup.pk)).count() == 1


@pytest.mark.django_db
def test_the_item_page_of_a_graph_revision_draws_the_candidate_with_its_changes_and_shows_the_diff(proposer, reviewer):
    _, _, candidate = graph_workspace()
    request = services.promotion_propose(
        actor=act(proposer), kind="graph_revision", candidate_id=str(candidate.pk), rationale="evolved"
    )
    page = logged_in(reviewer).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert page.count('class="mermaid"') == 1 and "mermaid.min.js" in page and "classDef added" in page
    assert "change-added" in page and "validation 1.0000 against retained 0.5000" in page
    assert reverse("graphs:diff", args=["ws"]) in page


@pytest.mark.django_db
def test_the_item_page_of_a_procedure_version_shows_the_steps_side_by_side_with_source_runs(
    proposer, reviewer, admin_user
):
    _, (first, second) = procedure_with_versions()
    promote_procedure_version(first)
    request = services.promotion_propose(
        actor=act(proposer), kind="procedure_version", candidate_id=str(second.pk), rationale="fewer steps"
    )
    page = logged_in(reviewer).get(reverse("reviews:item", args=[request.pk])).content.decode()
    assert "active v1" in page and "candidate v2" in page
    assert "tool_0" in page and "tool_1" in page
    assert reverse("procedures:version", args=[second.pk]) in page
