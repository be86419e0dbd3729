"""Prompt builders for the two rubric model roles: "rubric" (propose a rubric for a task) and "judge" (assess one run).

The system texts are fixed strings; everything that varies goes into the user parts, rendered deterministically by
`rubrics.core.rubrics`. Replies are read with `parse_rubric_reply` / `parse_assessment_reply`.
"""

from __future__ import annotations

from collections.abc import Iterable

from llm.core import ModelRequest

from .rubrics import (
    DIMENSION_DESCRIPTION_MAX_CHARS,
    DIMENSION_ID_MAX_CHARS,
    EXPLANATION_MAX_CHARS,
    TRAJECTORY_RUBRIC_VERSION,
    RunLike,
    TrajectoryRubric,
    render_run_for_judge,
    render_task_for_rubric,
)

RUBRIC_ROLE = "rubric"
JUDGE_ROLE = "judge"
RUBRIC_MAX_TOKENS = 1500
JUDGE_MAX_TOKENS = 2000

RUBRIC_SYSTEM = f"""\
You design grading rubrics for the runs of an AI agent. You are given a task and a few example runs of agents that \
attempted it; each run is a numbered list of tool calls with their arguments, whether the call succeeded, and a short \
observation.

Propose between 3 and 8 dimensions that separate a good run of this task from a poor one. Each dimension judges one \
observable quality of the process or its result (for example: right sources consulted, no needless repetition, \
changes verified before finishing). Describe each dimension so that a reviewer reading only the step list can score \
it from 0 to 1. Mark a dimension as required only if a run that fails it is unacceptable whatever else it does well.

Reply with one JSON object and nothing else, in this shape:
{{"dimensions": [{{"id": "short_snake_case_id", "description": "what a score of 1 looks like and what lowers it", \
"weight": 1.0, "required": false}}]}}

Rules: ids are unique and at most {DIMENSION_ID_MAX_CHARS} characters; descriptions at most \
{DIMENSION_DESCRIPTION_MAX_CHARS} characters; weight is a positive number (relative importance, default 1.0); \
required is true or false. Do not score the example runs."""

JUDGE_SYSTEM = f"""\
You are a careful reviewer scoring one run of an AI agent against a rubric. The run is a numbered list of tool \
calls; the number in square brackets is the step index.

For every rubric dimension, give a score from 0 (fails completely) to 1 (fully meets the description), your \
confidence in that score from 0 to 1, the indices of the steps that support your judgement, and a one- or \
two-sentence explanation. Base every judgement on the steps shown; if the steps give no evidence for a dimension, \
say so, score it on what is visible and lower your confidence.

Reply with one JSON object and nothing else, in this shape:
{{"assessments": [{{"dimension_id": "<id from the rubric>", "score": 0.0, "confidence": 0.0, \
"evidence_steps": [0, 2], "explanation": "..."}}]}}

Rules: use each dimension id from the rubric exactly once and no other ids; score and confidence are numbers in \
[0, 1]; evidence_steps lists integer step indices that exist in the run; explanations are at most \
{EXPLANATION_MAX_CHARS} characters."""


def build_rubric_request(task: str, runs: Iterable[RunLike], *, max_tokens: int = RUBRIC_MAX_TOKENS) -> ModelRequest:
    """The "rubric" role request: propose a rubric for `task` from example runs (ValueError on a blank task)."""
    runs = tuple(runs)
    return ModelRequest(
        role=RUBRIC_ROLE,
        system=RUBRIC_SYSTEM,
        parts=(render_task_for_rubric(task, runs), "Propose the rubric now as one JSON object."),
        max_tokens=max_tokens,
        metadata={"recipe": TRAJECTORY_RUBRIC_VERSION, "runs": len(runs)},
    )


def build_judge_request(run: RunLike, rubric: TrajectoryRubric, *, max_tokens: int = JUDGE_MAX_TOKENS) -> ModelRequest:
    """The "judge" role request: assess `run` against `rubric`, one assessment per dimension with evidence."""
    return ModelRequest(
        role=JUDGE_ROLE,
        system=JUDGE_SYSTEM,
        parts=(render_run_for_judge(run, rubric), "Assess the trajectory now as one JSON object."),
        max_tokens=max_tokens,
        metadata={
            "recipe": TRAJECTORY_RUBRIC_VERSION,
            "trajectory_id": run.trajectory_id,
            "rubric_digest": rubric.digest,
        },
    )


__all__ = [
    "JUDGE_MAX_TOKENS",
    "JUDGE_ROLE",
    "JUDGE_SYSTEM",
    "RUBRIC_MAX_TOKENS",
    "RUBRIC_ROLE",
    "RUBRIC_SYSTEM",
    "build_judge_request",
    "build_rubric_request",
]
