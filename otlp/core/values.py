"""Value helpers of the mapping: bounded JSON, token counts, costs, times, and the usage of one span."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .spans import SpanRecord, clean_text

MAX_TOKENS = 2**31 - 1
MAX_COST = 1e12
ARGUMENTS_MAX_DEPTH = 24

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def moment(nanos: int) -> datetime | None:
    if nanos <= 0:
        return None
    return _EPOCH + timedelta(0, 0, nanos // 1000)  # positional: a third faster than microseconds=


def count(value: Any) -> int:
    """A token count: a non-negative integer (an integral float or a decimal string too), capped; else 0."""
    if type(value) is int:  # the common case first (bool is not int here: type() is exact)
        return min(value, MAX_TOKENS) if value > 0 else 0
    if isinstance(value, bool):
        return 0
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and value > 0:
        return min(value, MAX_TOKENS)
    return 0


def money(value: Any) -> float:
    if type(value) is float:  # the common case first
        return min(value, MAX_COST) if value > 0 and math.isfinite(value) else 0.0
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return 0.0
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return min(float(value), MAX_COST)
    return 0.0


def first(attributes: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first of `keys` that is present and not empty, else None."""
    for key in keys:
        value = attributes.get(key)
        if value is not None and value != "":
            return value
    return None


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def bounded(value: Any, *, depth: int, max_items: int | None = None, max_chars: int | None = None) -> Any:
    """A JSON value cut to size: nesting past `depth` as a marker, lists and objects past `max_items`, strings past
    `max_chars` (each None: no cut), text cleaned of NUL and lone surrogates, non-finite numbers as None."""
    if isinstance(value, str):
        value = clean_text(value)
        return value[:max_chars] if max_chars is not None else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int):
        return value
    if depth <= 0:
        return "[nested too deep]"
    if isinstance(value, dict):
        items = list(value.items())
        if max_items is not None:
            items = items[:max_items]
        return {
            clean_text(str(key)): bounded(child, depth=depth - 1, max_items=max_items, max_chars=max_chars)
            for key, child in items
        }
    if isinstance(value, list | tuple):
        items = list(value) if max_items is None else list(value)[:max_items]
        return [bounded(child, depth=depth - 1, max_items=max_items, max_chars=max_chars) for child in items]
    return clean_text(str(value))


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0  # uncached input
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def add(self, other: Usage) -> None:
        self.input_tokens = min(self.input_tokens + other.input_tokens, MAX_TOKENS)
        self.cached_input_tokens = min(self.cached_input_tokens + other.cached_input_tokens, MAX_TOKENS)
        self.output_tokens = min(self.output_tokens + other.output_tokens, MAX_TOKENS)
        self.cost = min(self.cost + other.cost, MAX_COST)

    @property
    def empty(self) -> bool:
        return not (self.input_tokens or self.cached_input_tokens or self.output_tokens or self.cost)

    @property
    def tokens(self) -> bool:
        return bool(self.input_tokens or self.cached_input_tokens or self.output_tokens)

    def as_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
        }


# Where each part of a span's usage is read, first key first.
INPUT_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
CACHED_KEYS = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
)
OUTPUT_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
COST_KEYS = ("waymark.cost", "gen_ai.usage.cost", "llm.cost.total")
USAGE_KEYS = frozenset((*INPUT_KEYS, *CACHED_KEYS, *OUTPUT_KEYS, *COST_KEYS))


def usage(span: SpanRecord) -> Usage:
    """Token counts and cost of a span. Both conventions count cached tokens inside the input tokens; Waymark keeps
    uncached and cached input apart, so the cached part is taken out of the input."""
    attrs = span.attributes
    if USAGE_KEYS.isdisjoint(attrs):  # most tool spans: nothing to read
        return Usage()
    total_input, cached, output = (
        _count_at(attrs, INPUT_KEYS),
        _count_at(attrs, CACHED_KEYS),
        _count_at(attrs, OUTPUT_KEYS),
    )
    cached = min(cached, total_input) if total_input else cached
    cost = money(first(attrs, COST_KEYS))
    return Usage(max(0, total_input - cached), cached, output, cost)


def _count_at(attrs: dict[str, Any], keys: tuple[str, ...]) -> int:
    """count(first(attrs, keys)), with the common case (the first key holds a plain int) read at once."""
    value = attrs.get(keys[0])
    if type(value) is int:
        return min(value, MAX_TOKENS) if value > 0 else 0
    return count(first(attrs, keys))


# The model that answered (for the price), else the one asked for; `model_name` is pydantic-ai's run span.
RESPONSE_MODEL_KEYS = ("gen_ai.response.model", "llm.response.model_name")
REQUEST_MODEL_KEYS = ("gen_ai.request.model", "llm.model_name", "llm.request.model_name", "model_name")
ANSWERED_FIRST = (*RESPONSE_MODEL_KEYS, *REQUEST_MODEL_KEYS)
ASKED_FIRST = (*REQUEST_MODEL_KEYS, *RESPONSE_MODEL_KEYS)
MODEL_KEYS = frozenset(ANSWERED_FIRST)


def model_id(span: SpanRecord, *, answered: bool = True) -> str:
    if MODEL_KEYS.isdisjoint(span.attributes):  # most spans name no model: nothing to read
        return ""
    value = first(span.attributes, ANSWERED_FIRST if answered else ASKED_FIRST)
    return clean_text(value).strip()[:200] if isinstance(value, str) else ""
