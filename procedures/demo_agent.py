"""The simulated support agent of the demo environment (used by `manage.py run_demo_agent`).

It answers a replay job by "running" the procedure it was given on the job's task: each step becomes a tool call.
The environment has rules a real support backend would have: some tools only work after another tool ran (a refund
needs the refund policy looked up first, an order change needs the order looked up). A procedure that breaks a rule
produces a failed call and a failed run, so replay results depend on which steps a procedure contains.

Pure: no Django, no I/O. The HTTP loop lives in the management command.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

PREREQUISITES: Mapping[str, tuple[str, ...]] = {
    "issue_refund": ("lookup_policy",),
    "cancel_order": ("lookup_order",),
    "update_address": ("lookup_order",),
    "track_shipment": ("lookup_order",),
}
_ORDER = re.compile(r"\bORD-\d+\b")


def _numbers(seed: str) -> list[int]:
    digest = hashlib.sha256(seed.encode()).digest()
    return list(digest)


def simulate_run(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The run (ingest format) the demo agent produces for a replay job's payload. Deterministic."""
    task = str(payload.get("task") or "")
    procedure = payload.get("procedure") or {}
    steps: Sequence[Mapping[str, Any]] = procedure.get("steps") or []
    order = _ORDER.search(task)
    noise = _numbers(f"{payload.get('case_run_id')}:{task}")
    done: set[str] = set()
    calls = []
    failed = not steps
    for index, step in enumerate(steps):
        tool = str(step.get("tool") or "unknown")
        arguments = dict(step.get("arguments") or {})
        if order and "order_id" not in arguments and tool != "lookup_policy":
            arguments["order_id"] = order.group(0)
        missing = [need for need in PREREQUISITES.get(tool, ()) if need not in done]
        ok = not missing
        observation = "ok" if ok else f"Error: {tool} needs {', '.join(missing)} first"
        calls.append(
            {
                "tool": tool,
                "arguments": arguments,
                "observation": observation,
                "ok": ok,
                "input_tokens": 300 + 7 * noise[index % len(noise)],
                "output_tokens": 20 + noise[(index + 1) % len(noise)] // 2,
                "cost": 0.001,
            }
        )
        if not ok:
            failed = True
            break
        done.add(tool)
    return {
        "source": "demo-agent",
        "external_id": f"replay-{payload.get('replay')}-{payload.get('arm')}-{payload.get('case_run_id')}",
        "task": task,
        "intent": str(payload.get("intent") or ""),
        "outcome": "failure" if failed else "success",
        "metadata": {"agent": "demo-agent", "arm": payload.get("arm"), "case_run_id": payload.get("case_run_id")},
        "steps": calls,
    }
