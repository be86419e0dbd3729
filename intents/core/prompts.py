"""The intent-proposal prompt: a batch of runs rendered compactly, the retry prompt, and the offline stand-in reply.

Pure: no Django, no I/O. The caller passes its redactor as a function; every free text of a run (task, declared
label, argument values, observations) goes through it before it is written into a prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trajectories.core import TrajectoryRun

from .candidates import INTENT_MINING_VERSION, IntentKind
from .normalize import normalize_intent

ARGUMENTS_SHOWN = 6
ARGUMENT_CHARS = 40
OBSERVATION_CHARS = 160
TASK_CHARS = 400
REPLY_ECHO_CHARS = 2000
MAX_TOKENS = 2000

SYSTEM = f"""You read agent runs (tool calls in order) and say what each run was trying to do.

Answer with one JSON object and nothing else: {{"intents": [...]}} (recipe {INTENT_MINING_VERSION}). Each item:
  "intent": a short label of the goal in plain words (e.g. "cancel a flight reservation"),
  "kind": "declared" when the run states the goal (its task or declared intent), "inferred" when you read it from
          the steps, "hindsight" for what a failed run actually ended up doing,
  "evidence": a non-empty list of {{"trajectory_id": "<id exactly as given>", "start": i, "end": j}}: the steps
          (numbered from 0, inclusive) that show the intent; only trajectories and steps listed below,
  "actual_outcome": for hindsight intents, what really happened (one sentence); otherwise "",
  "limitations": a list of short notes on what the evidence does not show (may be empty).
Give at least one intent per run when its steps allow it; one intent may cite several runs. Do not invent steps."""

Redact = Callable[[str], str]


@dataclass(frozen=True)
class RunBrief:
    """One stored run as the prompt shows it: the core run plus what the agent declared."""

    run: TrajectoryRun
    task: str = ""
    declared_intent: str = ""


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _argument(value: object, redact: Redact) -> str:
    if isinstance(value, str):
        return json.dumps(_one_line(redact(value), ARGUMENT_CHARS), ensure_ascii=False)
    return json.dumps(value)


def render_step(index: int, step, redact: Redact) -> str:
    """`  3 search_flights(origin="JFK", …) ok · observation`: the step's position in the run (what evidence bounds
    count), its tool, shortened arguments, ok, and the shortened observation."""
    items = list(step.arguments.items())
    shown = [f"{key}={_argument(value, redact)}" for key, value in items[:ARGUMENTS_SHOWN]]
    if len(items) > ARGUMENTS_SHOWN:
        shown.append("…")
    status = {True: "ok", False: "FAILED"}.get(step.ok, "unknown")
    line = f"  {index} {step.tool}({', '.join(shown)}) {status}"
    observation = _one_line(redact(step.summary or ""), OBSERVATION_CHARS)
    return f"{line} · {observation}" if observation else line


def render_run(brief: RunBrief, redact: Redact) -> str:
    run = brief.run
    lines = [f"trajectory_id: {run.trajectory_id} · outcome: {run.outcome} · {len(run.steps)} steps (0..)"]
    if brief.task.strip():
        lines.append(f"task: {_one_line(redact(brief.task), TASK_CHARS)}")
    if brief.declared_intent.strip():
        lines.append(f"declared intent: {_one_line(redact(brief.declared_intent), 200)}")
    lines.extend(render_step(index, step, redact) for index, step in enumerate(run.steps))
    return "\n".join(lines)


def render_batch(briefs: Sequence[RunBrief], redact: Redact = lambda text: text) -> str:
    """The user part of a proposal request: every run of the batch, separated by blank lines."""
    return "Runs:\n\n" + "\n\n".join(render_run(brief, redact) for brief in briefs)


def retry_part(error: str, rejected_reply: str) -> str:
    """The extra part of the one retry: why the previous reply was rejected, and the reply itself (shortened)."""
    echo = rejected_reply if len(rejected_reply) <= REPLY_ECHO_CHARS else rejected_reply[:REPLY_ECHO_CHARS] + "…"
    return (
        f"Your previous reply was rejected: {error}.\n"
        f"Previous reply:\n{echo}\n\n"
        'Answer again with only the JSON object {"intents": [...]}, using only the trajectory ids and step numbers '
        "listed above."
    )


def stand_in_reply(briefs: Sequence[RunBrief], redact: Redact = lambda text: text) -> str:
    """A deterministic reply for when no model is configured: each run's declared label (else its task, else its
    tools) as a `declared`/`inferred` intent over all its steps, and for a failed run a `hindsight` intent saying
    where it failed. It exercises the whole pipeline; it does not understand anything."""
    rows: list[dict] = []
    for brief in briefs:
        run = brief.run
        if not run.steps:
            continue
        evidence = [{"trajectory_id": run.trajectory_id, "start": 0, "end": len(run.steps) - 1}]
        label, kind = _one_line(redact(brief.declared_intent), 200), IntentKind.DECLARED
        if not normalize_intent(label):
            label, kind = _one_line(redact(brief.task), 120), IntentKind.DECLARED
        if not normalize_intent(label):
            tools = list(dict.fromkeys(step.tool for step in run.steps))[:3]
            label, kind = "use " + " then ".join(tools), IntentKind.INFERRED
        rows.append(
            {
                "intent": label,
                "kind": kind.value,
                "evidence": evidence,
                "actual_outcome": "",
                "limitations": ["scripted stand-in: the label is the run's own, not a model's reading"],
            }
        )
        if run.outcome == "failure":
            failed = [index for index, step in enumerate(run.steps) if step.ok is False]
            at = failed[-1] if failed else len(run.steps) - 1
            step = run.steps[at]
            note = _one_line(redact(step.summary or ""), 160)
            outcome = f"the run failed at step {at} ({step.tool})" + (f": {note}" if note else "")
            rows.append(
                {
                    "intent": label,
                    "kind": IntentKind.HINDSIGHT.value,
                    "evidence": [{"trajectory_id": run.trajectory_id, "start": 0, "end": at}],
                    "actual_outcome": outcome,
                    "limitations": ["scripted stand-in: the outcome is read from the failed step only"],
                }
            )
    return json.dumps({"intents": rows}, ensure_ascii=False)
