"""What one round of a run costs the database (issue 29): the queries and the commits of each step, counted on a
run whose every round refines, measures, accepts and records a candidate (the shape of bench/evolve.py), so the
batching of a round's checkpoints into three transactions cannot quietly grow back."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from psycopg.pq import TransactionStatus

from accounts.services import Actor
from graphs import certification_services
from graphs.demo import TWO_HOP_GRAPH
from graphs.evolution import services
from graphs.evolution.services import evolution_start, evolution_step
from graphs.models import GraphCertification
from graphs.services import workspace_create
from llm.core import ModelResponse, Usage

from .records import revised_edge

pytestmark = pytest.mark.postgres
ROUNDS = 4
# A round's step: claim and read the run (one statement) with, in the same round trip, the chains' heads and the
# ledger's totals; the model call's ledger row; checkpoint #1 with the traces and the call's reply, and checkpoint #2,
# each one statement with the meter that commits by itself; the record (decision checkpoint, graph and the rejection
# memory's new entry with the run's progress in one statement, sent with the split decision (the split's upsert and
# the decision's row in one statement) and the active revision's read; the round row with its ledger totals, and the
# two audit events in one INSERT), which also hands the run over to its next step (the lease given up). Statements
# sent in one round trip count as one. (Its candidate is certified when the run ends, if no later round supersedes it.)
MAX_QUERIES_PER_ROUND = 7
# The first round's certificate is issued in its record from the round's own evaluations (the retained graph is the
# active one): uplift's statements for it come on top.
MAX_QUERIES_FIRST_ROUND = 17
COMMITS_PER_ROUND = 5  # claim, the model call's row, checkpoint #1 (with its reply), checkpoint #2, record
NOT_COUNTED = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "SET LOCAL")


class RevisingModel:
    """A refiner that rewrites one edge's guidance every time it is asked: a new, valid candidate each round."""

    provider = "scripted"
    model_id = "revising"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request):
        self.calls += 1
        reply = revised_edge(f"Read the top hit before answering (revision {self.calls}).")
        return ModelResponse(text=json.dumps(reply), usage=Usage(input_tokens=300, output_tokens=40))


@pytest.fixture
def commits(monkeypatch):
    """How many times the test's connection committed: a transaction of the steps that wrote or read anything (an
    empty one sends no COMMIT), or a write outside one (which commits by itself)."""
    count = [0]
    original = connection.commit

    def counted():
        if connection.connection.info.transaction_status != TransactionStatus.IDLE:
            count[0] += 1
        return original()

    def write_alone(execute, sql, params, many, context):
        statement = sql.lstrip()
        writes = statement.startswith(("INSERT", "UPDATE", "DELETE"))
        writes = writes or (statement.startswith("WITH") and "(UPDATE " in statement)  # the claim: UPDATE … RETURNING
        if not connection.in_atomic_block and writes:
            count[0] += 1
        return execute(sql, params, many, context)

    monkeypatch.setattr(connection, "commit", counted)
    with connection.execute_wrapper(write_alone):
        yield count


def test_each_round_of_a_run_makes_a_bounded_number_of_queries_and_commits(
    transactional_db, settings, monkeypatch, commits
):
    settings.WAYMARK_GRAPH_EVALUATORS = {"steady": "tests.graphs.evolution.evaluators.EveryRoundANewCandidate"}
    monkeypatch.setattr(services, "HEARTBEAT_SECONDS", 3600.0)  # at most one lease renewal a second: none here
    # The test runs the steps itself: the next step and the certifications the rounds queue are not sent (eager
    # Celery would run them inside the step that enqueued them).
    monkeypatch.setattr(services, "_enqueue_on_commit", lambda run_id, countdown=None: None)
    monkeypatch.setattr(certification_services, "enqueue_on_commit", lambda certification_id, countdown=None: None)
    model = RevisingModel()
    monkeypatch.setattr(services, "get_chat_model", lambda: model)
    workspace = workspace_create(actor=Actor.system(), slug="steady", graph=TWO_HOP_GRAPH).workspace
    run = evolution_start(
        actor=Actor.system(),
        workspace=workspace,
        rounds=ROUNDS,
        evaluator="steady",
        config={"cycle_policy": "allow"},
        enqueue=False,
    )
    evolution_step(run_id=run.pk, worker="w")  # the baseline
    per_round = []
    for _ in range(ROUNDS - 1):  # every round but the last, which also ends the run
        commits[0] = 0
        with CaptureQueriesContext(connection) as queries:
            evolution_step(run_id=run.pk, worker="w")
        statements = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(NOT_COUNTED)]
        per_round.append((len(statements), commits[0]))
    run.refresh_from_db()
    assert run.rounds_done == ROUNDS - 1 and not run.is_finished
    assert list(run.rounds.values_list("outcome", flat=True)) == ["accepted"] * (ROUNDS - 1)
    queries_made = [count for count, _ in per_round]
    assert queries_made[0] <= MAX_QUERIES_FIRST_ROUND, f"(queries, commits) of each round: {per_round}"
    assert max(queries_made[1:]) == MAX_QUERIES_PER_ROUND, f"(queries, commits) of each round: {per_round}"
    assert [committed for _, committed in per_round] == [COMMITS_PER_ROUND] * (ROUNDS - 1), per_round
    evolution_step(run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert (run.status, run.stopped_reason, run.rounds_done) == ("succeeded", "max_rounds", ROUNDS)
    certifications = GraphCertification.objects.filter(evolution_run=run).order_by("iteration")
    assert [(c.iteration, c.source) for c in certifications] == [(1, "round"), (ROUNDS, "evaluation")]
