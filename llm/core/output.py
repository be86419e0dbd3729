"""Checks shared by every parser of model output."""

from __future__ import annotations

import json
import re
from typing import Any

from .protocol import MalformedModelOutput

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


def require_list(value: Any, key: str, recipe: str) -> list[dict]:
    """`value[key]` when `value` is a dict and that item is a list of dicts; else MalformedModelOutput."""
    if not isinstance(value, dict):
        raise MalformedModelOutput(f"{recipe} must return a JSON object")
    rows = value.get(key)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise MalformedModelOutput(f"{recipe}.{key} must be a JSON array of objects")
    return rows


_DECODER = json.JSONDecoder()


def _first_object(text: str) -> dict | None:
    """The first `{…}` in `text` that decodes as a JSON object (the decoder stops at its balanced end)."""
    position = text.find("{")
    while position != -1:
        try:
            parsed, _ = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):  # deeply nested garbage is as malformed as any other
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        position = text.find("{", position + 1)
    return None


def extract_json_object(text: str, *, recipe: str = "model") -> dict:
    """The first JSON object in a reply, tolerating prose and code fences (fenced blocks are looked at first)."""
    if not isinstance(text, str):
        raise MalformedModelOutput(f"{recipe} must return text")
    for fenced in _FENCE.findall(text):
        found = _first_object(fenced)
        if found is not None:
            return found
    found = _first_object(text)
    if found is None:
        raise MalformedModelOutput(f"{recipe} must return a JSON object")
    return found
