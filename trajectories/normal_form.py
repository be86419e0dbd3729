"""Ingest items already in normal form, as the run schemas without pydantic's Python validators (the OTLP path).

`validate_ingest_items` runs every item through `RunIn`: pydantic's own checks (types, lengths, stripping) and the
schema's Python validators (NFC, no NUL or lone surrogate, plain identifiers, storable JSON, dates in range), which
take most of the time. An item built by a program (the OTLP mapping) is usually already what the schema would make of
it, so `normal_runs` checks each item against a narrow domain on which the schema provably changes nothing and
refuses nothing, and builds the `RunIn` directly from the item's own values; pydantic then passes the instances
through unvalidated, like the JSON ingest's. An item outside that domain (an invisible character in a label, a
non-ASCII identity, an int where a float goes, a value out of range, a field unknown…) is returned as it is and is
validated normally, with the same errors. tests/otlp/test_normal_form.py holds both ways equal.

The domain, per field (what makes the schema the identity on it):
- source, external_id and the labels (intent, graph_workspace, graph_revision, procedure_revision): printable ASCII
  without a space at either end (NFC, stripping and the plain-identifier check change nothing), within the length;
- task, observation, tool, action_family: a str without NUL that encodes as UTF-8, within the length; for the
  stripped ones (tool, action_family) no whitespace at either end (Python's `isspace` covers every character
  pydantic strips);
- metadata and arguments: a dict with str keys whose values are str (no NUL, encodable), int, bool, None, finite
  float, and lists and dicts with str keys of the same, nested less than MAX_DEPTH deep (`_storable` accepts it);
- dates: a datetime in UTC within the schema's range; token counts: an int in range; cost and score: a float in
  range (finite); ok: a bool or None; outcome: one of the three.
Exact types throughout (`type(x) is str`): subclasses take the normal path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from .schemas import (
    EARLIEST,
    LATEST,
    MAX_COST,
    MAX_DEPTH,
    MAX_STEPS_PER_RUN,
    MAX_TASK_CHARS,
    MAX_TOKENS,
    RunIn,
    StepIn,
)

OUTCOMES = frozenset({"success", "failure", "unknown"})
# The maximum lengths of the schema's identifier and label fields (trajectories.schemas.RunIn).
LABELS = {
    "source": 100,
    "external_id": 200,
    "intent": 200,
    "graph_workspace": 100,
    "graph_revision": 100,
    "procedure_revision": 100,
}
REQUIRED_LABELS = frozenset({"source", "external_id"})
TOOL_CHARS = 200
FAMILY_CHARS = 40


def _encodable(text: str) -> bool:
    """No lone surrogate (what else a str holds encodes as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _label(limit: int, *, required: bool) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if type(value) is not str:
            return False
        if not value:
            return not required
        return (
            len(value) <= limit
            and value.isascii()
            and value.isprintable()  # printable ASCII: no NUL, no control character, " " the only space
            and value[0] != " "
            and value[-1] != " "
        )

    return check


def _text(limit: int | None = None, *, stripped: bool = False, required: bool = False) -> Callable[[Any], bool]:
    """Text the schema keeps as it is: no NUL, encodable, within `limit` characters; when the schema strips it, no
    whitespace at either end (`isspace` holds for every character pydantic strips)."""

    def check(value: Any) -> bool:
        if type(value) is not str or (limit is not None and len(value) > limit):
            return False
        if "\x00" in value or not (value.isascii() or _encodable(value)):
            return False
        if not value:
            return not required
        return not stripped or (not value[0].isspace() and not value[-1].isspace())

    return check


def _moment(value: Any) -> bool:
    return value is None or (type(value) is datetime and value.tzinfo is UTC and EARLIEST <= value <= LATEST)


def _storable(value: Any, depth: int) -> bool:
    """Whether `value` (a container at `depth`) is JSON that trajectories.schemas._storable accepts for certain."""
    if depth >= MAX_DEPTH:
        return False
    if type(value) is dict:
        for key in value:
            if type(key) is not str or "\x00" in key or not (key.isascii() or _encodable(key)):
                return False
        children: Any = value.values()
    elif type(value) is list:
        children = value
    else:
        return False
    for child in children:
        kind = type(child)
        if kind is str:
            if "\x00" in child or not (child.isascii() or _encodable(child)):
                return False
        elif kind is int or kind is bool or child is None:
            continue
        elif kind is float:
            if not math.isfinite(child):
                return False
        elif not _storable(child, depth + 1):
            return False
    return True


def _json_object(value: Any) -> bool:
    return type(value) is dict and _storable(value, 0)


def _token_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_TOKENS


def _money(value: Any) -> bool:
    return type(value) is float and 0 <= value <= MAX_COST


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _steps(value: Any) -> bool:
    return type(value) is list and len(value) <= MAX_STEPS_PER_RUN and all(map(_normal_step, value))


# What each field of StepIn and RunIn must hold to be in normal form.
_STEP_CHECKS: dict[str, Callable[[Any], bool]] = {
    "tool": _text(TOOL_CHARS, stripped=True, required=True),
    "action_family": _optional(_text(FAMILY_CHARS, stripped=True)),
    "arguments": _json_object,
    "observation": _text(),
    "ok": lambda value: value is None or type(value) is bool,
    "started_at": _moment,
    "ended_at": _moment,
    "input_tokens": _token_count,
    "cached_input_tokens": _token_count,
    "output_tokens": _token_count,
    "cost": _money,
}
_RUN_CHECKS: dict[str, Callable[[Any], bool]] = {
    **{name: _label(limit, required=name in REQUIRED_LABELS) for name, limit in LABELS.items()},
    "task": _text(MAX_TASK_CHARS),
    "outcome": lambda value: type(value) is str and value in OUTCOMES,
    "score": lambda value: value is None or (type(value) is float and math.isfinite(value)),
    "metadata": _json_object,
    "started_at": _moment,
    "ended_at": _moment,
    "steps": _steps,
}


def _normal(item: Any, checks: dict[str, Callable[[Any], bool]], required: tuple[str, ...]) -> bool:
    if type(item) is not dict:
        return False
    for key, value in item.items():
        check = checks.get(key)
        if check is None or not check(value):  # a field the schema does not have is refused there
            return False
    return all(name in item for name in required)


def _normal_step(step: Any) -> bool:
    return _normal(step, _STEP_CHECKS, ("tool",))


class _Shape:
    """How to build one model's instances: its fields in order, their plain defaults, the ones made by a factory."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self.defaults = {name: field.default for name, field in model.model_fields.items()}
        self.factories = {
            name: field.default_factory
            for name, field in model.model_fields.items()
            if field.default_factory is not None
        }

    def build(self, given: dict[str, Any]) -> Any:
        """An instance holding `given`'s values (the rest defaulted) with `given`'s keys as the fields set, as
        pydantic's validation leaves it (its `model_construct` does the same, field by field, at ten times the
        cost)."""
        values = {**self.defaults, **given}  # the fields' order; every key of `given` is a field
        for name, factory in self.factories.items():
            if name not in given:
                values[name] = factory()
        instance = self.model.__new__(self.model)
        object.__setattr__(instance, "__dict__", values)
        object.__setattr__(instance, "__pydantic_fields_set__", set(given))
        object.__setattr__(instance, "__pydantic_extra__", None)
        object.__setattr__(instance, "__pydantic_private__", None)
        return instance


_RUN, _STEP = _Shape(RunIn), _Shape(StepIn)
_RUN_REQUIRED = tuple(REQUIRED_LABELS)


def _run(item: dict[str, Any]) -> RunIn:
    run = _RUN.build(item)
    run.__dict__["steps"] = [_STEP.build(step) for step in run.steps]
    return run


def normal_runs(items: Sequence[Any]) -> list[Any]:
    """Each item as the `RunIn` the schema would make of it when it is in normal form, else the item itself (for
    `run_ingest_batch` to validate, with the usual errors). The batch-level rules (duplicates, the evaluation
    namespace) are left to `validate_ingest_items`, which applies them to both."""
    return [_run(item) if _normal(item, _RUN_CHECKS, _RUN_REQUIRED) else item for item in items]
