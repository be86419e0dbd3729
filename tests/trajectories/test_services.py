"""run_ingest_batch: validation first, all or nothing, idempotent, one audit event per batch, redaction."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import AuditEvent
from trajectories.models import Run, Step
from trajectories.services import IngestInvalid

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.django_db


def test_it_stores_runs_with_normalized_steps_and_totals():
    item = run_item(
        steps=[
            step_item("Lookup_Policy", arguments={"order_id": "A-1", "api_key": "sk-1", "items": [1, 2]}),
            step_item("list_orders", action_family=None, ok=None),
            step_item("issue_refund", action_family="Execute", ok=False, cost=0.5),
        ]
    )
    result = ingest(item)
    run = Run.objects.get(pk=result.created_ids[0])
    assert (run.source, run.external_id, run.outcome, run.intent) == (
        "test-agent",
        item["external_id"],
        "success",
        "refund_request",
    )
    assert run.step_count == 3 and run.total_tokens == 3 * 17 and run.cost == pytest.approx(0.502)
    assert run.tools == ["lookup_policy", "list_orders", "issue_refund"]
    steps = list(run.steps.order_by("ordinal"))
    assert [(s.ordinal, s.tool, s.action_family, s.ok) for s in steps] == [
        (0, "lookup_policy", "other", True),
        (1, "list_orders", "inspect", None),
        (2, "issue_refund", "execute", False),
    ]
    assert steps[0].arguments == {"order_id": "A-1"}
    assert run.started_at.isoformat() == "2026-01-05T10:00:00+00:00"


def test_resending_a_batch_creates_nothing_and_reports_the_existing_ids():
    first = ingest(run_item(external_id="a"), run_item(external_id="b"))
    again = ingest(run_item(external_id="b", task="changed"), run_item(external_id="c"))
    assert first.created == 2 and again.created == 1 and again.existing_ids == [first.created_ids[1]]
    assert Run.objects.get(pk=first.created_ids[1]).task != "changed"  # existing runs are never modified
    assert Run.objects.count() == 3


def test_the_same_external_id_under_another_source_is_another_run():
    ingest(run_item(external_id="x", source="one"))
    assert ingest(run_item(external_id="x", source="two")).created == 1


def test_one_invalid_item_rejects_the_whole_batch_and_names_it():
    items = [run_item(), run_item(), run_item(steps=[step_item(), {"arguments": {}}])]
    with pytest.raises(IngestInvalid) as caught:
        ingest(*items)
    assert caught.value.errors[0]["loc"] == ["runs", 2, "steps", 1, "tool"]
    assert Run.objects.count() == 0 and Step.objects.count() == 0 and AuditEvent.objects.count() == 0


@pytest.mark.parametrize(
    ("overrides", "loc"),
    [
        ({"outcome": "won"}, ["runs", 0, "outcome"]),
        ({"source": "  "}, ["runs", 0, "source"]),
        ({"surprise": 1}, ["runs", 0, "surprise"]),
        ({"intent": "i" * 201}, ["runs", 0, "intent"]),
        ({"external_id": "e" * 201}, ["runs", 0, "external_id"]),
        ({"steps": [step_item("t" * 201)]}, ["runs", 0, "steps", 0, "tool"]),
        ({"score": "high"}, ["runs", 0, "score"]),
        ({"steps": [step_item(ok="yes")]}, ["runs", 0, "steps", 0, "ok"]),
        ({"steps": [step_item(input_tokens=-1)]}, ["runs", 0, "steps", 0, "input_tokens"]),
        ({"steps": [step_item(arguments=[1])]}, ["runs", 0, "steps", 0, "arguments"]),
        ({"started_at": "yesterday"}, ["runs", 0, "started_at"]),
    ],
)
def test_schema_violations_name_the_field(overrides, loc):
    with pytest.raises(IngestInvalid) as caught:
        ingest(run_item(**overrides))
    assert caught.value.errors[0]["loc"] == loc
    assert Run.objects.count() == 0


def test_a_run_repeated_within_one_batch_is_invalid():
    with pytest.raises(IngestInvalid) as caught:
        ingest(run_item(external_id="same"), run_item(external_id="same"))
    assert caught.value.errors == [
        {
            "loc": ["runs", 1, "external_id"],
            "msg": "repeats runs[0] (same source and external_id) in this batch",
            "type": "duplicate",
        }
    ]


def test_one_audit_event_per_batch_and_none_when_nothing_is_new():
    result = ingest(run_item(external_id="a"), run_item(external_id="b"))
    (event,) = AuditEvent.objects.filter(verb="trajectories.ingest")
    assert event.after == {"created": 2, "existing": 0, "steps": 4, "sources": ["test-agent"]}
    assert event.target_id == f"{result.created_ids[0]}..{result.created_ids[1]}"
    ingest(run_item(external_id="a"))
    assert AuditEvent.objects.filter(verb="trajectories.ingest").count() == 1


def test_observations_are_capped():
    result = ingest(run_item(steps=[step_item(observation="o" * 20_000)]))
    assert len(Step.objects.get(run_id=result.created_ids[0]).observation) == 8000


def test_redaction_patterns_apply_to_texts_before_storage(settings):
    settings.WAYMARK_REDACT_PATTERNS = [r"sk-[a-z0-9]+"]
    item = run_item(
        task="use sk-abc1",
        metadata={"note": "sk-zz9"},
        steps=[step_item(arguments={"note": "sk-q1"}, observation="got sk-xyz")],
    )
    run = Run.objects.get(pk=ingest(item).created_ids[0])
    step = run.steps.get()
    assert (run.task, run.metadata, step.arguments, step.observation) == (
        "use [redacted]",
        {"note": "[redacted]"},
        {"note": "[redacted]"},
        "got [redacted]",
    )


def test_a_batch_costs_a_fixed_number_of_queries():
    def count(n):
        items = [run_item() for _ in range(n)]
        with CaptureQueriesContext(connection) as queries:
            ingest(*items)
        return len(queries)

    assert count(3) == count(30)


def test_a_concurrent_insert_of_the_same_run_is_reported_as_existing(monkeypatch):
    """Another batch stores the run between our existence check and our insert: we look again, nothing fails."""
    from trajectories import services

    stored = ingest(run_item(external_id="raced")).created_ids[0]
    real_lookup = services._existing_ids
    calls = []

    def lookup_that_misses_once(prepared):
        calls.append(1)
        return {} if len(calls) == 1 else real_lookup(prepared)

    monkeypatch.setattr(services, "_existing_ids", lookup_that_misses_once)
    result = ingest(run_item(external_id="raced"), run_item(external_id="fresh"))
    assert result.existing_ids == [stored] and result.created == 1 and len(calls) == 2
    assert Run.objects.filter(external_id="raced").count() == 1


def test_a_stored_run_reads_back_as_the_core_value():
    from trajectories.selectors import as_trajectory_run, run_with_steps

    run_id = ingest(
        run_item(external_id="core", steps=[step_item("lookup_policy"), step_item("notify", ok=None)])
    ).created_ids[0]
    value = as_trajectory_run(run_with_steps(run_id))
    assert value.trajectory_id == "test-agent:core" and value.outcome == "success"
    assert [(s.ordinal, s.tool, s.ok) for s in value.steps] == [(0, "lookup_policy", True), (1, "notify", None)]
    assert value.steps[0].tokens == 17 and value.steps[0].summary.startswith("policy")
    with pytest.raises(TypeError):
        value.steps[0].arguments["x"] = 1
