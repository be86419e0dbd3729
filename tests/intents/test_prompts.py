"""The proposal prompt: compact steps numbered from 0, shortened arguments and observations, redaction, the retry."""

from __future__ import annotations

import json

from intents.core.candidates import parse_intent_reply
from intents.core.prompts import ARGUMENT_CHARS, RunBrief, render_batch, retry_part, stand_in_reply
from trajectories.core import TrajectoryRun, TrajectoryStep


def run(outcome="success", ok_last=True) -> TrajectoryRun:
    steps = (
        TrajectoryStep(5, "search", "discover", {"query": "x" * 100, "limit": 3}, summary="found\n3 items", ok=True),
        TrajectoryStep(6, "book", "execute", {}, summary="card sk-123 declined", ok=ok_last),
    )
    return TrajectoryRun(trajectory_id="agent:1", steps=steps, outcome=outcome)


def test_steps_are_numbered_from_zero_with_short_arguments_and_one_line_observations():
    text = render_batch([RunBrief(run(), task="Book a trip", declared_intent="book_trip")])
    assert "trajectory_id: agent:1 · outcome: success · 2 steps" in text
    assert "task: Book a trip" in text and "declared intent: book_trip" in text
    assert '  0 search(query="' in text and "limit=3) ok · found 3 items" in text
    assert "  1 book() ok · card sk-123 declined" in text
    query = text.split('query="')[1].split('"')[0]
    assert len(query) == ARGUMENT_CHARS and query.endswith("…")


def test_the_redactor_applies_to_every_free_text():
    text = render_batch([RunBrief(run(), task="use sk-999")], lambda value: value.replace("sk-", "[r]"))
    assert "sk-" not in text and "[r]123" in text and "[r]999" in text


def test_the_retry_part_carries_the_error_and_the_rejected_reply():
    part = retry_part("trajectory intent is required", '{"intents": [{}]}')
    assert "trajectory intent is required" in part and '{"intents": [{}]}' in part


def test_the_stand_in_reply_parses_and_covers_failed_runs_in_hindsight():
    failed = run(outcome="failure", ok_last=False)
    briefs = [RunBrief(failed, declared_intent="book_trip")]
    candidates = parse_intent_reply([failed], stand_in_reply(briefs))
    assert [(item.kind.value, item.intent) for item in candidates] == [
        ("declared", "book_trip"),
        ("hindsight", "book_trip"),
    ]
    assert "step 1 (book)" in candidates[1].actual_outcome


def test_the_stand_in_falls_back_to_the_task_then_the_tools():
    plain = run()
    (from_task,) = parse_intent_reply([plain], stand_in_reply([RunBrief(plain, task="Book a trip")]))
    assert from_task.intent == "Book a trip"
    (from_tools,) = parse_intent_reply([plain], stand_in_reply([RunBrief(plain)]))
    assert (from_tools.kind.value, from_tools.intent) == ("inferred", "use search then book")
    empty = TrajectoryRun(trajectory_id="agent:2", steps=(), outcome="failure")
    assert json.loads(stand_in_reply([RunBrief(empty, declared_intent="x")])) == {"intents": []}
