"""Run items in the ingest format, and a helper that stores them through the real service."""

from __future__ import annotations

import itertools
from typing import Any

from accounts.services import Actor
from trajectories.services import IngestResult, run_ingest_batch

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


def ingest(*items: dict[str, Any]) -> IngestResult:
    return run_ingest_batch(actor=Actor.system(), items=list(items))
