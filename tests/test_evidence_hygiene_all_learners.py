"""No learner reads an evaluation run (issue 25, item 3): one guard over every learner at once.

The runs answering evaluation jobs (source `waymark-evaluation`) are evidence of their own jobs, never training. The
per-learner tests (tests/procedures/test_evidence_hygiene.py, tests/intents/test_production_only.py,
tests/reviews/test_rubric_blinding.py) each check one learner's own rule; this one checks the rule once for all of
them, by what they do rather than by how they query:

- a world where evaluation runs would change every learner's output: more of them than production runs, newest,
  successful, of the same intent and guided by the same graph workspace, with a tool and texts of their own; and, as
  data stored before the rules, an intent candidate citing one and a person's assessment of one;
- every learner entry point runs under a read guard — any row loaded as a model instance that *is* an evaluation
  run or *belongs to* one (a foreign key to it: steps, batch links, assessments…) is recorded — and every periodic
  task of the beat schedule runs too, so a learner added to the schedule is guarded without editing this file;
- then everything the learners produced is scanned: every row of every model written or changed meanwhile (versions,
  replays, proposals, candidates, windows, alerts, drift reports, rubric versions and jobs, evolution runs and their
  jobs, model calls, audit events…), the values they returned and the prompts their models were sent. No evaluation
  run id, no text only evaluation runs hold, no trajectory id in the evaluation namespace may appear. The
  evaluation runs get ids no other row reaches (the id sequence jumps before they are stored), so an id found
  anywhere, under any key, is theirs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from celery import current_app
from django.apps import apps
from django.db import connection, transaction
from django.db.models import ForeignKey, Model

from accounts.services import Actor
from graphs.evolution import services as evolution_services
from graphs.evolution.sources import build_sources
from graphs.models import Workspace
from intents import services as intent_services
from intents.models import IntentBatchRun
from intents.windows import services as windows
from llm.core import ScriptedChatModel
from procedures.mining import services as mining_services
from rubrics import selectors as rubric_selectors
from rubrics import services as rubric_services
from rubrics.models import RaterKind, RubricAssessmentRow, RubricJobStatus
from tests.intents.helpers import reply, tid
from tests.intents.windows_helpers import DAY, T0, activate_taxonomy, candidate, window_of
from tests.procedures.factories import REFUND
from tests.trajectories.factories import answered_run, ingest, run_item, step_item
from trajectories.choices import EVALUATION_SOURCE
from trajectories.models import Run, RunSums, Step

pytestmark = pytest.mark.django_db

WORKSPACE = "hygiene-desk"
EVAL_TEXT = "EVAL-ONLY"  # in every evaluation run's task and observations, in no production run
EVAL_TOOL = "escalate_eval_only"  # a step only evaluation runs take
EVAL_TRAJECTORY = f"{EVALUATION_SOURCE}:"  # how a trajectory id in the evaluation namespace starts
FIRST_EVALUATION_ID = 900_000_001  # above any id a row of the test reaches
RUBRIC = json.dumps(
    {
        "dimensions": [
            {"id": "task_completed", "description": "Did what was asked.", "weight": 2, "required": True},
            {"id": "policy_followed", "description": "Respected the policy.", "weight": 1},
        ]
    }
)


# --- the world ------------------------------------------------------------------------------------------------------


def production_item(n: int, outcome: str = "success") -> dict[str, Any]:
    tools = ("lookup_policy", "issue_refund") if outcome == "success" else ("issue_refund",)
    return run_item(
        intent=REFUND,
        outcome=outcome,
        task=f"Refund order P-{n}: the kettle arrived damaged",
        graph_workspace=WORKSPACE,
        steps=[step_item(tool, ok=outcome == "success") for tool in tools],
    )


def evaluation_item(n: int) -> dict[str, Any]:
    """A live replay's answer as an agent sends it: the production runs' intent and workspace, a step of its own."""
    steps = [
        step_item(tool, arguments={"ticket": f"{EVAL_TEXT}-{n}"}, observation=f"{EVAL_TEXT} answer {n}")
        for tool in ("lookup_policy", EVAL_TOOL, "issue_refund")
    ]
    return run_item(
        intent=REFUND, task=f"{EVAL_TEXT} replay task {n}", graph_workspace=WORKSPACE, steps=steps, score=1.0
    )


@contextmanager
def run_ids_from(first: int) -> Iterator[None]:
    """Runs stored inside get ids from `first` on; the sequence goes back to where it was after."""
    table = Run._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
            (sequence,) = cursor.fetchone()
            cursor.execute(f"SELECT last_value, is_called FROM {sequence}")
            before = cursor.fetchone()
            cursor.execute("SELECT setval(%s, %s, false)", [sequence, first])
        else:
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
            before = cursor.fetchone()
            cursor.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = %s", [first - 1, table])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT setval(%s, %s, %s)", [sequence, *before])
            else:
                cursor.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = %s", [before[0], table])


@dataclasses.dataclass
class World:
    production: list[int]
    evaluation: list[int]
    leaked_candidates: list[str]  # intent candidates citing an evaluation run (stored before the rule)
    version: Any  # a rubric version with assessments
    workspace: Workspace

    @property
    def markers(self) -> tuple[str, ...]:
        ids = tuple(str(pk) for pk in self.evaluation)
        return (EVAL_TEXT, EVAL_TOOL, EVAL_TRAJECTORY, *ids, *self.leaked_candidates)


def rubric_version(operator, production_run: int, django_capture_on_commit_callbacks, monkeypatch):
    model = ScriptedChatModel({"rubric": [RUBRIC]})
    monkeypatch.setattr(rubric_services, "get_chat_model", lambda: model)
    with django_capture_on_commit_callbacks(execute=True):
        job = rubric_services.rubric_propose_start(actor=Actor(user=operator), key=REFUND, run_ids=[production_run])
    job.refresh_from_db()
    assert job.status == RubricJobStatus.SUCCEEDED, job.error
    return job.result_version


@pytest.fixture
def world(operator, reviewer, django_capture_on_commit_callbacks, monkeypatch) -> World:
    production = ingest(*(production_item(n) for n in range(10)), production_item(10, "failure")).created_ids
    with run_ids_from(FIRST_EVALUATION_ID):
        evaluation = [answered_run(evaluation_item(n))[0] for n in range(14)]
    assert min(evaluation) >= FIRST_EVALUATION_ID > max(production)
    assert set(Run.objects.filter(pk__in=evaluation).values_list("source", flat=True)) == {EVALUATION_SOURCE}

    # Intent candidates: a reviewed one under an active taxonomy, two windows of production candidates, and one in
    # each window citing an evaluation run (as a proposal stored it before evaluation runs were left out).
    reviewed = window_of("refund an order", at=T0 - 3 * DAY, run_prefix="test-agent:reviewed-")
    activate_taxonomy([("intent-refund", "refund an order", [reviewed[0].candidate_id])])
    window_of("refund an order", "change a flight", run_prefix="test-agent:w-")
    window_of("refund my order", at=T0 + DAY, run_prefix="test-agent:later-")
    leaked = []
    for at, label, run_id in ((T0 + DAY / 2, "book a hotel", evaluation[0]), (T0 + DAY * 1.5, "cancel", evaluation[1])):
        record = candidate(label, at=at, run=EVAL_TRAJECTORY + Run.objects.get(pk=run_id).external_id)
        record.evidence = [{**record.evidence[0], "run_id": run_id}]
        record.save(update_fields=["evidence"])
        leaked.append(record.candidate_id)

    # A rubric version, a reviewer's blind assessment of a production run, and one of an evaluation run stored
    # before people's assessments of evaluation runs were refused.
    version = rubric_version(operator, production[0], django_capture_on_commit_callbacks, monkeypatch)
    rubric_services.rubric_assessment_submit(
        actor=Actor(user=reviewer),
        run_id=production[1],
        version_id=version.pk,
        items=[{"dimension_id": "task_completed", "score": 0.9, "evidence_steps": [0], "explanation": "done"}],
    )
    RubricAssessmentRow.objects.create(
        run_id=evaluation[2],
        version=version,
        dimension_id="task_completed",
        score=0.1,
        rater=f"user:{operator.pk}",
        rater_kind=RaterKind.PERSON,
        user=operator,
        blind=True,
        explanation=f"{EVAL_TEXT} assessment",
    )
    workspace = Workspace.objects.create(slug=WORKSPACE, title="Hygiene desk")
    return World(production, evaluation, leaked, version, workspace)


# --- the read guard -------------------------------------------------------------------------------------------------


def _run_keys(model: type[Model]) -> list[str]:
    """The attributes of a model's rows that hold a run id: the run's own id, each foreign key to a run."""
    fields = model._meta.concrete_fields
    keys = [field.attname for field in fields if isinstance(field, ForeignKey) and field.related_model is Run]
    return ["id", *keys] if model is Run else keys


class ReadGuard:
    """Records every instance loaded from the database that is an evaluation run or belongs to one."""

    def __init__(self, evaluation: list[int]) -> None:
        self.evaluation = set(evaluation)
        self.reads: list[str] = []
        self.where = "setup"
        self.runs_loaded = 0

    def seen(self, instance: Model) -> None:
        self.runs_loaded += isinstance(instance, Run)
        for key in _run_keys(type(instance)):
            value = instance.__dict__.get(key)
            if value in self.evaluation:
                self.reads.append(f"{self.where}: loaded {type(instance).__name__} with {key}={value}")


@pytest.fixture
def guard(world, monkeypatch) -> ReadGuard:
    guard = ReadGuard(world.evaluation)
    original = Model.from_db.__func__

    def from_db(cls, *args, **kwargs):
        instance = original(cls, *args, **kwargs)
        guard.seen(instance)
        return instance

    monkeypatch.setattr(Model, "from_db", classmethod(from_db))
    return guard


# --- what the learners produced -------------------------------------------------------------------------------------

NOT_LEARNED = ("contenttypes", "sessions", "admin")  # Django's own bookkeeping
# Plain objects of these packages a learner returns are walked through their attributes (dataclasses always are).
LEARNER_PACKAGES = {"procedures", "intents", "reviews", "graphs", "uplift", "llm", "trajectories"}


def scanned_models() -> list[type[Model]]:
    """Every model a learner could write to: all but the runs themselves (with their steps and day totals)."""
    return [
        model
        for model in apps.get_models()
        if model._meta.app_label not in NOT_LEARNED
        and not issubclass(model, RunSums)
        and model not in (Run, Step)
        and not model._meta.proxy
    ]


def snapshot() -> dict[tuple[str, Any], dict[str, Any]]:
    rows = {}
    for model in scanned_models():
        for row in model._base_manager.values():
            rows[(model._meta.label, row.get("id", json.dumps(row, sort_keys=True, default=str)))] = row
    return rows


def written_since(before: dict) -> dict[tuple[str, Any], dict[str, Any]]:
    return {key: row for key, row in snapshot().items() if before.get(key) != row}


def leaks(value: Any, markers: tuple[str, ...], evaluation: set[int], path: str = "") -> Iterator[str]:
    """Where `value` names an evaluation run: its id (anywhere: no other row reaches those ids), a text only
    evaluation runs hold, or a trajectory id in the evaluation namespace."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if value in evaluation:
            yield f"{path} = {value} (an evaluation run's id)"
    elif isinstance(value, str):
        for marker in markers:
            if marker in value:
                yield f"{path} holds {marker!r}: {value[:200]!r}"
                return
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from leaks(key, markers, evaluation, f"{path}[key]")
            yield from leaks(item, markers, evaluation, f"{path}.{key}")
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield from leaks(item, markers, evaluation, f"{path}[{index}]")
    elif isinstance(value, Model):
        fields = {f.attname: value.__dict__.get(f.attname) for f in value._meta.concrete_fields}
        yield from leaks(fields, markers, evaluation, f"{path}<{type(value).__name__}>")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from leaks(getattr(value, field.name), markers, evaluation, f"{path}.{field.name}")
    elif hasattr(value, "__dict__") and type(value).__module__.split(".")[0] in LEARNER_PACKAGES:
        yield from leaks(vars(value), markers, evaluation, f"{path}<{type(value).__name__}>")


# --- the learners ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Learners:
    """Runs entry points under the guard (what they enqueue on commit runs too: Celery is eager) and keeps what they
    returned, by entry point."""

    guard: ReadGuard
    capture: Any
    produced: dict[str, list[Any]] = dataclasses.field(default_factory=dict)

    def run(self, where: str, call, *args, **kwargs):
        self.guard.where = where
        with self.capture(execute=True):
            result = call(*args, **kwargs)
        self.produced.setdefault(where, []).append(result)
        return result


def learn_everything(world: World, learners: Learners, operator, reviewer, monkeypatch, settings) -> None:
    """Every learner entry point, each as its caller starts it, and every periodic task."""
    actor = Actor(user=operator)
    run = learners.run

    # Procedures: periodic mining's count, mining (its split, its version's run lists, its offline replay).
    run("intents_due_for_mining", mining_services.intents_due_for_mining, min_new_runs=1)
    run("procedure_mine", mining_services.procedure_mine, actor=actor, intent=REFUND, live=False)

    # Intents: proposals by the schedule and by hand, each batch answered by a model; windows, novelty, drift.
    cited = {"trajectory_id": tid(Run.objects.get(pk=world.production[0])), "start": 0, "end": 1}
    model = ScriptedChatModel([reply({"intent": "Refund an order", "evidence": [cited]})], cycle=True)
    monkeypatch.setattr(intent_services, "proposal_model", lambda batch, briefs: model)
    settings.WAYMARK_INTENT_PROPOSE_EVERY_MINUTES = 60
    scheduled = run("intent_proposals_schedule", intent_services.intent_proposals_schedule)
    by_hand = run("intent_proposal_start", intent_services.intent_proposal_start, actor=actor, enqueue=False)
    for proposal in (scheduled, by_hand):
        while run("intent_proposal_step", intent_services.intent_proposal_step, run_id=proposal.pk, worker="w"):
            pass
    learners.produced["intent proposal prompts"] = [part for request in model.requests for part in request.parts]
    before = run("window_analyze", windows.window_analyze, actor=actor, start=T0, end=T0 + DAY)
    after = run("window_analyze", windows.window_analyze, actor=actor, start=T0 + DAY, end=T0 + 2 * DAY)
    run("drift_compare", windows.drift_compare, actor=actor, before=before, after=after, matching="medoid")

    # Rubrics: a proposal from the intent's example runs; agreement, for someone who assessed and someone who did not.
    rubric_model = ScriptedChatModel({"rubric": [RUBRIC]})
    monkeypatch.setattr(rubric_services, "get_chat_model", lambda: rubric_model)
    run("example_run_ids", rubric_services.example_run_ids, rubric_services.intent_key(REFUND))
    run("rubric_propose_start", rubric_services.rubric_propose_start, actor=actor, key=REFUND)
    learners.produced["rubric proposal prompts"] = [part for r in rubric_model.requests for part in r.parts]
    for user in (reviewer, operator):
        run("agreement_for", rubric_selectors.agreement_for, user, world.version.rubric, world.version)

    # Graphs: an evolution run's validation tasks (agents evaluator) and the traces its refiner reads, two rounds.
    evolution = run(
        "evolution_start",
        evolution_services.evolution_start,
        actor=actor,
        workspace=world.workspace,
        rounds=1,
        evaluator="agents",
        enqueue=False,
    )
    sources = build_sources(workspace=world.workspace, evaluator="agents", run_id=evolution.pk, config=evolution.config)
    for iteration in (1, 2):
        run("trace_source.collect", sources.trace_source.collect, None, graph_ref=None, iteration=iteration)

    # Every periodic task: a learner added to the beat schedule is guarded without editing this file.
    current_app.loader.import_default_modules()  # every app's tasks module, as a worker imports them
    for name, entry in sorted(settings.CELERY_BEAT_SCHEDULE.items()):
        run(f"beat {name}", lambda task=current_app.tasks[entry["task"]]: task.apply(throw=True).result)


def findings(world: World, guard: ReadGuard, before: dict, produced: dict[str, list[Any]]) -> list[str]:
    """What the guard recorded, and every place a written row or a returned value names an evaluation run."""
    evaluation = set(world.evaluation)
    found = [*guard.reads]
    for (label, pk), row in written_since(before).items():
        found += leaks(row, world.markers, evaluation, f"{label}#{pk}")
    for where, values in produced.items():
        found += leaks(values, world.markers, evaluation, f"{where} returned")
    return found


def _summary(found: list[str], per_place: int = 3) -> str:
    """The findings, at most `per_place` for each place (the text before the first colon), with how many more."""
    by_place: dict[str, list[str]] = {}
    for line in found:
        by_place.setdefault(line.split(":", 1)[0].split("#", 1)[0].split("[", 1)[0], []).append(line)
    lines = []
    for place in by_place.values():
        lines += place[:per_place] + ([f"  … and {len(place) - per_place} more"] if len(place) > per_place else [])
    return "\n".join(lines)


def test_no_learner_reads_an_evaluation_run(
    world, guard, operator, reviewer, django_capture_on_commit_callbacks, monkeypatch, settings
):
    before = snapshot()
    learners = Learners(guard, django_capture_on_commit_callbacks)
    learn_everything(world, learners, operator, reviewer, monkeypatch, settings)

    found = findings(world, guard, before, learners.produced)
    assert not found, "evaluation runs read by learners:\n" + _summary(found)

    # The learners did learn, from the production runs: the guard had something to watch.
    produced, production = learners.produced, set(world.production)
    assert guard.runs_loaded > 0
    (mined,) = produced["procedure_mine"]
    assert mined.created and [step["tool"] for step in mined.version.steps] == ["lookup_policy", "issue_refund"]
    assert set(mined.version.training_run_ids) and set(mined.version.training_run_ids) <= production
    scheduled, by_hand = produced["intent_proposals_schedule"][0], produced["intent_proposal_start"][0]
    for proposal in (scheduled, by_hand):
        proposal.refresh_from_db()
        assert proposal.status == "succeeded", proposal.error
        assert set(IntentBatchRun.objects.filter(batch__run=proposal).values_list("trajectory_run_id", flat=True)) == (
            production
        )
    before_window, after_window = produced["window_analyze"]
    assert (before_window.candidates_count, after_window.candidates_count) == (2, 1)
    assert {row["label"] for row in before_window.novelty} <= {"refund an order", "change a flight"}  # no hotel
    (examples,) = produced["example_run_ids"]
    assert examples and set(examples) <= production
    (proposed,) = produced["rubric_propose_start"]
    proposed.refresh_from_db()
    assert proposed.status == RubricJobStatus.SUCCEEDED and set(proposed.example_run_ids) <= production
    assert [report.rating_count for report in produced["agreement_for"]] == [1, 0]  # rita's; otto assessed none
    (evolution,) = produced["evolution_start"]
    assert len(evolution.config["validation_tasks"]) == len(world.production)
    for traces in produced["trace_source.collect"]:
        assert {trace.meta["run_id"] for trace in traces} == production


def test_the_guard_sees_a_learner_that_reads_an_evaluation_run(world, guard, django_capture_on_commit_callbacks):
    """The guard's own check: a careless learner (every run of the intent, its tasks kept in an audit event) is
    caught twice, by what it loaded and by what it wrote."""
    from accounts.services import audit_record

    def careless_learner():
        runs = list(Run.objects.filter(intent=REFUND).prefetch_related("steps"))
        tasks = sorted(run.task for run in runs if run.outcome == "success")
        with transaction.atomic():
            audit_record(actor=Actor.system(), verb="careless.learn", target=("careless", "1"), after={"tasks": tasks})
        return [run.pk for run in runs]

    before = snapshot()
    learners = Learners(guard, django_capture_on_commit_callbacks)
    learners.run("careless", careless_learner)
    found = findings(world, guard, before, learners.produced)
    first = world.evaluation[0]
    assert f"careless: loaded Run with id={first}" in found
    assert any(line.startswith("careless: loaded Step with run_id=") for line in found)
    assert any(line.startswith("accounts.AuditEvent#") and EVAL_TEXT in line for line in found)
    assert any(line.startswith("careless returned[0][") and f"= {first} (an evaluation" in line for line in found)
