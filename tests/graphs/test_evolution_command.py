"""`manage.py graph evolve | rejections | init --from-text`: the happy paths of spec §9/§10 and every refusal (exit 2,
one line "graph: …", nothing written)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.services import Actor
from graphs.core.twohop import SCRIPTED_REPLIES
from graphs.evolution.services import evolution_start
from graphs.models import EvolutionRound, EvolutionRun, Revision, Workspace
from llm.models import ModelCall
from tests.graphs.factories import make_empty_workspace, make_workspace

pytestmark = pytest.mark.django_db

LAB = ["--workspace", "lab"]


def run(*args):
    out = StringIO()
    call_command("graph", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def refused(*args) -> str:
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert caught.value.returncode == 2
    message = str(caught.value)
    assert message.startswith("graph: ") and "\n" not in message
    return message


@pytest.fixture
def lab():
    return make_workspace("lab", task_description="two-hop question answering over a small corpus")


# -- evolve ----------------------------------------------------------------------------------------------------------


def test_evolve_wait_runs_the_scripted_scenario_here_and_prints_each_round(lab):
    out = run("evolve", *LAB, "--rounds", "4", "--wait")
    lines = out.splitlines()
    run_row = EvolutionRun.objects.get(workspace=lab)
    assert lines[0] == f"lab: evolution run {run_row.pk}: 4 round(s), evaluator two-hop, gate tie"
    rounds = lines[1:5]
    assert [line.split(":")[0] for line in rounds] == ["round 1", "round 2", "round 3", "round 4"]
    assert rounds[0].startswith("round 1: ACCEPTED [scratch_incremental] retained 0.5, candidate 1.0")
    assert rounds[1].startswith("round 2: STRUCTURAL_FAILURE [static_incremental] retained -, candidate -")
    assert "missing_endpoint" in rounds[1]
    assert rounds[2].startswith("round 3: REJECTED [static_incremental] retained 1.0, candidate 0.5")
    assert rounds[3].startswith("round 4: DUPLICATE_CANDIDATE") and rounds[3].endswith("duplicate of round 3")
    assert lines[5:] == ["validation: baseline 0.5 -> retained 1.0", "stopped: max_rounds (succeeded), 4 round(s)"]
    assert run_row.status == EvolutionRun.Status.SUCCEEDED and run_row.started_by is None
    assert [g.meta["origin"] for g in Revision.objects.filter(workspace=lab, kind="graph").order_by("seq")] == [
        "skeleton",
        "accepted",
    ]


def test_evolve_without_wait_queues_the_run_and_says_how_to_watch_it(lab, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        out = run("evolve", *LAB, "--rounds", "2", "--gate", "strict", "--max-model-calls", "3")
    run_row = EvolutionRun.objects.get(workspace=lab)
    assert len(callbacks) == 1  # the first step goes to a worker once the start commits
    assert run_row.status == EvolutionRun.Status.QUEUED
    assert (run_row.rounds_planned, run_row.gate, run_row.budget["max_model_calls"]) == (2, {"kind": "strict"}, 3)
    assert out.splitlines()[0].startswith(f"lab: evolution run {run_row.pk} queued (2 round(s)")
    assert f"/api/v1/graphs/lab/evolutions/{run_row.pk}" in out and f"/graphs/lab/evolutions/{run_row.pk}/," in out


def test_evolve_stops_on_its_budget_with_the_chains_untouched(lab):
    out = run("evolve", *LAB, "--rounds", "4", "--max-evaluations", "1", "--wait")
    assert out.splitlines()[-1] == "stopped: budget_exhausted (budget_exhausted), 0 round(s)"
    assert "validation: baseline 0.5 -> retained 0.5" in out
    assert Revision.objects.filter(workspace=lab, kind="graph").count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workspace", "nope"], "graph: no workspace named 'nope'"),
        ([*LAB, "--rounds", "0"], "graph: --rounds must be a whole number from 1 to 50, not '0'"),
        ([*LAB, "--rounds", "many"], "graph: --rounds must be a whole number from 1 to 50, not 'many'"),
        ([*LAB, "--rounds", "51"], "graph: --rounds must be a whole number from 1 to 50, not '51'"),
        ([*LAB, "--evaluator", "oracle"], "graph: unknown evaluator 'oracle'; choose one of two-hop, agents"),
        ([*LAB, "--max-model-calls", "-1"], "graph: --max-model-calls must be a whole number of 0 or more"),
        ([*LAB, "--max-seconds", "soon"], "graph: --max-seconds must be a number of seconds, 0 or more"),
    ],
)
def test_evolve_refuses_bad_input_and_starts_nothing(lab, args, message):
    assert refused("evolve", *args).startswith(message)
    assert not EvolutionRun.objects.exists()


def test_evolve_refuses_a_second_run_while_one_is_open(lab):
    evolution_start(actor=Actor.system(), workspace=lab, rounds=1, evaluator="two-hop", enqueue=False)
    assert "has a run in progress" in refused("evolve", *LAB, "--wait")
    assert EvolutionRun.objects.count() == 1


# -- rejections ------------------------------------------------------------------------------------------------------


def test_rejections_prints_the_operator_view_and_what_the_refiner_sees(lab):
    run("evolve", *LAB, "--rounds", "4", "--wait")
    markdown = run("rejections", *LAB)
    assert markdown.startswith("# Rejection memory\n\n4 round(s) through iteration 4:")
    for outcome in ("accepted", "structural_failure", "rejected", "duplicate_candidate"):
        assert outcome.replace("_", " ") in markdown or outcome in markdown
    refiner = run("rejections", *LAB, "--refiner-view")
    assert not refiner.startswith("# Rejection memory")
    assert refiner != markdown and "missing_endpoint" in refiner
    # --full N keeps only the newest N non-accepted rounds in full: fewer lines, same rounds
    assert len(run("rejections", *LAB, "--full", "0").splitlines()) < len(markdown.splitlines())
    assert len(run("rejections", *LAB, "--refiner-view", "--full", "0")) < len(refiner)


def test_rejections_of_a_workspace_with_no_rounds_says_so_and_refuses_bad_input(lab):
    assert run("rejections", *LAB).startswith("# Rejection memory\n\nNo rounds recorded through iteration 0")
    assert run("rejections", *LAB, "--refiner-view").strip()
    assert refused("rejections", "--workspace", "nope") == "graph: no workspace named 'nope'"
    assert refused("rejections", *LAB, "--full", "x").startswith("graph: --full must be a whole number")


# -- init --from-text ------------------------------------------------------------------------------------------------


@pytest.fixture
def problem(tmp_path):
    path = tmp_path / "problem.txt"
    path.write_text("Answer two-hop questions over a small corpus with search, read and answer.\n")
    return path


def script(tmp_path, *replies) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def test_init_from_text_bootstraps_a_new_workspace_from_the_tool_list(tmp_path, problem):
    model = script(tmp_path, SCRIPTED_REPLIES[0])
    out = run("init", "--workspace", "boot", "--from-text", str(problem), "--tools", "search,read", "answer",
              "--model", model)  # fmt: skip
    head = Revision.objects.get(workspace__slug="boot", kind="graph")
    assert head.meta == {
        "origin": "bootstrapped",
        "solutions": 0,
        "mode": "scratch_onetime",
        "refiner_calls": 1,
        "iteration": 0,
    }
    lines = out.splitlines()
    assert lines[0].startswith("warning:cycle_repaired [read -PROVIDES_INPUT_FOR-> search]")  # the repair policy
    assert lines[1] == f"boot: seeded graph {head.short_digest} (bootstrapped) with 5 node(s), 4 edge(s)"
    assert "bootstrapped from 0 worked solution(s)" in out and "a starting point, not a validated graph" in out
    workspace = Workspace.objects.get(slug="boot")
    assert workspace.active_revision is None  # a model-written graph reaches agents only through a review
    assert workspace.task_description.startswith("Answer two-hop questions")
    call = ModelCall.objects.get()
    assert (call.subject_type, call.subject_id, call.role) == ("graphs.bootstrap", "boot", "refiner")
    assert "search, read, answer" in call.request_preview


def test_init_from_text_seeds_an_empty_workspace_with_worked_solutions(tmp_path, problem):
    make_empty_workspace("bare")
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "one.txt").write_text("search 'Alice Martin', read it, answer the fact")
    (solutions / "two.md").write_text("search, read, search the bridge, read, answer")
    (solutions / ".hidden").write_bytes(b"\xff\xfe")  # skipped
    model = script(tmp_path, SCRIPTED_REPLIES[0])
    out = run("init", "--workspace", "bare", "--from-text", str(problem), "--solutions", str(solutions), "--model",
              model, "--cycle-policy", "allow")  # fmt: skip
    head = Revision.objects.get(workspace__slug="bare", kind="graph")
    assert (head.meta["origin"], head.meta["solutions"]) == ("bootstrapped", 2)
    assert "(bootstrapped) with 5 node(s), 5 edge(s)" in out  # the cycle is allowed
    assert "bootstrapped from 2 worked solution(s)" in out


def test_init_from_text_refuses_and_writes_nothing(tmp_path, problem):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "s.txt").write_bytes(b"caf\xe9")
    no_files = tmp_path / "none"
    no_files.mkdir()
    (no_files / ".keep").write_text("hidden")
    bad_script = tmp_path / "bad.json"
    bad_script.write_text("[1, 2]")
    good = script(tmp_path, SCRIPTED_REPLIES[0])
    broken = script(tmp_path, SCRIPTED_REPLIES[1])  # an edge to a node that does not exist
    text = ["init", "--workspace", "new", "--from-text"]
    cases = [
        ([*text, str(problem), "--tools", "a"], "needs --model"),
        ([*text, str(empty), "--tools", "a", "--model", good], "is empty"),
        ([*text, str(tmp_path / "missing.txt"), "--tools", "a", "--model", good], "cannot read the problem statement"),
        ([*text, str(problem), "--solutions", str(latin), "--model", good], "cannot read the solution"),
        ([*text, str(problem), "--solutions", str(no_files), "--model", good], "holds no text files"),
        ([*text, str(problem), "--solutions", str(problem), "--model", good], "must be a directory"),
        ([*text, str(problem), "--model", good], "needs --tools"),
        ([*text, str(problem), "--tools", "search", "--model", "openai:gpt"], "unsupported model"),
        ([*text, str(problem), "--tools", "a", "--model", f"scripted:{bad_script}"], "cannot read scripted replies"),
        ([*text, str(problem), "--tools", "a", "--model", f"scripted:{tmp_path}/nope"], "cannot read scripted replies"),
        ([*text, str(problem), "--tools", "a", "--model", good, "--graph", str(problem)], "not both"),
        (["init", "--workspace", "new", "--tools", "a"], "only apply with --from-text"),
        (["init", "--workspace", "new", "--solutions", str(no_files)], "only apply with --from-text"),
        (["init", "--workspace", "new", "--model", good], "only apply with --from-text"),
        ([*text, str(problem), "--tools", "a", "--model", good, "--retries", "x"], "--retries must be a whole number"),
    ]
    for args, message in cases:
        assert message in refused(*args), args
    refusal = refused(*text, str(problem), "--tools", "search,read,answer", "--model", broken, "--retries", "0")
    assert refusal.startswith("graph: bootstrap refused: error:missing_endpoint")
    make_workspace("full")
    assert refused("init", "--workspace", "full", "--from-text", str(problem), "--tools", "a", "--model", good) == (
        "graph: full already has a graph"
    )
    assert not Workspace.objects.filter(slug="new").exists()
    assert not EvolutionRound.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_evolve_wait_prints_the_same_rounds_when_eager_celery_runs_the_steps_inline(settings):
    """Each step enqueues the next on commit; with eager Celery and real commits that runs the rest of the run inside
    the first step. The command prints what was recorded either way."""
    assert settings.CELERY_TASK_ALWAYS_EAGER
    make_workspace("lab", task_description="two-hop question answering over a small corpus")
    lines = run("evolve", *LAB, "--rounds", "4", "--wait").splitlines()
    assert [line.split(":")[1].split()[0] for line in lines[1:5]] == [
        "ACCEPTED",
        "STRUCTURAL_FAILURE",
        "REJECTED",
        "DUPLICATE_CANDIDATE",
    ]
    assert lines[5:] == ["validation: baseline 0.5 -> retained 1.0", "stopped: max_rounds (succeeded), 4 round(s)"]
