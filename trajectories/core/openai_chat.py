"""OpenAI-style chat transcripts (τ-bench records) -> run items in the ingest API format.

A record: task_id, trial, reward, info.task.instruction, traj = [{role, content, tool_calls, tool_call_id}, ...].
Each assistant tool call becomes a step; its observation is the `tool` message answering the same tool_call_id.
"""

from __future__ import annotations

import json
from typing import Any

ERROR_PREFIX = "Error:"


class TranscriptError(ValueError):
    """A record that cannot be read as a transcript."""


def parse_arguments(text: Any) -> dict[str, Any]:
    """The call's JSON arguments; an unparseable or non-object string is kept whole as {"raw": text}."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str) or not text.strip():
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"raw": text}
    return parsed if isinstance(parsed, dict) else {"raw": text}


def _outcome(reward: Any) -> tuple[str, float | None]:
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return "unknown", None
    score = float(reward)
    if score == 1.0:
        return "success", score
    if score == 0.0:
        return "failure", score
    return "unknown", score


def _task_text(record: dict, messages: list) -> str:
    info = record.get("info")
    task = info.get("task") if isinstance(info, dict) else None
    instruction = task.get("instruction") if isinstance(task, dict) else None
    if isinstance(instruction, str) and instruction.strip():
        return instruction
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def _steps(messages: list) -> list[dict[str, Any]]:
    results = {
        m.get("tool_call_id"): m.get("content")
        for m in messages
        if m.get("role") == "tool" and m.get("tool_call_id") is not None
    }
    steps = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            observation = results.get(call.get("id"))
            if observation is None:
                ok = None
                observation = ""
            else:
                observation = observation if isinstance(observation, str) else json.dumps(observation)
                ok = not observation.startswith(ERROR_PREFIX)
            steps.append(
                {
                    "tool": str(function.get("name") or "unknown"),
                    "arguments": parse_arguments(function.get("arguments")),
                    "observation": observation,
                    "ok": ok,
                }
            )
    return steps


def transcript_to_run_item(record: Any, *, source: str) -> dict[str, Any]:
    """One τ-bench style record -> one ingest run item. Raises TranscriptError for a record it cannot read."""
    if not isinstance(record, dict):
        raise TranscriptError("a record must be a JSON object")
    for name in ("task_id", "trial"):
        if record.get(name) is None:
            raise TranscriptError(f"the record has no {name}")
    messages = record.get("traj")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise TranscriptError("traj must be a list of message objects")
    task_id, trial = record["task_id"], record["trial"]
    outcome, score = _outcome(record.get("reward"))
    return {
        "source": source,
        "external_id": f"{task_id}:{trial}",
        "task": _task_text(record, messages),
        "intent": f"task-{task_id}",
        "outcome": outcome,
        "score": score,
        "metadata": {"task_id": task_id, "trial": trial, "reward": record.get("reward"), "format": "openai-chat"},
        "steps": _steps(messages),
    }
