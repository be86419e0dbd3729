"""Demo runs of a customer-support agent for `manage.py seed_demo`: deterministic, idempotent, via the service."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from accounts.services import Actor
from common.demo_seeding import SeedContext, demo_seeder

from .services import IngestResult, run_ingest_batch

DEMO_SOURCE = "demo-support-agent"
_START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

# (intent, variant, outcome, how many): the variants below decide the steps.
_PLAN = [
    ("refund_request", "happy", "success", 8),
    ("refund_request", "retry_account", "success", 3),
    ("refund_request", "skip_account", "success", 2),
    ("refund_request", "unverified", "failure", 2),
    ("refund_request", "denied", "failure", 3),
    ("change_address", "happy", "success", 5),
    ("change_address", "invalid_zip", "failure", 2),
    ("cancel_order", "happy", "success", 4),
    ("cancel_order", "shipped", "failure", 3),
    ("order_status", "happy", "success", 3),
    ("order_status", "abandoned", "unknown", 1),
]

_TASKS = {
    "refund_request": "I'd like a refund for order {order}: the {item} arrived damaged.",
    "change_address": "Please ship order {order} to my new address in {city}.",
    "cancel_order": "Cancel order {order}, I ordered the {item} by mistake.",
    "order_status": "Where is my order {order}? It was supposed to arrive yesterday.",
}
_ITEMS = ["kettle", "desk lamp", "running shoes", "headphones", "backpack", "coffee grinder"]
_CITIES = ["Lyon", "Leeds", "Porto", "Graz", "Utrecht"]


_FAMILIES = {
    "lookup_policy": "inspect",
    "check_account": "inspect",
    "lookup_order": "inspect",
    "track_shipment": "inspect",
    "issue_refund": "execute",
    "cancel_order": "execute",
    "update_address": "change",
    "notify": "notify",
    "transfer_to_human": "escalate",
}


def _call(tool: str, arguments: dict[str, Any], observation: str, ok: bool | None = True) -> dict[str, Any]:
    return {
        "tool": tool,
        "action_family": _FAMILIES[tool],
        "arguments": arguments,
        "observation": observation,
        "ok": ok,
    }


def _refund_steps(variant: str, order: str, customer: str, amount: float) -> list[dict[str, Any]]:
    policy = _call("lookup_policy", {"topic": "refunds"}, "Refunds within 30 days of delivery for verified accounts.")
    account = _call("check_account", {"customer_id": customer}, f"Account {customer}: verified, 3 orders.")
    refund = _call("issue_refund", {"order_id": order, "amount": amount}, f"Refund of {amount:.2f} EUR issued.")
    notify = _call(
        "notify",
        {"channel": "email", "template": "refund_issued", "auth_token": "demo-secret"},  # the token key is dropped
        "Email queued.",
    )
    if variant == "retry_account":
        timeout = _call("check_account", {"customer_id": customer}, "Error: account service timed out", ok=False)
        return [policy, timeout, account, refund, notify]
    if variant == "skip_account":
        return [policy, refund, notify]
    if variant == "unverified":
        denied = _call(
            "issue_refund", {"order_id": order, "amount": amount}, "Error: refund denied: account not verified", False
        )
        return [policy, denied, _call("transfer_to_human", {"reason": "unverified account"}, "Transferred.")]
    if variant == "denied":
        denied = _call(
            "issue_refund", {"order_id": order, "amount": amount}, "Error: refund denied: delivered 41 days ago", False
        )
        notice = _call("notify", {"channel": "email", "template": "refund_denied"}, "Email queued.")
        return [policy, account, denied, notice]
    return [policy, account, refund, notify]


def _address_steps(variant: str, order: str, customer: str, city: str) -> list[dict[str, Any]]:
    account = _call("check_account", {"customer_id": customer}, f"Account {customer}: verified.")
    lookup = _call("lookup_order", {"order_id": order}, f"Order {order}: packed, not shipped.")
    if variant == "invalid_zip":
        bad = _call(
            "update_address", {"order_id": order, "city": city, "zip": "0000"}, "Error: invalid postal code", False
        )
        return [account, lookup, bad, bad | {"arguments": {"order_id": order, "city": city, "zip": "00000"}}]
    update = _call("update_address", {"order_id": order, "city": city, "zip": "69002"}, "Address updated.")
    return [account, lookup, update, _call("notify", {"channel": "sms", "template": "address_changed"}, "SMS sent.")]


def _cancel_steps(variant: str, order: str, customer: str, amount: float) -> list[dict[str, Any]]:
    account = _call("check_account", {"customer_id": customer}, f"Account {customer}: verified.")
    if variant == "shipped":
        lookup = _call("lookup_order", {"order_id": order}, f"Order {order}: shipped yesterday.")
        cancel = _call("cancel_order", {"order_id": order}, "Error: order already shipped", ok=False)
        return [account, lookup, cancel, _call("transfer_to_human", {"reason": "shipped order"}, "Transferred.")]
    lookup = _call("lookup_order", {"order_id": order}, f"Order {order}: paid, not packed.")
    cancel = _call("cancel_order", {"order_id": order}, f"Order {order} cancelled.")
    refund = _call("issue_refund", {"order_id": order, "amount": amount}, f"Refund of {amount:.2f} EUR issued.")
    return [account, lookup, cancel, refund, _call("notify", {"channel": "email", "template": "order_cancelled"}, "Ok")]


def _status_steps(variant: str, order: str) -> list[dict[str, Any]]:
    lookup = _call("lookup_order", {"order_id": order}, f"Order {order}: out for delivery.")
    if variant == "abandoned":
        return [lookup]
    track = _call("track_shipment", {"order_id": order, "carrier": "postnl"}, "Expected today before 18:00.")
    return [lookup, track, _call("notify", {"channel": "chat", "template": "eta"}, "Message sent.")]


def _steps_for(intent: str, variant: str, *, order: str, customer: str, amount: float, city: str) -> list[dict]:
    if intent == "refund_request":
        return _refund_steps(variant, order, customer, amount)
    if intent == "change_address":
        return _address_steps(variant, order, customer, city)
    if intent == "cancel_order":
        return _cancel_steps(variant, order, customer, amount)
    return _status_steps(variant, order)


def _timed(steps: list[dict[str, Any]], start: datetime, rng: random.Random) -> list[dict[str, Any]]:
    moment = start
    for step in steps:
        step["started_at"] = moment.isoformat()
        moment += timedelta(seconds=rng.uniform(0.4, 4.0))
        step["ended_at"] = moment.isoformat()
        step["input_tokens"] = rng.randint(300, 1800)
        step["cached_input_tokens"] = rng.choice([0, 0, 256, 512])
        step["output_tokens"] = rng.randint(20, 160)
        step["cost"] = round((step["input_tokens"] * 3 + step["output_tokens"] * 15) / 1_000_000, 6)
        moment += timedelta(seconds=rng.uniform(0.5, 6.0))
    return steps


def demo_run_items() -> list[dict[str, Any]]:
    rng = random.Random(20261102)
    items = []
    number = 0
    for intent, variant, outcome, count in _PLAN:
        for _ in range(count):
            number += 1
            order, customer = f"ORD-{4100 + number}", f"CUS-{rng.randint(1000, 9999)}"
            amount = round(rng.uniform(12, 240), 2)
            item_name, city = rng.choice(_ITEMS), rng.choice(_CITIES)
            steps = _steps_for(intent, variant, order=order, customer=customer, amount=amount, city=city)
            started = _START + timedelta(hours=number * 3, minutes=rng.randint(0, 59))
            timed = _timed([dict(step) for step in steps], started, rng)
            items.append(
                {
                    "source": DEMO_SOURCE,
                    "external_id": f"demo-{number:03d}",
                    "task": _TASKS[intent].format(order=order, item=item_name, city=city),
                    "intent": intent,
                    "outcome": outcome,
                    "score": {"success": 1.0, "failure": 0.0}.get(outcome),
                    "metadata": {"agent": "support-bot", "model": "demo", "variant": variant, "channel": "chat"},
                    "started_at": started.isoformat(),
                    "ended_at": timed[-1]["ended_at"],
                    "steps": timed,
                }
            )
    return items


def seed_demo_runs(*, actor: Actor) -> IngestResult:
    """Store the demo runs; running it again creates nothing (idempotent on source and external id)."""
    return run_ingest_batch(actor=actor, items=demo_run_items())


@demo_seeder("runs", after=("agent-token",))
def seed_demo_runs_step(ctx: SeedContext) -> str:
    """A few dozen runs of a customer-support agent, pushed as the demo agent."""
    result = seed_demo_runs(actor=ctx.agent_actor or ctx.actor)
    return f"runs: {len(result.created_ids)} created, {len(result.existing_ids)} already there"


def seed_runs_of_model(intent: str, *, model: str, count: int, actor: Actor) -> int:
    """`count` happy runs of a demo intent made under another agent model (metadata.model), received now: the demo
    agent moved to a new model after an activation. Idempotent (external ids `demo-<model>-<n>`); returns how many
    were created."""
    rng = random.Random(f"{intent}:{model}")
    now = datetime.now(UTC)
    items = []
    for number in range(1, count + 1):
        order, customer = f"ORD-{5100 + number}", f"CUS-{rng.randint(1000, 9999)}"
        steps = _steps_for(
            intent, "happy", order=order, customer=customer, amount=round(rng.uniform(12, 240), 2),
            city=rng.choice(_CITIES),
        )  # fmt: skip
        started = now - timedelta(minutes=10 * (count - number + 1))
        timed = _timed([dict(step) for step in steps], started, rng)
        items.append(
            {
                "source": DEMO_SOURCE,
                "external_id": f"demo-{model}-{intent}-{number:02d}",
                "task": _TASKS[intent].format(order=order, item=rng.choice(_ITEMS), city=rng.choice(_CITIES)),
                "intent": intent,
                "outcome": "success",
                "score": 1.0,
                "metadata": {"agent": "support-bot", "model": model, "variant": "happy", "channel": "chat"},
                "started_at": started.isoformat(),
                "ended_at": timed[-1]["ended_at"],
                "steps": timed,
            }
        )
    return len(run_ingest_batch(actor=actor, items=items).created_ids)


def seed_runs_of_revision(intent: str, revision: str, *, count: int, failing: int, actor: Actor) -> int:
    """`count` runs of a demo intent that followed the procedure version `revision` (procedure_revision), the last
    `failing` of them failed: the runs a canary's arms make in the demo. Idempotent (external ids name the
    revision); returns how many were created."""
    rng = random.Random(f"{intent}:{revision}")
    now = datetime.now(UTC)
    items = []
    for number in range(1, count + 1):
        failed = number > count - failing
        order, customer = f"ORD-{6100 + number}", f"CUS-{rng.randint(1000, 9999)}"
        steps = _steps_for(
            intent, "happy", order=order, customer=customer, amount=round(rng.uniform(12, 240), 2),
            city=rng.choice(_CITIES),
        )  # fmt: skip
        started = now - timedelta(minutes=count - number + 1)
        timed = _timed([dict(step) for step in steps], started, rng)
        items.append(
            {
                "source": DEMO_SOURCE,
                "external_id": f"demo-{intent}-{revision[7:19]}-{number:03d}",
                "task": _TASKS[intent].format(order=order, item=rng.choice(_ITEMS), city=rng.choice(_CITIES)),
                "intent": intent,
                "outcome": "failure" if failed else "success",
                "score": 0.0 if failed else 1.0,
                "procedure_revision": revision,
                "metadata": {"agent": "support-bot", "model": "demo", "variant": "canary", "channel": "chat"},
                "started_at": started.isoformat(),
                "ended_at": timed[-1]["ended_at"],
                "steps": timed,
            }
        )
    return len(run_ingest_batch(actor=actor, items=items).created_ids)
