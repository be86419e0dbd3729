"""Issue 11: evidence a reviewer can trust on the item page — every difference of a procedure version (steps,
arguments, preconditions, failure exits) and of a graph (structural table, the candidate drawn with its changes),
gate metrics rounded with bound, active value and delta, the held-out cases linked, the outcome stated, and the
counts hidden until one's own judgment."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts import session_users
from accounts.services import Actor
from procedures.models import Procedure, ReplayArm, ReplayCase, ReplayRun, ReplayStatus
from procedures.versions import services as version_services
from reviews import services
from reviews.models import PromotionStatus
from tests.conftest import logged_in
from tests.helpers.reviews import propose, workspace_with_two_revisions
from tests.procedures.factories import stored_version
from tests.promote import promote_procedure_version
from tests.trajectories.factories import ingest, run_item

from .conftest import act

pytestmark = pytest.mark.django_db


def item_page(user, request) -> str:
    response = logged_in(user).get(reverse("reviews:item", args=[request.pk]))
    assert response.status_code == 200
    return response.content.decode()


# --- what changes: procedures ----------------------------------------------------------------------------------------
def refund_procedure():
    procedure = Procedure.objects.create(intent="refund_request", title="Refund")
    first = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
    promote_procedure_version(first)
    return procedure, first


def test_an_amended_versions_new_preconditions_and_failure_exits_are_shown(proposer, reviewer):
    _, first = refund_procedure()
    amended = version_services.procedure_version_amend(
        actor=act(proposer),
        version=first,
        preconditions=["the order exists", "the customer is verified"],
        failure_exits=["refund refused by policy: stop and tell the customer"],
    ).version
    request = services.promotion_propose(
        actor=act(proposer), kind="procedure_version", candidate_id=str(amended.pk), rationale="safer"
    )
    page = item_page(reviewer, request)
    for note in (
        "the order exists",
        "the customer is verified",
        "refund refused by policy: stop and tell the customer",
    ):
        assert note in page
        before_note = page.split(note, 1)[0].rsplit("<li", 1)[1]
        assert 'class="change-added"' in before_note and "change-mark-added" in before_note
    assert "the steps are the same" in page and f"candidate {amended.label}" in page and "active v1" in page
    assert "+ +" not in page and "- -" not in page  # one mark per line, never doubled


def test_steps_and_arguments_added_removed_and_changed(proposer, reviewer):
    procedure, _first = refund_procedure()
    # a version whose retained arguments differ (written directly: set-up only)
    third = procedure.versions.create(
        number=3,
        steps=[{"tool": "lookup_policy", "arguments": {"order_id": "A-1"}}, {"tool": "notify", "arguments": {}}],
        candidate_revision="sha256:" + "3" * 64,
        content_revision="sha256:" + "4" * 64,
    )
    request = services.promotion_propose(
        actor=act(proposer), kind="procedure_version", candidate_id=str(third.pk), rationale="notify instead"
    )
    page = item_page(reviewer, request)
    rows = {
        chunk.split("<code>", 1)[1].split("</code>", 1)[0]: chunk.split('"', 1)[0]
        for chunk in page.split('<tr class="change-')[1:]
    }
    assert rows == {"lookup_policy": "changed", "issue_refund": "removed", "notify": "added"}
    assert "<ins>order_id=A-1</ins>" in page and "<del>none</del>" in page


# --- what changes: graphs --------------------------------------------------------------------------------------------
def test_a_graph_diff_is_a_structural_table_and_a_highlighted_drawing(proposer, reviewer):
    _, _first, second = workspace_with_two_revisions()
    request = services.promotion_propose(
        actor=act(proposer), kind="graph_revision", candidate_id=str(second.pk), rationale="a check step"
    )
    page = item_page(reviewer, request)
    assert "nodes 1 added, 0 removed, 0 changed" in page and "edges 2 added, 0 removed, 0 changed" in page
    nodes = page.split('aria-label="Nodes added, removed and changed"', 1)[1].split("</table>", 1)[0]
    assert "<code>verify</code>" in nodes and nodes.count('<tr class="change-') == 1  # unchanged nodes not listed
    assert 'class="diff-del"' not in page  # no text diff where unchanged lines read like deletions
    drawing = page.split('<pre class="mermaid"', 1)[1].split("</pre>", 1)[0]
    assert drawing.count("flowchart TB") == 1 and "classDef added" in drawing and "class " in drawing
    assert 'class="review-graph"' in page and "css/reviews.css" in page


# --- gate metrics and held-out cases --------------------------------------------------------------------------------
def replayed_candidate():
    procedure, first = refund_procedure()
    second = stored_version(procedure, "lookup_policy", "check_order", "issue_refund", number=2)
    runs = ingest(*(run_item() for _ in range(3))).created_ids
    replay = ReplayRun.objects.create(
        version=second,
        compared_with=first,
        status=ReplayStatus.DONE,
        held_out_run_ids=runs,
        metrics={
            "candidate": {"task_success": 2 / 3, "tool_correctness": 0.8333333333333334},
            "active": {"task_success": 0.5, "tool_correctness": 0.75},
        },
        gate_report={
            "passed": True,
            "checks": [
                {
                    "metric": "task_success",
                    "mode": "no_regression",
                    "threshold": 0.5,
                    "value": 2 / 3,
                    "baseline": 0.5,
                    "passed": True,
                    "reason": "",
                },
                {
                    "metric": "tool_correctness",
                    "mode": "at_least",
                    "threshold": 0.5,
                    "value": 0.8333333333333334,
                    "baseline": None,
                    "passed": True,
                    "reason": "",
                },
            ],
        },
    )
    outcomes = {runs[0]: (True, True), runs[1]: (True, False), runs[2]: (False, True)}
    for case_id, (candidate_passed, active_passed) in outcomes.items():
        ReplayCase.objects.create(
            replay=replay,
            arm=ReplayArm.CANDIDATE,
            case_run_id=case_id,
            result={"passed": candidate_passed, "regression": active_passed and not candidate_passed},
        )
        ReplayCase.objects.create(
            replay=replay, arm=ReplayArm.ACTIVE, case_run_id=case_id, result={"passed": active_passed}
        )
    return second, runs


def test_gate_metrics_are_rounded_with_bound_active_value_and_delta(proposer, reviewer):
    second, _ = replayed_candidate()
    request = services.promotion_propose(
        actor=act(proposer), kind="procedure_version", candidate_id=str(second.pk), rationale="checks the order"
    )
    page = item_page(reviewer, request)
    assert "0.6666666666666666" not in page and "0.8333333333333334" not in page
    table = page.split('class="table gate-metrics"', 1)[1].split("</table>", 1)[0]
    row = table.split("<code>task_success</code>", 1)[1].split("</tr>", 1)[0]
    for cell in ("0.667", "no regression: ≥ 0.5", ">0.5<", "+0.167"):
        assert cell in row, (cell, row)
    row = table.split("<code>tool_correctness</code>", 1)[1].split("</tr>", 1)[0]
    for cell in ("0.833", "≥ 0.5", ">0.75<", "+0.0833"):
        assert cell in row, (cell, row)
    assert "compared with v1" in page


def test_held_out_cases_are_listed_with_pass_or_fail_and_a_link_to_each_run(proposer, reviewer, make_token, api_client):
    second, runs = replayed_candidate()
    request = services.promotion_propose(
        actor=act(proposer), kind="procedure_version", candidate_id=str(second.pk), rationale="checks the order"
    )
    page = item_page(reviewer, request)
    cases = page.split('class="table held-out-cases"', 1)[1].split("</table>", 1)[0]
    assert "Held-out cases (3)" in page
    for run_id, verdict in zip(runs, ("pass", "pass", "fail"), strict=True):
        assert reverse("trajectories:detail", args=[run_id]) in cases
        row = cases.split(reverse("trajectories:detail", args=[run_id]), 1)[1].split("</tr>", 1)[0]
        assert f">{verdict}<" in row
    body = api_client.get(f"/api/v1/promotions/{request.pk}", token=make_token(reviewer, "reviews:judge")).json()
    assert body["gate"]["cases_total"] == 3 and [c["passed"] for c in body["gate"]["cases"]] == [True, True, False]
    metric = next(m for m in body["gate"]["metrics"] if m["metric"] == "task_success")
    assert metric["active"] == 0.5 and metric["bound"] == "no regression: ≥ 0.5"


# --- outcome ---------------------------------------------------------------------------------------------------------
def test_the_outcome_is_stated_on_the_page(fake_kind, proposer, reviewer, second_reviewer, viewer, admin_user):
    open_request = propose(fake_kind, proposer, "v1", parent="p1")
    page = item_page(viewer, open_request)
    assert "needs 2 approvals" in page and "One rejection closes the request." in page

    rejected = propose(fake_kind, proposer, "v2", parent="p2")
    services.judgment_submit(actor=act(reviewer), request=rejected, verdict="reject", comment="loops forever")
    page = item_page(viewer, rejected)
    assert "Rejected by rita: loops forever" in page and '<time datetime="' in page.split("Rejected by rita")[1]

    applied = propose(fake_kind, proposer, "v3", parent="p3")
    for judge in (reviewer, second_reviewer):
        applied = services.judgment_submit(actor=act(judge), request=applied, verdict="approve")
    assert "Approved by rita and rob and applied: fake v3" not in item_page(viewer, applied)  # labels, not titles
    assert "Approved by rita and rob and applied: v3 became the active version" in item_page(viewer, applied)

    withdrawn = propose(fake_kind, proposer, "v4", parent="p4")
    services.promotion_withdraw(actor=act(proposer), request=withdrawn)
    assert "Withdrawn by its proposer or an admin" in item_page(viewer, withdrawn)

    fake_kind.add("v0", parent="p5")
    fake_kind.seed_active("v0")
    superseded = propose(fake_kind, proposer, "v5", parent="p5")
    fake_kind.add("v6", parent="p5")
    fake_kind.seed_active("v6")
    services.promotion_supersede_stale(actor=Actor.system(), kind="fake", parent_key="p5")
    assert "Superseded: v0, the version it would have replaced, is no longer the active version." in item_page(
        viewer, superseded
    )

    overridden = propose(fake_kind, proposer, "v7", parent="p7", passing=None)
    services.promotion_override(actor=act(admin_user), request=overridden, reason="hand-written")
    assert "Gate overridden by" in item_page(viewer, overridden)


def test_who_approved_is_shown_only_after_ones_own_judgment(
    fake_kind, proposer, reviewer, second_reviewer, third_reviewer
):
    request = propose(fake_kind, proposer, "v1", passing=None)  # two approvals, then it waits for an override
    for judge in (reviewer, second_reviewer):
        request = services.judgment_submit(actor=act(judge), request=request, verdict="approve")
    assert request.status == PromotionStatus.APPROVED
    outcome = item_page(proposer, request).split('id="outcome"')[1].split("</div>")[0]
    assert "Approved; not applied yet" in outcome and "rita" not in outcome  # counts only, for the proposer
    assert "Approved by rita and rob; not applied yet" in item_page(reviewer, request)
    # a reviewer who may still judge is not told that the others approved: the request reads as open (issue 30)
    page = item_page(third_reviewer, request)
    assert "Approved" not in page and "badge-approved" not in page and "Open: needs 2 approvals" in page


# --- counts hidden until judged --------------------------------------------------------------------------------------
def test_counts_are_hidden_from_a_reviewer_until_their_own_judgment(
    fake_kind, proposer, reviewer, second_reviewer, viewer, make_token, api_client
):
    request = propose(fake_kind, proposer, "v1", passing=None)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve", comment="fine")
    queue = reverse("reviews:queue")
    for page in (item_page(second_reviewer, request), logged_in(second_reviewer).get(queue).content.decode()):
        assert "1/2 approvals" not in page and "needs 2 approvals" in page
    token = make_token(second_reviewer, "reviews:judge")
    body = api_client.get(f"/api/v1/promotions/{request.pk}", token=token).json()
    assert body["approvals"] is None and body["rejections"] is None and body["counts_visible"] is False
    (item,) = api_client.get("/api/v1/reviews/queue", token=token).json()["items"]
    assert item["approvals"] is None and item["rejections"] is None
    # those who judged, the proposer and people who cannot judge see the counts
    for user in (reviewer, proposer, viewer):
        assert "1/2 approvals" in item_page(user, request)
    assert (
        api_client.get(f"/api/v1/promotions/{request.pk}", token=make_token(reviewer, "reviews:judge")).json()[
            "approvals"
        ]
        == 1
    )
    # after judging, the counts appear
    services.judgment_submit(actor=act(second_reviewer), request=request, verdict="approve")
    request.refresh_from_db()
    assert "2/2 approvals" in item_page(second_reviewer, request)
    assert api_client.get(f"/api/v1/promotions/{request.pk}", token=token).json()["approvals"] == 2


def test_history_hides_counts_too(fake_kind, proposer, reviewer, second_reviewer):
    request = propose(fake_kind, proposer, "v1")
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve")
    page = logged_in(second_reviewer).get(reverse("reviews:history", args=["fake", "p1"])).content.decode()
    assert "1 approval" not in page and "needs 2 approvals" in page


# --- query counts ----------------------------------------------------------------------------------------------------
def count_queries(client, url) -> int:
    """The page's queries, the session's user read afresh (accounts.session_users: the same count every time)."""
    session_users.forget()
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_the_item_page_of_a_procedure_runs_a_fixed_number_of_queries(proposer, reviewer, second_reviewer):
    second, _ = replayed_candidate()
    request = services.promotion_propose(
        actor=act(proposer), kind="procedure_version", candidate_id=str(second.pk), rationale="checks the order"
    )
    client = logged_in(second_reviewer)
    url = reverse("reviews:item", args=[request.pk])
    before = count_queries(client, url)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve", comment="ok")
    assert count_queries(client, url) == before <= 14


def test_the_item_page_of_a_graph_runs_a_fixed_number_of_queries(proposer, reviewer, second_reviewer):
    _, _, second = workspace_with_two_revisions()
    request = services.promotion_propose(
        actor=act(proposer), kind="graph_revision", candidate_id=str(second.pk), rationale="go"
    )
    client = logged_in(second_reviewer)
    url = reverse("reviews:item", args=[request.pk])
    before = count_queries(client, url)
    services.judgment_submit(actor=act(reviewer), request=request, verdict="approve", comment="ok")
    assert count_queries(client, url) == before <= 16


def test_the_queue_runs_a_fixed_number_of_queries_whatever_the_number_of_requests(proposer, reviewer):
    procedure = Procedure.objects.create(intent="refund_request", title="Refund")
    client = logged_in(reviewer)
    counts = []
    for number in range(1, 7):
        version = stored_version(procedure, "lookup_policy", f"tool_{number}", number=number)
        services.promotion_propose(
            actor=act(proposer), kind="procedure_version", candidate_id=str(version.pk), rationale="go"
        )
        if number in (1, 6):
            counts.append(count_queries(client, reverse("reviews:queue")))
    assert counts[0] == counts[1], counts


def test_the_propose_form_runs_a_bounded_number_of_queries(proposer, django_assert_max_num_queries):
    procedure = Procedure.objects.create(intent="refund_request", title="Refund")
    for number in range(1, 8):
        stored_version(procedure, "lookup_policy", f"tool_{number}", number=number)
    workspace_with_two_revisions()
    client = logged_in(proposer)
    with django_assert_max_num_queries(12):
        page = client.get(reverse("reviews:propose")).content.decode()
    assert page.count('value="procedure_version:') == 7
