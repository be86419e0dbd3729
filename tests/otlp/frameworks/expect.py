"""What a stored run must be, field by field, against the run the agent made."""

from __future__ import annotations

from typing import Any

from llm.core import Usage
from llm.pricing import cost_of
from tests.helpers.otlp_spans import micros
from trajectories.models import Run

from .provider import Script

TASK = "Refund order ORD-4101: the kettle arrived damaged."
LOOKUP = ("lookup_policy", {"topic": "refunds"})
REFUND = ("issue_refund", {"order_id": "ORD-4101", "amount": 39.9})
TOO_MUCH = ("issue_refund", {"order_id": "ORD-4101", "amount": 399.0})
POLICY = "Refunds within 30 days."
REFUNDED = "Refund of 39.90 EUR issued."
REFUSED = "over the refund limit"  # what issue_refund raises (RuntimeError) above 100


def lookup_policy_text(topic: str) -> str:
    return POLICY if topic == "refunds" else "No policy."


def issue_refund_text(order_id: str, amount: float) -> str:
    if amount > 100:
        raise RuntimeError(REFUSED)
    return REFUNDED


def stored(trace_id: str) -> tuple[Run, list[Any]]:
    run = Run.objects.get(external_id=trace_id)
    return run, list(run.steps.order_by("ordinal"))


def call_cost(script: Script, n: int) -> float:
    spent = script.usage(n)
    return float(cost_of(script.model, Usage(input_tokens=spent[0], output_tokens=spent[1])))


def step_usage(script: Script, requests: list[list[int]]) -> list[tuple[int, int, float]]:
    """Per step, the tokens and cost of the model calls (request numbers) it is charged with."""
    return [
        (
            sum(script.usage(n)[0] for n in group),
            sum(script.usage(n)[1] for n in group),
            round(sum(call_cost(script, n) for n in group), 6),
        )
        for group in requests
    ]


def assert_steps(steps, expected: list[tuple[str, dict[str, Any], str, bool | None]]) -> None:
    assert [(s.tool, s.arguments, s.observation, s.ok) for s in steps] == expected


def assert_usage(run: Run, steps, script: Script, requests: list[list[int]]) -> None:
    expected = step_usage(script, requests)
    assert [(s.input_tokens, s.output_tokens, round(s.cost, 6)) for s in steps] == expected
    assert run.total_tokens == sum(i + o for i, o, _ in expected)
    assert round(run.cost, 6) == round(sum(c for _, _, c in expected), 6)
    assert run.cost > 0


def root_times(spans) -> tuple[int, int]:
    """The root span's start and end in whole microseconds (as stored)."""
    root = next(s for s in spans if s.parent is None)
    return root.start_time // 1000, root.end_time // 1000


def run_times(run: Run) -> tuple[int, int]:
    return micros(run.started_at), micros(run.ended_at)
