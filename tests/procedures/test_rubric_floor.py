"""The rubric floor of the replay gate: a live replay's answered runs are judged under the intent's active rubric;
a required failure or an overall below the floor fails the gate, with the reason in the report and the gate
evidence. No floor: the gate is what it was."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from accounts.models import AuditEvent
from accounts.roles import Role, RoleRequired
from accounts.services import Actor
from llm.models import ModelCall
from procedures import errors
from procedures.core import DEFAULT_PROCEDURE_CHECKS
from procedures.mining import services as mining_services
from procedures.models import Procedure, ProcedureVersion, ReplayStatus, VersionStatus
from procedures.promotable import ProcedureVersionKind
from procedures.replay.services import live as live_replay_services
from procedures.replay.services import offline as offline_replay_services
from procedures.versions import services as version_services
from reviews.services import judgment_submit, promotion_override, promotion_propose
from rubrics import services as rubric_services
from rubrics.core.rubrics import RubricDimension, TrajectoryRubric
from rubrics.models import RubricJob, RubricJobKind, RubricJobStatus, RubricScoreRow
from tests.conftest import logged_in
from tests.factories import user_with
from trajectories import job_services

from .factories import REFUND, queued_replay, refund_run, refund_runs

pytestmark = pytest.mark.django_db
AGENT = Actor.system()
DEFAULT_CHECKS = [check.metric for check in DEFAULT_PROCEDURE_CHECKS]


@pytest.fixture
def active_rubric(operator, reviewer, admin_user):
    """The refund intent's rubric (task_completed required, weight 2; policy_followed, weight 1), made active
    through a promotion request: two approvals and an admin override (a rubric has no gate evidence)."""
    rubric = rubric_services.rubric_ensure(actor=Actor(user=operator), key=REFUND)
    document = TrajectoryRubric(
        task="Refund an order",
        dimensions=(
            RubricDimension("task_completed", "Did what was asked.", weight=2.0, required=True),
            RubricDimension("policy_followed", "Respected the refund policy.", weight=1.0),
        ),
    )
    version, _ = rubric_services.rubric_version_add(actor=Actor(user=operator), rubric=rubric, document=document)
    request = promotion_propose(
        actor=Actor(user=operator), kind="rubric_version", candidate_id=str(version.pk), rationale="refund rubric"
    )
    judgment_submit(actor=Actor(user=reviewer), request=request, verdict="approve")
    request = judgment_submit(actor=Actor(user=user_with(Role.REVIEWER)), request=request, verdict="approve")
    promotion_override(actor=Actor(user=admin_user), request=request, reason="a rubric has no replay gate")
    version.refresh_from_db()
    assert version.rubric.active_version_id == version.pk
    return version


def judges_say(monkeypatch, **scores: float) -> None:
    """Every scripted judge gives these scores (evidence: the first step)."""

    def reply(run, rubric, judge):
        rows = [
            {"dimension_id": dimension_id, "score": score, "confidence": 0.9, "evidence_steps": [0]}
            for dimension_id, score in scores.items()
        ]
        return json.dumps({"assessments": rows})

    monkeypatch.setattr(rubric_services, "scripted_judge_reply", reply)


@pytest.fixture
def live(operator, django_capture_on_commit_callbacks):
    refund_runs(successes=10, failures=0)
    with django_capture_on_commit_callbacks(execute=True):
        result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    return result.version.replays.get(mode="live")


def set_floor(operator, replay, floor):
    procedure = Procedure.objects.get(pk=replay.version.procedure_id)
    return version_services.rubric_floor_set(actor=Actor(user=operator), procedure=procedure, floor=floor)


def answer_everything(live, capture):
    while job := job_services.job_claim(
        actor=AGENT, kind=live_replay_services.REPLAY_JOB_KIND, worker="t", lease_seconds=60
    ):
        with capture(execute=True):
            job_services.job_complete(actor=AGENT, job=job, run_items=[refund_run()])
    live.refresh_from_db()
    return live


def answered_run_ids(live) -> list[int]:
    return sorted(live.cases.filter(arm="candidate").values_list("result_run_id", flat=True))


def test_without_a_floor_the_gate_is_unchanged(live, active_rubric, django_capture_on_commit_callbacks):
    live = answer_everything(live, django_capture_on_commit_callbacks)

    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is True
    assert [check["metric"] for check in live.gate_report["checks"]] == DEFAULT_CHECKS
    assert "rubric" not in live.gate_report
    assert not RubricJob.objects.exists() and not ModelCall.objects.filter(role="judge").exists()
    evidence = ProcedureVersionKind().gate_evidence(str(live.version_id))
    assert evidence.passing is True and "rubric" not in evidence.summary and "rubric_floor" not in evidence.details


def test_a_floor_met_by_every_judged_run_passes(
    live, active_rubric, operator, monkeypatch, django_capture_on_commit_callbacks
):
    judges_say(monkeypatch, task_completed=0.9, policy_followed=0.8)
    set_floor(operator, live, 0.6)

    live = answer_everything(live, django_capture_on_commit_callbacks)

    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is True
    check = live.gate_report["checks"][-1]
    assert check["metric"] == "rubric_floor" and check["passed"] is True and check["threshold"] == 0.6
    assert check["value"] == pytest.approx((2 * 0.9 + 0.8) / 3)
    rubric = live.gate_report["rubric"]
    assert (
        rubric["applied"] is True
        and rubric["rubric_key"] == rubric_services.intent_key(REFUND)
        and rubric["rubric_version"] == 1
    )
    runs = answered_run_ids(live)
    assert [run["run_id"] for run in rubric["runs"]] == runs
    assert all(run["passed"] and run["required_failures"] == [] for run in rubric["runs"])
    assert all(run["overall"] == pytest.approx((2 * 0.9 + 0.8) / 3) for run in rubric["runs"])
    # the judges' scores are the runs' cached rubric scores, each judge a ModelCall
    assert set(RubricScoreRow.objects.filter(version=active_rubric).values_list("run_id", flat=True)) == set(runs)
    assert RubricJob.objects.filter(kind=RubricJobKind.JUDGE, status=RubricJobStatus.SUCCEEDED).count() == len(runs)
    assert ModelCall.objects.filter(role="judge").count() == len(runs) * rubric_services.judges_setting()
    assert ProcedureVersion.objects.get(pk=live.version_id).status == VersionStatus.READY
    evidence = ProcedureVersionKind().gate_evidence(str(live.version_id))
    assert evidence.passing is True and "rubric floor 0.6 met" in evidence.summary
    assert evidence.details["rubric_floor"].startswith(
        f"floor 0.6 under {rubric_services.intent_key(REFUND)} v1: passed"
    )


def test_a_required_failure_fails_the_gate_with_the_reason(
    live, active_rubric, operator, monkeypatch, django_capture_on_commit_callbacks
):
    judges_say(monkeypatch, task_completed=0.2, policy_followed=1.0)  # overall 0.47: above the floor of 0.3
    set_floor(operator, live, 0.3)

    live = answer_everything(live, django_capture_on_commit_callbacks)

    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is False
    regression = [check for check in live.gate_report["checks"] if check["metric"] != "rubric_floor"]
    assert all(check["passed"] for check in regression)  # only the rubric fails
    check = live.gate_report["checks"][-1]
    assert check["metric"] == "rubric_floor" and check["passed"] is False
    assert "required failures: task_completed" in check["reason"]
    for run in live.gate_report["rubric"]["runs"]:
        assert run["passed"] is False and run["required_failures"] == ["task_completed"]
        assert run["overall"] == pytest.approx((2 * 0.2 + 1.0) / 3)
    assert ProcedureVersion.objects.get(pk=live.version_id).status == VersionStatus.FAILED
    finish = AuditEvent.objects.get(verb="replay.finish", target_id=str(live.pk))
    assert finish.after["passed"] is False and finish.after["failed_checks"] == ["rubric_floor"]
    evidence = ProcedureVersionKind().gate_evidence(str(live.version_id))
    assert evidence.passing is False and "rubric floor 0.3 not met" in evidence.summary
    assert "required failures: task_completed" in evidence.details["rubric_floor"]


def test_an_overall_below_the_floor_fails_the_gate(
    live, active_rubric, operator, monkeypatch, django_capture_on_commit_callbacks
):
    judges_say(monkeypatch, task_completed=0.9, policy_followed=0.8)
    set_floor(operator, live, 0.9)

    live = answer_everything(live, django_capture_on_commit_callbacks)

    assert live.gate_report["passed"] is False
    assert "overall 0.87 < 0.9" in live.gate_report["checks"][-1]["reason"]
    assert all(run["required_failures"] == [] for run in live.gate_report["rubric"]["runs"])


def test_a_floor_without_an_active_rubric_is_reported_and_not_applied(
    live, operator, django_capture_on_commit_callbacks
):
    set_floor(operator, live, 0.6)

    live = answer_everything(live, django_capture_on_commit_callbacks)

    assert live.gate_report["passed"] is True
    assert [check["metric"] for check in live.gate_report["checks"]] == DEFAULT_CHECKS
    assert live.gate_report["rubric"]["applied"] is False
    assert "no active rubric" in live.gate_report["rubric"]["reason"]
    assert not RubricJob.objects.exists()
    assert "rubric floor 0.6 not applied" in ProcedureVersionKind().gate_evidence(str(live.version_id)).summary


def test_an_offline_replay_has_no_runs_to_judge_and_says_so(live, active_rubric, operator):
    set_floor(operator, live, 0.6)
    offline = queued_replay(live.version, compared_with=None, held_out=live.held_out_run_ids)

    offline = offline_replay_services.replay_offline_run(replay=offline)

    assert offline.status == ReplayStatus.DONE and offline.gate_report["passed"] is True
    assert [check["metric"] for check in offline.gate_report["checks"]] == DEFAULT_CHECKS
    assert offline.gate_report["rubric"]["applied"] is False
    assert offline.gate_report["rubric"]["reason"] == offline_replay_services.OFFLINE_NO_RUNS
    assert not RubricJob.objects.exists()


def test_a_run_being_judged_elsewhere_leaves_the_replay_running(
    live, active_rubric, operator, monkeypatch, django_capture_on_commit_callbacks
):
    judges_say(monkeypatch, task_completed=0.9, policy_followed=0.8)
    set_floor(operator, live, 0.6)
    # the agent's answers arrive while a judging job of one of them is open (another settle, or a person's request)
    original = live_replay_services.rubric_floor_check

    def with_an_open_job(**kwargs):
        run_id = min(kwargs["run_ids"])
        RubricJob.objects.create(kind=RubricJobKind.JUDGE, rubric=active_rubric.rubric, run_id=run_id, judges=1)
        return original(**kwargs)

    monkeypatch.setattr(live_replay_services, "rubric_floor_check", with_an_open_job)
    live = answer_everything(live, django_capture_on_commit_callbacks)
    assert live.status == ReplayStatus.RUNNING

    monkeypatch.setattr(live_replay_services, "rubric_floor_check", original)
    RubricJob.objects.filter(status="queued").update(status=RubricJobStatus.FAILED)
    settled = live_replay_services.replay_live_settle(replay=live)
    assert settled.status == ReplayStatus.DONE and settled.gate_report["passed"] is True


def test_setting_the_floor_is_an_audited_operator_action(live, operator, reviewer):
    procedure = Procedure.objects.get(pk=live.version.procedure_id)
    with pytest.raises(RoleRequired):
        version_services.rubric_floor_set(actor=Actor(user=reviewer), procedure=procedure, floor=0.5)
    for bad in (-0.1, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(errors.InvalidFloor):
            version_services.rubric_floor_set(actor=Actor(user=operator), procedure=procedure, floor=bad)

    version_services.rubric_floor_set(actor=Actor(user=operator), procedure=procedure, floor=0.5)
    version_services.rubric_floor_set(actor=Actor(user=operator), procedure=procedure, floor=None)

    procedure.refresh_from_db()
    assert procedure.rubric_floor is None
    moves = AuditEvent.objects.filter(verb="procedure.rubric_floor").order_by("id")
    assert [(event.before, event.after) for event in moves] == [
        ({"rubric_floor": None}, {"rubric_floor": 0.5}),
        ({"rubric_floor": 0.5}, {"rubric_floor": None}),
    ]


def test_the_version_page_shows_the_rubric_check_per_run(
    live, active_rubric, operator, viewer, monkeypatch, django_capture_on_commit_callbacks
):
    judges_say(monkeypatch, task_completed=0.2, policy_followed=1.0)
    set_floor(operator, live, 0.3)
    live = answer_everything(live, django_capture_on_commit_callbacks)

    response = logged_in(viewer).get(reverse("procedures:version", args=[live.version_id]))

    html = response.content.decode()
    assert response.status_code == 200
    assert "Rubric floor 0.30" in html and "required failures: task_completed" in html
    for run_id in answered_run_ids(live):
        assert f'href="{reverse("trajectories:detail", args=[run_id])}#rubric"' in html
    assert 'action="' + reverse("procedures:rubric_floor", args=[live.version_id]) not in html  # viewers only read


def test_an_operator_sets_the_floor_on_the_version_page(live, operator, reviewer):
    url = reverse("procedures:rubric_floor", args=[live.version_id])
    page = reverse("procedures:version", args=[live.version_id])
    procedure = Procedure.objects.get(pk=live.version.procedure_id)

    def post(user, floor):
        client = logged_in(user)
        html = client.get(page).content.decode()
        response = client.post(url, {"rubric_floor": floor, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})
        procedure.refresh_from_db()
        return html, response.status_code

    html, status = post(reviewer, "0.5")
    assert status == 403 and 'action="' + url not in html and procedure.rubric_floor is None
    html, status = post(operator, "1.5")
    assert 'action="' + url in html and status == 302 and procedure.rubric_floor is None
    assert post(operator, "0.65")[1] == 302 and procedure.rubric_floor == 0.65
    assert post(operator, "")[1] == 302 and procedure.rubric_floor is None
