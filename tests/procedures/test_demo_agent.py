"""The demo agent: its environment's rules decide success, a graph's shape decides a graph evaluation; over real
HTTP one loop claims and answers live replay jobs and graph evaluation jobs alike."""

import io

import pytest
from django.core.cache import cache
from django.core.management import call_command

from accounts.services import Actor
from graphs.demo import LAB_SLUG
from procedures.demo_agent import MAX_WALK_STEPS, simulate_graph_run, simulate_job, simulate_run
from procedures.mining import services as mining_services
from procedures.models import ReplayStatus, VersionStatus
from procedures.replay.services import live as live_replay_services
from trajectories.models import Job, JobStatus, Run

from .factories import REFUND, refund_runs


def payload(*tools, task="Refund order ORD-4101 please"):
    return {
        "replay": 1,
        "arm": "candidate",
        "case_run_id": 7,
        "task": task,
        "intent": REFUND,
        "procedure": {"steps": [{"tool": tool, "arguments": {}} for tool in tools]},
    }


def test_a_refund_after_the_policy_lookup_succeeds():
    run = simulate_run(payload("lookup_policy", "issue_refund"))
    assert run["outcome"] == "success"
    assert [step["tool"] for step in run["steps"]] == ["lookup_policy", "issue_refund"]
    assert run["steps"][1]["arguments"] == {"order_id": "ORD-4101"}


def test_a_refund_without_the_policy_lookup_fails():
    run = simulate_run(payload("issue_refund", "notify"))
    assert run["outcome"] == "failure"
    assert run["steps"][-1]["ok"] is False and "lookup_policy" in run["steps"][-1]["observation"]


def test_an_empty_procedure_fails_and_the_simulation_is_deterministic():
    assert simulate_run(payload())["outcome"] == "failure"
    assert simulate_run(payload("lookup_policy")) == simulate_run(payload("lookup_policy"))


def test_with_the_server_down_it_reports_and_exits_under_once(db):
    err = io.StringIO()
    call_command("run_demo_agent", "--once", "--token", "wm_x_y", "--url", "http://127.0.0.1:9", stderr=err)
    assert "demo agent:" in err.getvalue()


@pytest.mark.postgres
def test_a_refused_token_is_reported_and_exits_under_once(transactional_db, live_server):
    err = io.StringIO()
    call_command("run_demo_agent", "--once", "--token", "wm_nope_nope", "--url", live_server.url, stderr=err)
    assert "demo agent: the server refused the token (401)" in err.getvalue()


@pytest.mark.postgres
def test_it_answers_every_live_replay_job_over_http(
    transactional_db, live_server, operator, make_token, make_agent_token
):
    refund_runs(successes=10, failures=2)
    result = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    live = result.version.replays.get(mode="live")
    token = make_agent_token("evaluations:run")
    out = io.StringIO()

    call_command("run_demo_agent", "--once", "--token", token, "--url", live_server.url, stdout=out)

    jobs = Job.objects.filter(subject=live_replay_services.replay_subject(live))
    assert jobs.exists() and set(jobs.values_list("status", flat=True)) == {JobStatus.DONE}
    assert f"answered {jobs.count()} job(s)" in out.getvalue()
    assert Run.objects.filter(source="waymark-evaluation").count() == jobs.count()
    live.refresh_from_db()
    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is True
    result.version.refresh_from_db()
    assert result.version.status == VersionStatus.READY


def node(node_id, node_type="ACTION"):
    return {"id": node_id, "type": node_type, "description": f"Do {node_id}"}


def edge(source, target):
    return {"source": source, "target": target, "relation": "LEADS_TO", "condition": None}


def graph_payload(nodes, edges, task="Who wrote it?"):
    sentinels = [node("Start", "STATUS"), node("End", "STATUS")]
    return {
        "workspace": "lab",
        "graph_ref": "ab" * 32,
        "graph": {"nodes": sentinels + nodes, "edges": edges},
        "purpose": "baseline",
        "iteration": 0,
        "task_id": "t-1",
        "task": task,
    }


def test_a_graph_walk_from_start_to_end_through_actions_succeeds():
    nodes = [node("search"), node("think", "REASONING"), node("answer")]
    edges = [edge("Start", "search"), edge("search", "think"), edge("think", "answer"), edge("answer", "End")]
    run = simulate_graph_run(graph_payload(nodes, edges))
    assert run["outcome"] == "success"
    assert [step["tool"] for step in run["steps"]] == ["search", "answer"]
    assert run["steps"][0]["arguments"] == {"task": "Who wrote it?"} and run["steps"][0]["observation"]
    assert run["task"] == "Who wrote it?" and run["graph_workspace"] == "lab"
    assert run["metadata"]["graph_ref"] == "ab" * 32


def test_the_walk_prefers_unvisited_targets_in_document_order():
    nodes = [node("a"), node("b")]
    edges = [edge("Start", "a"), edge("a", "Start"), edge("a", "b"), edge("a", "End"), edge("b", "End")]
    run = simulate_graph_run(graph_payload(nodes, edges))
    assert [step["tool"] for step in run["steps"]] == ["a", "b"] and run["outcome"] == "success"


@pytest.mark.parametrize(
    "nodes, edges",
    [
        ([], [edge("Start", "End")]),  # the skeleton: End without an action
        ([node("a")], [edge("Start", "a")]),  # a dead end
        ([node("a")], [edge("a", "End")]),  # nothing leaves Start
    ],
)
def test_a_walk_that_misses_end_or_every_action_fails(nodes, edges):
    assert simulate_graph_run(graph_payload(nodes, edges))["outcome"] == "failure"


def test_a_cycle_stops_after_the_step_limit_and_the_walk_is_deterministic():
    nodes = [node("a"), node("b")]
    payload = graph_payload(nodes, [edge("Start", "a"), edge("a", "b"), edge("b", "a"), edge("b", "End")][:3])
    run = simulate_graph_run(payload)
    assert run["outcome"] == "failure" and len(run["steps"]) == MAX_WALK_STEPS
    assert simulate_graph_run(payload) == run


def test_jobs_are_simulated_by_kind():
    assert simulate_job("procedure_replay", payload("lookup_policy")) == simulate_run(payload("lookup_policy"))
    graph = graph_payload([node("a")], [edge("Start", "a"), edge("a", "End")])
    assert simulate_job("graph_evaluation", graph) == simulate_graph_run(graph)
    with pytest.raises(ValueError):
        simulate_job("something_else", {})


@pytest.mark.postgres
def test_one_loop_answers_graph_evaluation_and_replay_jobs_over_http(
    transactional_db, live_server, operator, make_token, make_agent_token
):
    from graphs.core.twohop import ROUND_1_BUILD
    from graphs.evolution.jobs import JOB_KIND
    from graphs.evolution.services import evolution_start, evolution_step
    from graphs.models import EvolutionRun
    from graphs.services import workspace_create
    from tests.trajectories.factories import ingest, run_item, step_item

    cache.clear()
    lab = workspace_create(actor=Actor.system(), slug=LAB_SLUG, task_description="answer questions").workspace
    ingest(
        *[
            run_item(task=f"Question {n}", intent="qa", graph_workspace=LAB_SLUG, steps=[step_item("search")])
            for n in range(3)
        ]
    )
    evolution = evolution_start(
        actor=Actor(user=operator), workspace=lab, rounds=1, evaluator="agents", script=[ROUND_1_BUILD], enqueue=False
    )
    evolution_step(run_id=evolution.pk, worker="w")
    evolution.refresh_from_db()
    assert evolution.status == EvolutionRun.Status.WAITING
    assert Job.objects.filter(kind=JOB_KIND, status=JobStatus.QUEUED).count() == 3
    refund_runs(successes=10, failures=2)
    live = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True).version.replays.get(
        mode="live"
    )
    out = io.StringIO()

    call_command(
        "run_demo_agent",
        "--once",
        "--token",
        make_agent_token("evaluations:run"),
        "--url",
        live_server.url,
        stdout=out,
    )

    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.DONE}
    assert f"answered {Job.objects.count()} job(s)" in out.getvalue()
    graph_jobs = list(Job.objects.filter(kind=JOB_KIND).select_related("result_run").order_by("id"))
    for job in graph_jobs:
        answer = job.result_run
        assert answer.task == job.payload["task"] and answer.graph_workspace == LAB_SLUG
        assert answer.metadata["graph_ref"] == job.payload["graph_ref"]
    outcomes = {(job.payload["purpose"], job.result_run.outcome) for job in graph_jobs}
    # The seed graph is Start → End (no action): its walk fails; round 1's candidate leads through its actions.
    assert outcomes == {("baseline", "failure"), ("candidate", "success")}
    evolution.refresh_from_db()
    assert evolution.status == EvolutionRun.Status.SUCCEEDED, evolution.error
    assert (evolution.baseline_score, evolution.rounds.get().outcome) == (0.0, "accepted")
    live.refresh_from_db()
    assert live.status == ReplayStatus.DONE and live.gate_report["passed"] is True
    cache.clear()


@pytest.mark.postgres
def test_it_leaves_the_jobs_of_anyone_elses_procedures_and_workspaces_alone(
    transactional_db, live_server, operator, make_agent_token
):
    """Simulated answers are the demo's evidence only: a live replay of the user's own intent, and graph evaluation
    jobs of the user's own workspace, wait for a real agent."""
    from graphs.core.twohop import ROUND_1_BUILD
    from graphs.evolution.services import evolution_start, evolution_step
    from graphs.services import workspace_create
    from tests.trajectories.factories import ingest, run_item, step_item

    ingest(*[run_item(intent="warranty_claim", steps=[step_item("lookup_policy")]) for _ in range(10)])
    mine = mining_services.procedure_mine(actor=Actor(user=operator), intent="warranty_claim", live=True)
    theirs = mine.version.replays.get(mode="live")
    support = workspace_create(actor=Actor.system(), slug="support", task_description="answer").workspace
    ingest(*[run_item(task=f"Question {n}", graph_workspace="support") for n in range(2)])
    evolution = evolution_start(
        actor=Actor(user=operator),
        workspace=support,
        rounds=1,
        evaluator="agents",
        script=[ROUND_1_BUILD],
        enqueue=False,
    )
    evolution_step(run_id=evolution.pk, worker="w")
    waiting = set(Job.objects.values_list("pk", flat=True))
    assert waiting and Job.objects.filter(subject=live_replay_services.replay_subject(theirs)).exists()
    out = io.StringIO()

    call_command(
        "run_demo_agent", "--once", "--token", make_agent_token("evaluations:run"), "--url", live_server.url, stdout=out
    )

    assert "answered 0 job(s)" in out.getvalue()
    assert set(Job.objects.filter(pk__in=waiting).values_list("status", flat=True)) == {JobStatus.QUEUED}
    assert not Run.objects.filter(source="waymark-evaluation").exists()


def test_with_no_graph_the_agent_answers_unguided_and_gets_some_tasks_right():
    runs = [
        simulate_graph_run({"workspace": "lab", "graph_ref": None, "graph": None, "task_id": f"t{n}", "task": "Q?"})
        for n in range(60)
    ]
    successes = sum(run["outcome"] == "success" for run in runs)
    assert 5 <= successes <= 35  # about one in three, never all: the guided walk is what it is measured against
    assert all(len(run["steps"]) == 1 and run["steps"][0]["tool"] == "answer" for run in runs)
    assert all(run["steps"][0]["ok"] == (run["outcome"] == "success") for run in runs)
    again = simulate_graph_run({"workspace": "lab", "graph_ref": None, "graph": None, "task_id": "t3", "task": "Q?"})
    assert again == runs[3]  # deterministic
