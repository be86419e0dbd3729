"""/api/v1/graphs/{ws}/evolutions: operators start and cancel runs (scope evolutions:run), readers list runs and read
rounds (graphs:read); every refusal answers the Error schema and starts nothing."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.roles import Role
from accounts.services import Actor, api_token_create, user_roles_set
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_cancel, evolution_start
from graphs.models import EvolutionRun, Revision
from tests.graphs.factories import make_workspace

pytestmark = pytest.mark.django_db

LAB = "/api/v1/graphs/lab/evolutions"


@pytest.fixture
def lab():
    return make_workspace("lab", task_description="two-hop question answering over a small corpus")


@pytest.fixture
def other():
    return make_workspace("other")


@pytest.fixture
def runner(operator, make_token):
    """An operator's token that may start and cancel runs and read them."""
    return make_token(operator, "evolutions:run", "graphs:read")


@pytest.fixture
def reader(viewer, make_token):
    """A read-only teammate's token: may read runs, never start one."""
    return make_token(viewer, "graphs:read")


@pytest.fixture
def outsider_token(make_token, django_user_model):
    user = django_user_model.objects.create_user("gone", password="x")
    user_roles_set(actor=Actor.system(), user=user, roles=[Role.OPERATOR])
    token = make_token(user, "evolutions:run", "graphs:read")
    user.is_active = False
    user.save(update_fields=["is_active"])
    return token


def assert_error(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code:
        assert body["code"] == code
    return body


def start(workspace, *, rounds=4, user=None):
    """A run started through the service, its steps left to the caller."""
    actor = Actor(user=user) if user is not None else Actor.system()
    return evolution_start(actor=actor, workspace=workspace, rounds=rounds, evaluator="two-hop", enqueue=False)


def finished_runs(workspace, count):
    runs = []
    for _ in range(count):
        run = start(workspace)
        runs.append(evolution_cancel(actor=Actor.system(), run=run))
    return runs


# -- start -----------------------------------------------------------------------------------------------------------


def test_an_operator_starts_a_run_and_its_first_step_goes_to_a_worker_on_commit(
    api_client, runner, lab, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api_client.post(
            LAB,
            {
                "rounds": 3,
                "evaluator": "two-hop",
                "gate": {"kind": "strict", "minimum_delta": 0.1},
                "budget": {"max_model_calls": 5, "max_seconds": 60},
                "config": {"max_rejected_streak": 2, "cycle_policy": "allow"},
            },
            token=runner,
        )
    assert response.status_code == 201, response.content
    body = response.json()
    run = EvolutionRun.objects.get()
    assert body["id"] == run.pk and body["workspace"] == "lab"
    assert (body["status"], body["rounds_planned"], body["rounds_done"]) == ("queued", 3, 0)
    assert (body["evaluator"], body["gate"], body["started_by"]) == ("two-hop", "strict", "otto")
    assert body["budget"]["max_model_calls"] == 5 and body["budget"]["max_seconds"] == 60
    assert body["config"] == {"max_rejected_streak": 2, "cycle_policy": "allow"}
    assert body["cost"] == "0" and body["baseline_score"] is None and body["finished_at"] is None
    assert run.gate == {"kind": "strict", "minimum_delta": 0.1}
    assert len(callbacks) == 1
    assert AuditEvent.objects.filter(verb="evolution.start").count() == 1


def test_the_defaults_start_ten_rounds_on_the_two_hop_evaluator_with_the_tie_gate(api_client, runner, lab):
    body = api_client.post(LAB, {}, token=runner).json()
    assert (body["rounds_planned"], body["evaluator"], body["gate"]) == (10, "two-hop", "tie")


def test_a_second_run_while_one_is_open_is_a_conflict(api_client, runner, lab):
    assert api_client.post(LAB, {"rounds": 1}, token=runner).status_code == 201
    assert_error(api_client.post(LAB, {"rounds": 1}, token=runner), 409, "run_in_progress")
    assert EvolutionRun.objects.count() == 1


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"evaluator": "oracle"}, "cannot_start"),
        ({"rounds": 0}, "invalid"),
        ({"rounds": 51}, "invalid"),
        ({"rounds": "many"}, "invalid"),
        ({"surprise": 1}, "invalid"),
        ({"gate": {"kind": "lenient"}}, "invalid"),
        ({"gate": {"kind": "tie", "minimum_delta": 0.1}}, "invalid_gate"),
        ({"gate": {"kind": "objective"}}, "invalid_gate"),
        ({"gate": {"kind": "objective", "objective": {"metrics": []}, "context": {}}}, "invalid_gate"),
        ({"budget": {"max_model_calls": -1}}, "invalid"),
        ({"budget": {"max_dollars": 5}}, "invalid"),
        ({"config": {"mode": "scratch_onetime"}}, "invalid"),
        ({"config": {"cycle_policy": "sometimes"}}, "invalid"),
    ],
)
def test_a_start_the_run_cannot_take_is_refused_and_starts_nothing(api_client, runner, lab, payload, code):
    assert_error(api_client.post(LAB, payload, token=runner), 422, code)
    assert not EvolutionRun.objects.exists()
    assert not AuditEvent.objects.filter(verb="evolution.start").exists()


def test_a_malformed_body_is_a_bad_request_and_starts_nothing(api_client, runner, lab):
    assert_error(api_client.post(LAB, raw="{rounds: ", token=runner), 400)
    assert not EvolutionRun.objects.exists()


def test_starting_needs_a_token_the_scope_the_operator_role_and_the_workspace(
    api_client, runner, reader, outsider_token, operator, lab
):
    assert_error(api_client.post(LAB, {"rounds": 1}), 401, "unauthorized")
    assert_error(api_client.post(LAB, {"rounds": 1}, token=outsider_token), 401)
    assert_error(api_client.post(LAB, {"rounds": 1}, token=reader), 403, "missing_scope")
    assert_error(api_client.post("/api/v1/graphs/nope/evolutions", {"rounds": 1}, token=runner), 404)
    user_roles_set(actor=Actor.system(), user=operator, roles=[Role.REVIEWER])  # the token loses the scope with it
    assert_error(api_client.post(LAB, {"rounds": 1}, token=runner), 403, "missing_scope")
    assert not EvolutionRun.objects.exists()


def test_a_viewer_cannot_even_hold_a_token_that_starts_runs(viewer, make_token):
    with pytest.raises(ValueError, match="evolutions:run needs the operator role"):
        make_token(viewer, "evolutions:run")


# -- read ------------------------------------------------------------------------------------------------------------


def test_a_run_read_after_it_ends_shows_the_spec_scenario(api_client, runner, reader, lab):
    run_id = api_client.post(LAB, {"rounds": 4}, token=runner).json()["id"]
    run_inline(EvolutionRun.objects.get(pk=run_id))
    body = api_client.get(f"{LAB}/{run_id}", token=reader).json()
    assert (body["status"], body["stopped_reason"], body["stage"], body["error"]) == ("succeeded", "max_rounds", "", "")
    assert (body["rounds_done"], body["first_iteration"]) == (4, 1)
    assert (body["baseline_score"], body["best_score"]) == (0.5, 1.0)
    assert body["meter"]["evaluations"] == 3 and body["meter"]["model_calls"] == 4
    assert body["started_by"] == "otto" and body["started_at"] and body["finished_at"]
    assert isinstance(body["cost"], str)


def test_the_rounds_of_a_run_say_what_each_round_did(api_client, reader, lab, operator):
    run = run_inline(start(lab, user=operator))
    body = api_client.get(f"{LAB}/{run.pk}/rounds", token=reader).json()
    assert body["run"] == run.pk
    rounds = body["items"]
    assert [r["outcome"] for r in rounds] == ["accepted", "structural_failure", "rejected", "duplicate_candidate"]
    assert [r["iteration"] for r in rounds] == [1, 2, 3, 4]
    accepted, broken, rejected, duplicate = rounds
    head = Revision.objects.get(workspace=lab, kind="graph", seq=1)
    assert accepted["accepted_revision"] == {"seq": 1, "digest": head.digest}
    assert accepted["candidate_digest"] == head.digest and accepted["mode"] == "scratch_incremental"
    assert (accepted["retained_score"], accepted["candidate_score"]) == (0.5, 1.0)
    assert accepted["decision"]["accepted"] is True
    assert accepted["edit_counts"]["add_nodes"] == 3 and len(accepted["edits"]["add_edges"]) == 5
    assert broken["accepted_revision"] is None and broken["candidate_score"] is None
    assert [d["code"] for d in broken["diagnostics"]] == ["missing_endpoint"]
    assert rejected["candidate_score"] == 0.5 and rejected["base_digest"] == head.digest
    assert duplicate["duplicate_of"] == 3 and duplicate["candidate_digest"] == rejected["candidate_digest"]
    assert all(r["model_calls"] == 1 and isinstance(r["cost"], str) for r in rounds)


def test_runs_are_listed_newest_first_in_cursor_pages(api_client, reader, lab):
    runs = finished_runs(lab, 3)
    first = api_client.get(f"{LAB}?limit=2", token=reader).json()
    assert [item["id"] for item in first["items"]] == [runs[2].pk, runs[1].pk]
    assert first["items"][0]["status"] == "cancelled" and first["next_cursor"]
    second = api_client.get(f"{LAB}?limit=2&cursor={first['next_cursor']}", token=reader).json()
    assert [item["id"] for item in second["items"]] == [runs[0].pk]
    assert second["next_cursor"] is None
    assert_error(api_client.get(f"{LAB}?cursor=not-ours", token=reader), 400, "bad_cursor")
    assert_error(api_client.get(f"{LAB}?limit=0", token=reader), 422, "invalid")


def test_reads_need_a_token_with_graphs_read_and_stay_inside_the_workspace(
    api_client, reader, outsider_token, make_token, viewer, lab, other
):
    run = start(lab)
    theirs = finished_runs(other, 1)[0]
    paths = [LAB, f"{LAB}/{run.pk}", f"{LAB}/{run.pk}/rounds"]
    unscoped = make_token(viewer, "trajectories:read")
    for path in paths:
        assert api_client.get(path, token=reader).status_code == 200
        assert_error(api_client.get(path), 401, "unauthorized")
        assert_error(api_client.get(path, token=outsider_token), 401)
        assert_error(api_client.get(path, token=unscoped), 403, "missing_scope")
    assert_error(api_client.get(f"{LAB}/{theirs.pk}", token=reader), 404)
    assert_error(api_client.get(f"{LAB}/{theirs.pk}/rounds", token=reader), 404)
    assert_error(api_client.get(f"{LAB}/999999", token=reader), 404)
    assert_error(api_client.get("/api/v1/graphs/nope/evolutions", token=reader), 404)
    assert [item["id"] for item in api_client.get(LAB, token=reader).json()["items"]] == [run.pk]


# -- cancel ----------------------------------------------------------------------------------------------------------


def test_an_operator_cancels_an_open_run_once(api_client, runner, lab):
    run = start(lab)
    response = api_client.post(f"{LAB}/{run.pk}/cancel", token=runner)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["stopped_reason"]) == ("cancelled", "cancelled") and body["finished_at"]
    assert_error(api_client.post(f"{LAB}/{run.pk}/cancel", token=runner), 409, "run_ended")
    assert AuditEvent.objects.filter(verb="evolution.cancel").count() == 1


def test_cancelling_a_running_run_asks_it_to_stop_at_its_next_stage(api_client, runner, lab):
    run = start(lab)
    EvolutionRun.objects.filter(pk=run.pk).update(  # a worker holds the run
        status="running", lease_owner="elsewhere", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    body = api_client.post(f"{LAB}/{run.pk}/cancel", token=runner).json()
    assert (body["status"], body["cancel_requested"]) == ("running", True)


def test_cancelling_needs_the_scope_the_role_and_the_run_of_this_workspace(
    api_client, runner, reader, operator, lab, other
):
    run = start(lab)
    theirs = start(other)
    assert_error(api_client.post(f"{LAB}/{run.pk}/cancel"), 401)
    assert_error(api_client.post(f"{LAB}/{run.pk}/cancel", token=reader), 403, "missing_scope")
    assert_error(api_client.post(f"{LAB}/{theirs.pk}/cancel", token=runner), 404)
    user_roles_set(actor=Actor.system(), user=operator, roles=[])
    assert_error(api_client.post(f"{LAB}/{run.pk}/cancel", token=runner), 403, "missing_scope")
    assert set(EvolutionRun.objects.values_list("status", flat=True)) == {"queued"}


# -- query counts ----------------------------------------------------------------------------------------------------


def _queries(api_client, path, token) -> int:
    api_client.get(path, token=token)  # the token's first use records its last-used time
    with CaptureQueriesContext(connection) as captured:
        assert api_client.get(path, token=token).status_code == 200
    return len(captured)


def test_the_list_and_the_rounds_take_a_fixed_number_of_queries(
    api_client, reader, lab, operator, django_assert_max_num_queries
):
    finished_runs(lab, 1)
    one = _queries(api_client, LAB, reader)
    finished_runs(lab, 4)
    assert _queries(api_client, LAB, reader) == one
    with django_assert_max_num_queries(3):  # the token, the workspace, the page with who started each run
        api_client.get(LAB, token=reader)
    run = run_inline(start(lab, rounds=1, user=operator))
    short = _queries(api_client, f"{LAB}/{run.pk}/rounds", reader)
    longer = run_inline(start(lab, rounds=3, user=operator))
    assert _queries(api_client, f"{LAB}/{longer.pk}/rounds", reader) == short
    with django_assert_max_num_queries(4):  # … the run, its rounds with their accepted revisions
        api_client.get(f"{LAB}/{longer.pk}/rounds", token=reader)
    with django_assert_max_num_queries(3):
        api_client.get(f"{LAB}/{longer.pk}", token=reader)


@pytest.mark.django_db(transaction=True)
def test_with_eager_celery_a_started_run_runs_to_its_end_after_the_request_commits(api_client, settings, operator):
    assert settings.CELERY_TASK_ALWAYS_EAGER
    make_workspace("lab", task_description="two-hop question answering over a small corpus")
    _, token = api_token_create(actor=Actor.system(), user=operator, name="ops", scopes=["evolutions:run"])
    body = api_client.post(LAB, {"rounds": 4}, token=token).json()
    assert body["status"] == "queued"  # the answer describes the run as it was started
    run = EvolutionRun.objects.get(pk=body["id"])
    assert (run.status, run.rounds_done, run.best_score) == ("succeeded", 4, 1.0)
