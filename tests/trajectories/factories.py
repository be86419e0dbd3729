"""Run items in the ingest format, and a helper that stores them through the real services: runs of the evaluation
namespace (source EVALUATION_SOURCE) go the only way such runs are written, as the answer of a claimed job."""

from __future__ import annotations

import itertools
from typing import Any

from django.db import transaction

from accounts.services import Actor
from trajectories import job_services
from trajectories.choices import EVALUATION_SOURCE
from trajectories.jobs import register_job_kind
from trajectories.selectors import jobs_for_subject
from trajectories.services import IngestResult, run_ingest_batch

ANSWER_KIND = "test_factory_answer"
ANSWER_SUBJECT = "tests:answers"
register_job_kind(ANSWER_KIND)

_numbers = itertools.count(1)


def step_item(tool: str = "lookup_policy", **overrides: Any) -> dict[str, Any]:
    item = {
        "tool": tool,
        "arguments": {"order_id": "A-1"},
        "observation": "policy: refunds within 30 days",
        "ok": True,
        "input_tokens": 10,
        "cached_input_tokens": 2,
        "output_tokens": 5,
        "cost": 0.001,
    }
    item.update(overrides)
    return item


def run_item(**overrides: Any) -> dict[str, Any]:
    number = next(_numbers)
    item = {
        "source": "test-agent",
        "external_id": f"run-{number}",
        "task": f"Refund order {number}",
        "intent": "refund_request",
        "outcome": "success",
        "score": 1.0,
        "metadata": {"model": "demo"},
        "started_at": "2026-01-05T10:00:00Z",
        "ended_at": "2026-01-05T10:01:00Z",
        "steps": [step_item("lookup_policy"), step_item("issue_refund")],
    }
    item.update(overrides)
    return item


def answered_run(item: dict[str, Any], *, actor: Actor | None = None) -> tuple[int, bool]:
    """Store `item` as the answer of an evaluation job (one job per distinct external_id the test names, so sending
    the same item again answers the same job): (run id, created)."""
    actor = actor or Actor.system()
    asked = item.get("external_id", "")
    for job in jobs_for_subject(ANSWER_SUBJECT):
        if job.payload.get("asked_as") == asked and job.result_run_id is not None:
            return job.result_run_id, False
    with transaction.atomic():
        (job,) = job_services.jobs_create(kind=ANSWER_KIND, subject=ANSWER_SUBJECT, payloads=[{"asked_as": asked}])
    claimed = job_services.job_claim(actor=actor, kind=ANSWER_KIND, worker="tests", lease_seconds=60)
    assert claimed is not None and claimed.pk == job.pk, "another test job was left open"
    answer = job_services.job_complete(actor=actor, job=claimed, run_items=[item])
    return answer.run_id, answer.counted


def ingest(*items: dict[str, Any]) -> IngestResult:
    """Store `items` as one ingest batch would; evaluation-namespace items are answered as jobs instead."""
    if not any(item.get("source") == EVALUATION_SOURCE for item in items):
        return run_ingest_batch(actor=Actor.system(), items=list(items))
    created: list[int] = []
    existing: list[int] = []
    steps = 0
    for item in items:
        if item.get("source") == EVALUATION_SOURCE:
            run_id, new = answered_run(item)
            (created if new else existing).append(run_id)
            steps += len(item.get("steps") or []) if new else 0
        else:
            result = run_ingest_batch(actor=Actor.system(), items=[item])
            created += result.created_ids
            existing += result.existing_ids
            steps += result.step_count
    return IngestResult(created_ids=created, existing_ids=existing, step_count=steps)
