"""An optional regex redactor for free texts (tasks, observations, string arguments) before they are stored."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"


class Redactor:
    """Replaces every match of any pattern with `[redacted]`. No patterns: texts pass through unchanged."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        sources = [p for p in patterns if p]
        try:
            self._pattern = re.compile("|".join(f"(?:{p})" for p in sources)) if sources else None
        except re.error as exc:
            raise ValueError(f"invalid redaction pattern: {exc}") from exc

    @property
    def active(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        if self._pattern is None or not value:
            return value
        return self._pattern.sub(REDACTED, value)

    def value(self, value: Any) -> Any:
        """Strings redacted, containers walked (dict keys kept), other values unchanged."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value
