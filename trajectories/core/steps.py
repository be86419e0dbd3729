"""`TrajectoryStep`, `TrajectoryRun` and `normalize_steps`: the reference value types (trajectory-mining §2.0)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

Scalar = str | int | float | bool | None

OUTCOMES = ("success", "failure", "unknown")
TOOL_MAX_CHARS = 60
ARGUMENT_KEY_MAX_CHARS = 40
ARGUMENT_VALUE_MAX_CHARS = 160
SUMMARY_MAX_CHARS = 300
EVENT_ID_MAX_CHARS = 160
SECRET_KEY_PARTS = ("body", "content", "token", "secret", "password", "key")

_NOT_TOOL_CHARS = re.compile(r"[^a-z0-9_-]")
_NOT_KEY_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class FamilyMap(Mapping[str, str]):
    """A read-only tool -> action family map: exact tool names, then name prefixes such as `list_`."""

    def __init__(self, exact: Mapping[str, str], prefixes: Mapping[str, str] | None = None) -> None:
        self._exact = MappingProxyType(dict(exact))
        self._prefixes = MappingProxyType(dict(prefixes or {}))

    def __getitem__(self, tool: str) -> str:
        if tool in self._exact:
            return self._exact[tool]
        for prefix, family in self._prefixes.items():
            if tool.startswith(prefix):
                return family
        raise KeyError(tool)

    def __iter__(self) -> Iterator[str]:
        return iter(self._exact)

    def __len__(self) -> int:
        return len(self._exact)


DEFAULT_FAMILY_MAP: Mapping[str, str] = FamilyMap(
    {
        "search": "discover",
        "read_document": "inspect",
        "tag_document": "change",
        "untag_document": "change",
        "create_task": "change",
        "approve_answer": "approve",
        "sync_source": "execute",
        "run_workflow": "execute",
        "navigate": "navigate",
    },
    prefixes={"list_": "inspect", "inspect_": "inspect"},
)


@dataclass(frozen=True)
class TrajectoryStep:
    ordinal: int
    tool: str
    action_family: str
    arguments: Mapping[str, Scalar] = field(default_factory=dict)
    summary: str = ""
    ok: bool | None = None
    event_id: str = ""
    parent_id: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    @property
    def duration(self) -> float:
        if self.started_at is None or self.ended_at is None:
            return 0
        return max(0, self.ended_at - self.started_at)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.cached_input_tokens + self.output_tokens


@dataclass(frozen=True, kw_only=True)
class TrajectoryRun:
    trajectory_id: str
    steps: tuple[TrajectoryStep, ...]
    outcome: str = "unknown"

    def __post_init__(self) -> None:
        if not isinstance(self.trajectory_id, str) or not self.trajectory_id.strip():
            raise ValueError("trajectory_id must be a non-empty string")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, not {self.outcome!r}")
        object.__setattr__(self, "steps", tuple(self.steps))


def normalize_tool(name: Any) -> str:
    tool = _NOT_TOOL_CHARS.sub("", str(name).casefold())[:TOOL_MAX_CHARS]
    return tool or "unknown"


def is_secret_key(key: str) -> bool:
    folded = key.casefold()
    return any(part in folded for part in SECRET_KEY_PARTS)


def safe_arguments(args: Any) -> Mapping[str, Scalar]:
    """Scalar arguments under clean, non-secret keys, as a read-only mapping."""
    kept: dict[str, Scalar] = {}
    if isinstance(args, dict):
        for raw_key, value in args.items():
            key = _NOT_KEY_CHARS.sub("", str(raw_key))[:ARGUMENT_KEY_MAX_CHARS]
            if not key or is_secret_key(key):
                continue
            if isinstance(value, str):
                kept[key] = value[:ARGUMENT_VALUE_MAX_CHARS]
            elif value is None or isinstance(value, int | float | bool):
                kept[key] = value
    return MappingProxyType(kept)


def _finite_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _token_count(value: Any) -> int:
    number = _finite_float(value)
    return max(0, int(number)) if number is not None else 0


def _cost(value: Any) -> float:
    number = _finite_float(value)
    return max(0.0, number) if number is not None else 0.0


def _short_text(value: Any, limit: int) -> str:
    return str(value)[:limit]


def normalize_steps(
    events: Iterable[Mapping[str, Any]], *, family_map: Mapping[str, str] = DEFAULT_FAMILY_MAP
) -> tuple[TrajectoryStep, ...]:
    """Raw event dicts -> steps: clean tool names, safe arguments, real bools, finite numbers, capped texts."""
    steps = []
    for ordinal, event in enumerate(events):
        tool = normalize_tool(event.get("name") or "unknown")
        ok = event.get("ok")
        steps.append(
            TrajectoryStep(
                ordinal=ordinal,
                tool=tool,
                action_family=family_map.get(tool, "other"),
                arguments=safe_arguments(event.get("args")),
                summary=_short_text(event.get("summary", ""), SUMMARY_MAX_CHARS),
                ok=ok if isinstance(ok, bool) else None,
                event_id=_short_text(event.get("event_id") or event.get("id") or "", EVENT_ID_MAX_CHARS),
                parent_id=_short_text(event.get("parent_id") or "", EVENT_ID_MAX_CHARS),
                started_at=_finite_float(event.get("started_at")),
                ended_at=_finite_float(event.get("ended_at")),
                input_tokens=_token_count(event.get("input_tokens")),
                cached_input_tokens=_token_count(event.get("cached_input_tokens")),
                output_tokens=_token_count(event.get("output_tokens")),
                cost=_cost(event.get("cost")),
            )
        )
    return tuple(steps)
