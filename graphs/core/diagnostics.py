"""Structural diagnostics (spec §3): stable codes, a severity, and the error that carries them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ERROR = "error"
WARNING = "warning"
SEVERITIES = (ERROR, WARNING)

# Every code of spec §3 with its default severity. `malformed_edit` is a warning only for unknown extra keys.
DIAGNOSTIC_CODES: Mapping[str, str] = {
    "missing_sentinel": ERROR,
    "malformed_edit": ERROR,
    "unknown_node_type": ERROR,
    "missing_endpoint": ERROR,
    "unknown_relation": ERROR,
    "duplicate_edge": ERROR,
    "duplicate_node": ERROR,
    "reserved_node": ERROR,
    "no_path_to_terminal": ERROR,
    "unreachable_from_start": WARNING,
    "unknown_attribute": WARNING,
    "missing_guidance": WARNING,
    "cycle_repaired": WARNING,
    "unknown_action": WARNING,
    "no_such_edge": WARNING,
    "no_such_node": WARNING,
    "skeleton_completed": WARNING,
    "no_action": ERROR,
}


@dataclass(frozen=True)
class Diagnostic:
    """One structural finding; renders as `severity:code [subject]: message`."""

    code: str
    message: str
    subject: str | None = None
    severity: str = ERROR

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "subject": self.subject, "severity": self.severity}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Diagnostic:
        return cls(
            code=str(value["code"]),
            message=str(value.get("message", "")),
            subject=value.get("subject"),
            severity=str(value.get("severity", ERROR)),
        )

    def __str__(self) -> str:
        where = f" [{self.subject}]" if self.subject else ""
        return f"{self.severity}:{self.code}{where}: {self.message}"


def error(code: str, message: str, subject: str | None = None) -> Diagnostic:
    return Diagnostic(code, message, subject, ERROR)


def warning(code: str, message: str, subject: str | None = None) -> Diagnostic:
    return Diagnostic(code, message, subject, WARNING)


def errors_in(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.is_error]


def warnings_in(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if not d.is_error]


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)


class GraphError(ValueError):
    """A graph, document or edit set that fails the structural checks; `diagnostics` says why."""

    def __init__(self, diagnostics: Iterable[Diagnostic], message: str | None = None) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__(message or "; ".join(str(d) for d in self.diagnostics) or "invalid graph")
