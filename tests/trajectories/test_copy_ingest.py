"""The ingest's PostgreSQL writer (INSERT … ON CONFLICT for runs, binary COPY for steps) against the portable one
(bulk_create, what SQLite uses): all or nothing, idempotent, one run under concurrent batches, the same stored rows.

The suite runs on PostgreSQL, so the portable writer is exercised by turning the vendor check off (`path` fixture).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from django.db import DataError, IntegrityError, connection, connections

from accounts.models import AuditEvent
from trajectories import copy_ingest, services
from trajectories.core.steps import normalize_steps
from trajectories.models import Run, Step
from trajectories.schemas import StepIn

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["copy", "orm"])
def path(request, monkeypatch):
    """Which writer `run_ingest_batch` uses: PostgreSQL's COPY writer or the portable bulk_create one."""
    monkeypatch.setattr(services, "_uses_copy", lambda: request.param == "copy")
    return request.param


@pytest.fixture
def copy_calls(monkeypatch):
    calls = []
    real = copy_ingest.insert_runs

    def spy(**kwargs):
        calls.append(len(kwargs["runs"]))
        return real(**kwargs)

    monkeypatch.setattr(copy_ingest, "insert_runs", spy)
    return calls


def _nothing_stored() -> bool:
    return not Run.objects.exists() and not Step.objects.exists() and not AuditEvent.objects.exists()


def _batch(n: int = 20) -> list[dict]:
    return [
        run_item(external_id=f"batch-{i}", steps=[step_item("lookup_policy"), step_item("notify")]) for i in range(n)
    ]


@pytest.mark.django_db
def test_the_postgresql_path_writes_through_copy(copy_calls):
    result = ingest(*_batch(3))
    assert copy_calls == [3] and result.created == 3 and result.step_count == 6
    assert Step.objects.filter(run_id__in=result.created_ids).count() == 6


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("where", "error"),
    [("step", IntegrityError), ("run", DataError)],
)
def test_a_value_the_database_refuses_late_in_the_batch_leaves_nothing(path, monkeypatch, where, error):
    """The last step of the last run breaks a CHECK constraint (negative tokens), or the last run a column length:
    the runs and steps written before it in the same batch are gone too."""
    real_prepare = services._prepare

    def prepare(item, redactor, now):
        prepared = real_prepare(item, redactor, now)
        if item.external_id != "batch-19":
            return prepared
        if where == "step":
            last = list(prepared.steps[-1])
            last[services.STEP_COLUMNS.index("input_tokens")] = -1
            return services._Prepared(key=prepared.key, run=prepared.run, steps=[*prepared.steps[:-1], tuple(last)])
        run = list(prepared.run)
        run[services.RUN_COLUMNS.index("intent")] = "i" * 300  # varchar(200)
        return services._Prepared(key=prepared.key, run=tuple(run), steps=prepared.steps)

    monkeypatch.setattr(services, "_prepare", prepare)
    with pytest.raises(error):
        ingest(*_batch())
    assert _nothing_stored()


@pytest.mark.django_db
def test_a_failure_after_the_copy_rolls_the_copied_rows_back(path, monkeypatch, copy_calls):
    def audit_fails(**kwargs):
        assert Step.objects.count() == 40  # the rows are in, inside the transaction
        raise RuntimeError("audit store down")

    monkeypatch.setattr(services, "audit_record", audit_fails)
    with pytest.raises(RuntimeError, match="audit store down"):
        ingest(*_batch())
    assert copy_calls == ([20] if path == "copy" else [])
    assert _nothing_stored()


@pytest.mark.django_db
def test_a_resent_batch_changes_nothing_and_answers_the_same_ids(path):
    first = ingest(*_batch(5))
    stored = list(Run.objects.order_by("id").values_list("id", "task"))
    steps = Step.objects.count()
    again = ingest(*_batch(5))
    assert again.created_ids == [] and again.existing_ids == first.created_ids and again.step_count == 0
    assert list(Run.objects.order_by("id").values_list("id", "task")) == stored and Step.objects.count() == steps
    mixed = ingest(run_item(external_id="batch-2", task="changed"), run_item(external_id="new"))
    assert mixed.existing_ids == [first.created_ids[2]] and mixed.created == 1
    assert Run.objects.get(pk=first.created_ids[2]).task != "changed"
    assert AuditEvent.objects.filter(verb="trajectories.ingest").count() == 2  # none for the pure resend


@pytest.mark.django_db
def test_a_run_stored_between_the_look_and_the_insert_is_answered_as_existing(monkeypatch, copy_calls):
    """ON CONFLICT skips it (no error, no retry of the batch); its id is looked up and its steps are not copied."""
    stored = ingest(run_item(external_id="raced")).created_ids[0]
    real_lookup = services._existing_ids
    calls = []

    def lookup_that_misses_once(prepared):
        calls.append([p.key[1] for p in prepared])
        return {} if len(calls) == 1 else real_lookup(prepared)

    monkeypatch.setattr(services, "_existing_ids", lookup_that_misses_once)
    result = ingest(run_item(external_id="raced"), run_item(external_id="fresh"))
    assert result.existing_ids == [stored] and result.created == 1 and result.step_count == 2
    assert calls == [["raced", "fresh"], ["raced"]] and copy_calls == [1, 2]
    assert Run.objects.filter(external_id="raced").count() == 1
    assert Step.objects.filter(run_id=stored).count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_batches_of_the_same_run_store_it_once(monkeypatch):
    """Both batches look before either inserts (a barrier holds them there): the second INSERT waits for the first
    batch's commit, then skips the run and answers its id."""
    barrier = threading.Barrier(2, timeout=20)
    real_insert = copy_ingest.insert_runs

    def insert_together(**kwargs):
        barrier.wait()
        return real_insert(**kwargs)

    monkeypatch.setattr(copy_ingest, "insert_runs", insert_together)
    results, errors = {}, []

    def send(name: str) -> None:
        try:
            results[name] = ingest(run_item(external_id="shared"), run_item(external_id=f"own-{name}"))
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors and len(results) == 2
    (shared,) = Run.objects.filter(external_id="shared").values_list("id", flat=True)
    assert sorted(r.created for r in results.values()) == [1, 2]
    assert sorted(r.existing_ids for r in results.values()) == [[], [shared]]
    assert Run.objects.count() == 3 and Step.objects.filter(run_id=shared).count() == 2
    assert Step.objects.count() == 6


@pytest.mark.django_db
def test_both_writers_store_the_same_rows(monkeypatch, settings):
    """Every stored field of every run and step (and the search vector PostgreSQL derives) is the same whichever
    writer stored the batch."""
    settings.WAYMARK_REDACT_PATTERNS = [r"sk-[a-z0-9]+"]
    moment = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    monkeypatch.setattr(services.timezone, "now", lambda: moment)
    odd_steps = [
        step_item(
            "Lookup Policy!",
            arguments={"order_id": "A-1", "api_key": "sk-1", "nested": {"a": [1, 2]}, "note": "sk-abc use", "n": 2},
            observation="got sk-xyz " + "é" * 9000,
            started_at="2026-01-05T10:00:00.123456+02:00",
            ended_at="2026-01-05T10:00:03Z",
        ),
        step_item("list_orders", action_family=None, ok=None, input_tokens=0, cost=0),
        step_item("issue_refund", action_family="Execute Now", ok=False, cost=1.5, output_tokens=2**31 - 1),
        step_item("search", arguments={}, observation="", started_at=None, ended_at=None),
    ]
    items = [
        run_item(external_id="full", task="refund sk-abc1 ☃", steps=odd_steps, metadata={"k": {"deep": [None, 1.5]}}),
        run_item(external_id="bare", steps=[], score=None, started_at=None, ended_at=None, metadata={}),
        run_item(
            external_id="int-score",
            score=3,
            outcome="failure",
            graph_workspace="ws",
            graph_revision="r1",
            procedure_revision="p1",
        ),
    ]

    def store(writer: str) -> None:
        monkeypatch.setattr(services, "_uses_copy", lambda: writer == "copy")
        ingest(*[{**item, "source": writer} for item in items])

    def stored(source: str) -> tuple[list, list, list]:
        runs = list(Run.objects.filter(source=source).order_by("external_id").values())
        steps = list(Step.objects.filter(run__source=source).order_by("run__external_id", "ordinal").values())
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT search_vector::text FROM trajectories_run WHERE source = %s ORDER BY external_id", [source]
            )
            vectors = [row[0] for row in cursor.fetchall()]
        for row in runs:
            del row["id"], row["source"]
        for row in steps:
            del row["id"], row["run_id"]
        return runs, steps, vectors

    store("copy")
    store("orm")
    copied, portable = stored("copy"), stored("orm")
    assert copied == portable
    runs, steps, vectors = copied
    assert len(runs) == 3 and len(steps) == 6 and all(vectors[:1])
    assert runs[0]["created_at"] == moment and runs[0]["score"] is None
    assert steps[0]["arguments"] == {"order_id": "A-1", "note": "[redacted] use", "n": 2}


def test_the_prepared_rows_name_every_stored_column():
    """A column added to Run or Step must be added to the prepared rows, or the COPY writer would leave it empty
    while the ORM writer filled in the model default."""
    assert set(services.RUN_COLUMNS) == {f.column for f in Run._meta.concrete_fields} - {"id"}
    assert set(services.STEP_COLUMNS) == {f.column for f in Step._meta.concrete_fields} - {"id", "run_id"}
    assert len(set(services.RUN_COLUMNS)) == len(services.RUN_COLUMNS)


STEP_CASES = [
    {"tool": "Lookup Policy!", "arguments": {"a b": 1, "Token": "x", "list": [1], "long": "v" * 500, "ok": None}},
    {"tool": "___", "ok": False, "arguments": {"": 1, "k" * 80: True, "f": 1.5}},
    {"tool": "list_things", "input_tokens": 2**31 - 1, "cached_input_tokens": 0, "cost": 0},
    {"tool": "inspect_x", "ok": None, "cost": 12.25, "output_tokens": 3},
]


def test_step_rows_normalize_exactly_as_the_core_does():
    """services._step_rows skips normalize_steps for speed; for validated input it must give the same values."""
    steps = [StepIn.model_validate(case) for case in STEP_CASES]
    rows = services._step_rows(steps, services.current_redactor())
    events = [
        {
            "name": step.tool,
            "args": step.arguments,
            "ok": step.ok,
            "input_tokens": step.input_tokens,
            "cached_input_tokens": step.cached_input_tokens,
            "output_tokens": step.output_tokens,
            "cost": step.cost,
        }
        for step in steps
    ]
    fields = ("ordinal", "tool", "action_family", "arguments", "ok", "input_tokens", "cached_input_tokens")
    fields += ("output_tokens", "cost")
    for row, normal in zip(rows, normalize_steps(events), strict=True):
        stored = dict(zip(services.STEP_COLUMNS, row, strict=True))
        assert {name: stored[name] for name in fields} == {
            name: dict(getattr(normal, name)) if name == "arguments" else getattr(normal, name) for name in fields
        }
        assert type(stored["cost"]) is float
