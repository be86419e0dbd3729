"""The refiner's scripted replies (a build, an empty edit set, a broken one) and a model that raises once its replies
run out, for the refiner and bootstrap tests."""

import json

from llm.core import ScriptedChatModel

BUILD = {
    "add_nodes": [
        {"id": "search", "type": "ACTION", "description": "Search the corpus"},
        {"id": "answer", "type": "ACTION", "description": "Answer the question"},
    ],
    "delete_nodes": [],
    "add_edges": [
        {"source": "Start", "target": "search", "relation": "LEADS_TO", "condition": None, "guidance": "Search"},
        {"source": "search", "target": "answer", "relation": "LEADS_TO", "condition": None, "guidance": "Answer"},
        {"source": "answer", "target": "End", "relation": "LEADS_TO", "condition": None, "guidance": "Stop"},
    ],
    "delete_edges": [{"source": "Start", "target": "End"}],
}
EMPTY = {"add_nodes": [], "delete_nodes": [], "add_edges": [], "delete_edges": []}
BROKEN = {"add_edges": [{"source": "End", "target": "verify_answer", "relation": "LEADS_TO", "guidance": "Check"}]}


def reply(value) -> str:
    return json.dumps(value)


class BudgetExceeded(Exception):
    pass


class ExplodingModel:
    model_id = "boom"
    provider = "test"

    def __init__(self, replies=()):
        self.replies = list(replies)
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        if self.replies:
            return ScriptedChatModel([self.replies.pop(0)]).complete(request)
        raise BudgetExceeded("no more model calls")
