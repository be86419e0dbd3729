"""The search document of a run: one bounded text per run, built at ingest, that full-text search indexes.

Searching one column of the run (a GIN index over its tsvector on PostgreSQL) keeps a search one indexed query
however many steps are stored. The document is bounded (MAX_DOCUMENT_CHARS) and shared fairly between the steps,
so a late step's observation is searchable too; a run with very many long steps keeps a prefix of each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_DOCUMENT_CHARS = 20_000
TASK_CHARS = 2_000
MIN_STEP_SHARE = 200


@dataclass(frozen=True)
class SearchStep:
    tool: str
    arguments: Mapping[str, Any]
    observation: str


def _argument_text(arguments: Mapping[str, Any]) -> str:
    parts: list[str] = []
    pending: list[Any] = [arguments]
    while pending:
        value = pending.pop(0)
        if isinstance(value, Mapping):
            for key, inner in value.items():
                parts.append(str(key))
                pending.append(inner)
        elif isinstance(value, list | tuple):
            pending.extend(value)
        elif value is not None:
            parts.append(str(value))
    return " ".join(parts)


def search_document(task: str, steps: Sequence[SearchStep]) -> str:
    """Task (first TASK_CHARS), the distinct tool names, then each step's tool, arguments and observation, each step
    cut to its fair share of what is left; at most MAX_DOCUMENT_CHARS characters, NUL-free."""
    tools = list(dict.fromkeys(step.tool for step in steps))
    head = " ".join([task[:TASK_CHARS], *tools]).strip()
    parts = [head]
    left = MAX_DOCUMENT_CHARS - len(head)
    for index, step in enumerate(steps):
        if left <= 0:
            break
        share = max(MIN_STEP_SHARE, left // (len(steps) - index))
        text = " ".join(filter(None, [step.tool, _argument_text(step.arguments), step.observation]))[:share]
        parts.append(text)
        left -= len(text) + 1
    return "\n".join(parts)[:MAX_DOCUMENT_CHARS].replace("\x00", " ")


def search_terms(query: str) -> list[str]:
    """The whitespace-separated terms of a query without quotes (the SQLite fallback matches each as a substring)."""
    return [term for term in (part.strip("\"'") for part in query.split()) if term]
