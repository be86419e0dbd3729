"""An offline replay's case rows, spooled as PostgreSQL COPY text so memory stays flat in the number of cases."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterator
from typing import Any

from procedures import core

from ..models import ReplayArm, ReplayCase


def arms(case: core.CaseResult) -> list[tuple[str, core.ArmResult]]:
    """The case's arms as (arm, result): the candidate, and the active version when it was compared."""
    found = [(ReplayArm.CANDIDATE, case.candidate)]
    if case.active is not None:
        found.append((ReplayArm.ACTIVE, case.active))
    return found


def case_payload(case: core.CaseResult, result: core.ArmResult) -> dict[str, Any]:
    """The `result` column of one arm's case row."""
    payload = result.to_dict()
    payload["regression"] = case.regression
    payload["improvement"] = case.improvement
    return payload


class SpooledCases:
    """An offline replay's case rows (no result run: recorded runs only), kept as lines of PostgreSQL COPY text in
    a spooled temporary file (in memory up to SPOOL_BYTES, then on disk), so memory stays flat in the number of
    cases; services.lifecycle copies them into the table (bulk_create batches on other databases)."""

    SPOOL_BYTES = 8 << 20
    COLUMNS = ("replay_id", "arm", "case_run_id", "result", "answered")

    def __init__(self, replay_id: int) -> None:
        self.replay_id = replay_id
        self._file = tempfile.SpooledTemporaryFile(max_size=self.SPOOL_BYTES, mode="w+b")  # noqa: SIM115 (closed by close())
        self._dumps = json.JSONEncoder(allow_nan=False).encode
        self._parts: dict[tuple, tuple[str, str]] = {}

    def add(self, case: core.CaseResult) -> None:
        regression, improvement = case.regression, case.improvement
        case_run_id = int(case.case_id)
        lines = []
        for arm, result in arms(case):
            # The payload's JSON around tokens and cost repeats from case to case: formatted once per distinct key.
            key = (arm, result.answered, result.passed, result.outcome, result.follows, result.observed_arguments,
                   result.retained_arguments, result.steps, regression, improvement)  # fmt: skip
            parts = self._parts.get(key)
            if parts is None:
                parts = self._parts[key] = self._split(case, result)
            head, tail = parts
            tokens, cost = self._scalar(result.tokens), self._scalar(result.cost)
            lines.append(f'{self.replay_id}\t{arm}\t{case_run_id}\t{head}{tokens}, "cost": {cost}{tail}')
        self._file.write("".join(lines).encode())

    def _split(self, case: core.CaseResult, result: core.ArmResult) -> tuple[str, str]:
        """The result column's text before the payload's tokens value and after its cost value, then the answered
        column (COPY text: backslashes doubled)."""
        payload = case_payload(case, result)
        keys = list(payload)
        at = keys.index("tokens")
        if keys[at + 1] != "cost":
            raise RuntimeError("the case payload must hold cost right after tokens")
        head = self._dumps({key: payload[key] for key in keys[:at]})[:-1] + ', "tokens": '
        tail = ", " + self._dumps({key: payload[key] for key in keys[at + 2 :]})[1:]
        escape = "\\", "\\\\"
        return head.replace(*escape), tail.replace(*escape) + f"\t{'t' if result.answered else 'f'}\n"

    def _scalar(self, value: Any) -> str:
        if type(value) is int or (type(value) is float and math.isfinite(value)):
            return repr(value)  # what json.dumps writes for them
        return self._dumps(value).replace("\\", "\\\\")

    def copy_into(self, cursor: Any, table: str) -> None:
        self._file.seek(0)
        with cursor.copy(f"COPY {table} ({', '.join(self.COLUMNS)}) FROM STDIN") as copy:
            while block := self._file.read(1 << 20):
                copy.write(block)

    def __iter__(self) -> Iterator[ReplayCase]:
        self._file.seek(0)
        for line in self._file:
            replay_id, arm, case_run_id, text, answered = line.decode().rstrip("\n").split("\t")
            yield ReplayCase(
                replay_id=int(replay_id),
                arm=arm,
                case_run_id=int(case_run_id),
                result=json.loads(text.replace("\\\\", "\\")),
                answered=answered == "t",
            )

    def close(self) -> None:
        self._file.close()
