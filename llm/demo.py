"""Canned replies of the scripted demo model, which answers when no ANTHROPIC_API_KEY is set.

Replies are chosen by `ModelRequest.role` and cycle, so the demo never runs out. Each is a valid but modest answer
for its recipe: the refiner proposes no edits (a `no_action` round), intent mining finds nothing new, a rubric has
two dimensions. Every page says when this model is answering (templates/base.html, `model_is_scripted`).
"""

from __future__ import annotations

import json

from llm.core import ScriptedChatModel

DEMO_MODEL_ID = "scripted-demo"


def _json(value: dict) -> str:
    return json.dumps(value, indent=1)


DEMO_REPLIES: dict[str, list[str]] = {
    "refiner": [_json({"add_nodes": [], "delete_nodes": [], "add_edges": [], "delete_edges": []})],
    "guidance": [
        "Demo guidance (scripted model): follow the active graph's next step from the current node, "
        "check its condition first, and avoid the pitfalls listed on the edge."
    ],
    "intents": [_json({"intents": []})],
    "rubric": [
        _json(
            {
                "dimensions": [
                    {
                        "id": "task_completed",
                        "description": "The run achieved what the user asked for.",
                        "weight": 2,
                        "required": True,
                    },
                    {
                        "id": "policy_followed",
                        "description": "Every action respected the stated policy.",
                        "weight": 1,
                        "required": False,
                    },
                ]
            }
        )
    ],
    "assessments": [_json({"assessments": []})],
    "*": ["This is the scripted demo model: set ANTHROPIC_API_KEY to get real answers."],
}


def demo_chat_model() -> ScriptedChatModel:
    return ScriptedChatModel(DEMO_REPLIES, cycle=True, model_id=DEMO_MODEL_ID)
