"""The simulated support agent of the demo environment (used by `manage.py run_demo_agent`).

It answers a replay job by "running" the procedure it was given on the job's task: each step becomes a tool call.
The environment has rules a real support backend would have: some tools only work after another tool ran (a refund
needs the refund policy looked up first, an order change needs the order looked up). A procedure that breaks a rule
produces a failed call and a failed run, so replay results depend on which steps a procedure contains.

It answers a graph evaluation job by following the graph it was given (`simulate_graph_run`): a deterministic walk
from Start, each ACTION node on the way one tool call; the run succeeds when the walk reaches End through at least
one action, so evaluation results depend on the graph's shape.

Pure: no Django, no I/O. The HTTP loop lives in the management command, through the Python client's job helper
(waymark_client, clients/python).
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


INTENT_TOOLS = (("refund", "issue_refund"), ("cancel", "cancel_order"), ("address", "update_address"),
                ("track", "track_shipment"), ("ship", "track_shipment"))  # fmt: skip
OUTAGE_ONE_IN = 16  # the backend refuses one (task, tool) call in this many: a transient outage


def improvised_steps(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the agent does with no procedure (a with-versus-without job's `none` arm): it calls the intent's own tool
    straight away, and on one task in three it happens to look up what that tool needs first."""
    intent = str(payload.get("intent") or "").lower()
    tool = next((name for word, name in INTENT_TOOLS if word in intent), "lookup_order")
    careful = _numbers(f"unguided:{payload.get('task')}")[0] % 3 == 0
    needs = list(PREREQUISITES.get(tool, ())) if careful else []
    return [{"tool": name, "arguments": {}} for name in (*needs, tool)]


def simulate_run(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The run (ingest format) the demo agent produces for a replay job's payload. Deterministic. A job without a
    procedure (`"procedure": null`) is answered unguided (improvised_steps). Any call may meet the backend's
    transient outage (OUTAGE_ONE_IN, by task and tool), guided or not: that is where a procedure can break a task
    the unguided agent got through."""
    task = str(payload.get("task") or "")
    procedure = payload.get("procedure")
    guided = isinstance(procedure, Mapping)
    steps: Sequence[Mapping[str, Any]] = (procedure.get("steps") or []) if guided else improvised_steps(payload)
    order = _ORDER.search(task)
    noise = _numbers(f"noise:{task}")
    done: set[str] = set()
    calls = []
    failed = not steps
    for index, step in enumerate(steps):
        tool = str(step.get("tool") or "unknown")
        arguments = dict(step.get("arguments") or {})
        if order and "order_id" not in arguments and tool != "lookup_policy":
            arguments["order_id"] = order.group(0)
        missing = [need for need in PREREQUISITES.get(tool, ()) if need not in done]
        outage = _numbers(f"outage:{task}:{tool}")[0] % OUTAGE_ONE_IN == 0
        ok = not missing and not outage
        if missing:
            observation = f"Error: {tool} needs {', '.join(missing)} first"
        else:
            observation = "Error: the backend is unavailable, try later" if outage else "ok"
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
        "metadata": {
            "agent": "demo-agent",
            "model": "demo-agent-1",
            "arm": payload.get("arm"),
            "case_run_id": payload.get("case_run_id"),
        },
        "steps": calls,
    }


JOB_SIMULATIONS = ("procedure_replay", "graph_evaluation")
MAX_WALK_STEPS = 20
START, END, ACTION = "Start", "End", "ACTION"


def _walk(graph: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], bool]:
    """The nodes a walk from Start visits (Start excluded) and whether it reached End. At each node the outgoing
    edges are taken in the document's order, preferring one whose target is not visited yet; the walk stops at End,
    at a node without an outgoing edge, or after MAX_WALK_STEPS moves."""
    nodes = {str(node.get("id")): node for node in graph.get("nodes") or [] if isinstance(node, Mapping)}
    outgoing: dict[str, list[str]] = {}
    for edge in graph.get("edges") or []:
        if isinstance(edge, Mapping):
            outgoing.setdefault(str(edge.get("source")), []).append(str(edge.get("target")))
    current, visited, path = START, {START}, []
    while len(path) < MAX_WALK_STEPS and current != END:
        targets = outgoing.get(current)
        if not targets:
            break
        current = next((target for target in targets if target not in visited), targets[0])
        visited.add(current)
        path.append(nodes.get(current) or {"id": current})
    return path, current == END


UNGUIDED_ONE_IN = 3  # with no graph the demo agent gets through one task in three on its own


def simulate_graph_run(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The run (ingest format) the demo agent produces for a graph evaluation job's payload. Deterministic. A job
    without a graph (`"graph": null`: a certification's control arm) is answered unguided: one improvised answer,
    right on one task in UNGUIDED_ONE_IN (by task id)."""
    task = str(payload.get("task") or "")
    graph = payload.get("graph")
    noise = _numbers(f"{payload.get('graph_ref')}:{payload.get('task_id')}:{task}")
    if not isinstance(graph, Mapping):
        lucky = _numbers(f"unguided:{payload.get('task_id')}:{task}")[0] % UNGUIDED_ONE_IN == 0
        step = {"tool": "answer", "arguments": {"task": task}, "observation": "answered without guidance",
                "ok": lucky, "input_tokens": 300 + noise[0], "output_tokens": 20, "cost": 0.001}  # fmt: skip
        return _graph_run(payload, task, [step], success=lucky)
    path, reached_end = _walk(graph)
    calls = []
    for node in path:
        if node.get("type") != ACTION:
            continue
        index = len(calls)
        description = " ".join(str(node.get("description") or "").split())
        calls.append(
            {
                "tool": str(node.get("id"))[:200],
                "arguments": {"task": task},
                "observation": f"done: {description}"[:120] if description else "done",
                "ok": True,
                "input_tokens": 300 + 7 * noise[index % len(noise)],
                "output_tokens": 20 + noise[(index + 1) % len(noise)] // 2,
                "cost": 0.001,
            }
        )
    return _graph_run(payload, task, calls, success=reached_end and bool(calls))


def _graph_run(payload: Mapping[str, Any], task: str, calls: list, *, success: bool) -> dict[str, Any]:
    return {
        "source": "demo-agent",
        "external_id": f"graph-{payload.get('graph_ref')}-{payload.get('task_id')}"[:200],
        "task": task,
        "intent": str(payload.get("intent") or ""),
        "outcome": "success" if success else "failure",
        "graph_workspace": str(payload.get("workspace") or ""),
        "metadata": {"agent": "demo-agent", "model": "demo-agent-1", "graph_ref": payload.get("graph_ref")},
        "steps": calls,
    }


def simulate_job(kind: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The run the demo agent answers a claimed job of `kind` with (one of JOB_SIMULATIONS)."""
    if kind == "graph_evaluation":
        return simulate_graph_run(payload)
    if kind == "procedure_replay":
        return simulate_run(payload)
    raise ValueError(f"the demo agent cannot run {kind!r} jobs")
