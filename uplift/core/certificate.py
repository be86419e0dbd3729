"""The with-versus-without certificate of a candidate: the same held-out tasks under the candidate and under the
version it replaces (or under no artifact), paired task by task.

Per task both outcomes (passed, score in [0, 1]); in total the repairs (failed → passed), the breakages
(passed → failed), the breakages on the critical tasks operators tagged, and the mean paired difference of success
and of score, each with a betting confidence interval (uplift.core.betting) at the level the split's reuse budget
leaves (uplift.core.reuse). A policy (uplift.core.policy) then says whether the certificate passes.

Pairing rules: a task the control arm did not answer cannot be compared and is left out (listed); a task the
candidate arm did not answer counts as a candidate failure with score 0 (the candidate has to prove itself). A
missing score is 1 for a pass and 0 for a failure.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .betting import Interval, difference_interval

SCHEMA = 1


@dataclass(frozen=True)
class ArmOutcome:
    """What one arm did on one task. `answered` False: no run came back (the pass and score are then ignored)."""

    passed: bool = False
    score: float | None = None
    answered: bool = True
    run_id: int | None = None

    @property
    def value(self) -> float:
        if not self.answered:
            return 0.0
        if self.score is None:
            return 1.0 if self.passed else 0.0
        return min(1.0, max(0.0, float(self.score)))

    @property
    def success(self) -> bool:
        return self.answered and self.passed


@dataclass(frozen=True)
class PairedTask:
    task_id: str
    control: ArmOutcome
    candidate: ArmOutcome
    critical: bool = False
    model: str = ""  # the agent's model on this task (runs' metadata.model), "" when unknown

    @property
    def comparable(self) -> bool:
        return self.control.answered

    @property
    def outcome(self) -> str:
        """repair, breakage, both_passed or both_failed (of a comparable task)."""
        before, after = self.control.success, self.candidate.success
        if before == after:
            return "both_passed" if before else "both_failed"
        return "repair" if after else "breakage"


@dataclass(frozen=True)
class Difference:
    """A mean paired difference on [-1, 1] (candidate minus control) with its interval; mean None when no task
    could be compared (the interval is then the whole scale)."""

    mean: float | None
    low: float
    high: float

    @classmethod
    def of(cls, interval: Interval) -> Difference:
        mean = None if interval.n == 0 else interval.mean
        return cls(mean=mean, low=interval.low, high=interval.high)

    def to_document(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Certificate:
    n: int
    repairs: int
    breakages: int
    both_passed: int
    both_failed: int
    critical_breakages: tuple[str, ...]
    success: Difference
    score: Difference
    alpha: float
    excluded: tuple[str, ...]  # tasks the control arm did not answer
    candidate_unanswered: tuple[str, ...]
    models: tuple[str, ...]  # the agents' models the tasks were measured with, sorted
    tasks: tuple[PairedTask, ...] = field(repr=False, default=())

    @property
    def confidence(self) -> float:
        return 1 - self.alpha

    def difference(self, metric: str) -> Difference:
        if metric not in ("success", "score"):
            raise ValueError(f"unknown metric {metric!r}: success or score")
        return self.success if metric == "success" else self.score

    def totals(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "n": self.n,
            "repairs": self.repairs,
            "breakages": self.breakages,
            "both_passed": self.both_passed,
            "both_failed": self.both_failed,
            "critical_breakages": list(self.critical_breakages),
            "success": self.success.to_document(),
            "score": self.score.to_document(),
            "alpha": self.alpha,
            "confidence": self.confidence,
            "excluded": list(self.excluded),
            "candidate_unanswered": list(self.candidate_unanswered),
            "models": list(self.models),
        }

    def task_rows(self) -> list[dict[str, Any]]:
        """The per-task rows (task id, critical, model, outcome, both arms): computed once, a fresh list each call."""
        rows = self.__dict__.get("_task_rows")
        if rows is None:
            rows = self.__dict__["_task_rows"] = [_task_row(task) for task in self.tasks]
        return list(rows)

    def task_columns(self) -> dict[str, Any]:
        """The per-task rows as columns (TASK_COLUMNS, one list each, in the tasks' order): what a certificate
        stores. About a seventh of the rows' JSON, and lists of plain values encode at C speed."""
        columns = self.canonical_columns()[0]
        return {"schema": columns["schema"], "columns": {name: list(v) for name, v in columns["columns"].items()}}

    def canonical_columns(self) -> tuple[dict[str, Any], bytes]:
        """task_columns() and its canonical JSON (computed once: do not change the document)."""
        found = self.__dict__.get("_canonical_columns")
        if found is None:
            columns = self.__dict__.get("_columns") or _Columns(self.tasks)  # certify's, when it made this one
            found = self.__dict__["_canonical_columns"] = columns.document()
        return found


TASK_COLUMNS = (
    "task_id", "critical", "model", "outcome",
    "control_passed", "control_score", "control_answered", "control_run_id",
    "candidate_passed", "candidate_score", "candidate_answered", "candidate_run_id",
)  # fmt: skip
_OUTCOMES = ("excluded", "both_failed", "repair", "breakage", "both_passed")  # by 1 + 2 control + candidate, 0
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')  # what json.dumps(ensure_ascii=False) escapes in a string
_SCORES = np.array([0.0, 1.0, None], dtype=object)  # an ungraded arm's score by code: failed, passed, unanswered
_SCORE_TEXT = np.array(["0.0", "1.0", "null"], dtype=object)  # the same in JSON
_OUTCOME_NAMES = np.array(_OUTCOMES, dtype=object)
_OUTCOME_TEXT = np.array([f'"{name}"' for name in _OUTCOMES], dtype=object)
_BOOL_TEXT = np.array(["false", "true"], dtype=object)


class _Arm:
    """One arm's outcomes of every task, as columns: the values as given and the derived ones as arrays."""

    def __init__(self, arms: Sequence[ArmOutcome]) -> None:
        n = len(arms)
        self.arms = arms
        self.passed = [arm.passed for arm in arms]
        self.score = [arm.score for arm in arms]
        self.answered = [arm.answered for arm in arms]
        self.run_id = [arm.run_id for arm in arms]
        self.answered_mask = np.fromiter(self.answered, dtype=bool, count=n)
        self.success = np.fromiter(self.passed, dtype=bool, count=n) & self.answered_mask  # passed and answered
        self.ungraded = self.score.count(None) == n  # every score is its pass (or it did not answer)

    def scores(self) -> tuple[list, str | None]:
        """The score column (arm.value, None where unanswered) and, when ungraded, its JSON list's inner text."""
        if not self.ungraded:
            return [arm.value if arm.answered else None for arm in self.arms], None
        codes = np.where(self.answered_mask, self.success, 2)
        return _SCORES[codes].tolist(), ",".join(_SCORE_TEXT[codes].tolist())


class _Columns:
    """The tasks as columns: each task's fields and both arms' (one list per field: no tuple per task), what
    `certify` computes from and what a certificate stores (`task_columns`, `canonical_columns`)."""

    def __init__(self, tasks: tuple[PairedTask, ...]) -> None:
        self.ids = [task.task_id for task in tasks]
        self.critical = [task.critical for task in tasks]
        self.models = [task.model for task in tasks]
        self.control = _Arm([task.control for task in tasks])
        self.candidate = _Arm([task.candidate for task in tasks])

    def document(self) -> tuple[dict[str, Any], bytes]:
        """{"schema", "columns"} (TASK_COLUMNS, one list each, in the tasks' order) and its canonical JSON (sorted
        keys, no spaces, UTF-8: json.dumps's, byte for byte), built column by column: a list of strings needing no
        escape is joined, the outcomes, passes and ungraded scores are written from their codes, the rest is
        json.dumps's."""
        control, candidate = self.control, self.candidate
        outcome = np.where(control.answered_mask, 1 + 2 * control.success + candidate.success, 0)
        control_score, control_score_text = control.scores()
        candidate_score, candidate_score_text = candidate.scores()
        columns = {
            "task_id": self.ids,
            "critical": self.critical,
            "model": self.models,
            "outcome": _OUTCOME_NAMES[outcome].tolist(),
            "control_passed": control.success.tolist(),
            "control_score": control_score,
            "control_answered": control.answered,
            "control_run_id": control.run_id,
            "candidate_passed": candidate.success.tolist(),
            "candidate_score": candidate_score,
            "candidate_answered": candidate.answered,
            "candidate_run_id": candidate.run_id,
        }
        known = {  # the inner text of the columns written from their codes
            "outcome": ",".join(_OUTCOME_TEXT[outcome].tolist()),
            "control_passed": ",".join(_BOOL_TEXT[control.success.astype(np.intp)].tolist()),
            "candidate_passed": ",".join(_BOOL_TEXT[candidate.success.astype(np.intp)].tolist()),
            "control_score": control_score_text,
            "candidate_score": candidate_score_text,
        }
        parts = []
        for name in sorted(columns):
            inner = known.get(name)
            text = f"[{inner}]" if inner is not None else _json_list(columns[name])
            parts.append(f'"{name}":{text}')
        canonical = '{"columns":{' + ",".join(parts) + '},"schema":' + json.dumps(SCHEMA) + "}"
        return {"schema": SCHEMA, "columns": columns}, canonical.encode()


def _json_list(values: list) -> str:
    """json.dumps(values, separators=(",", ":"), ensure_ascii=False): joined when they are strings none of which
    needs an escape (ids, models, outcomes), else json.dumps's own."""
    if values and type(values[0]) is str:
        try:
            joined = '","'.join(values)
        except TypeError:  # not all strings
            joined = None
        if joined is not None and _plain(joined, quotes=2 * (len(values) - 1)):
            return f'["{joined}"]'
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def _plain(text: str, *, quotes: int) -> bool:
    """No character json.dumps(ensure_ascii=False) would escape (a quote but the `quotes` joining the strings, a
    backslash, a control character)."""
    if text.count('"') != quotes or "\\" in text:
        return False
    return text.isprintable() or not _ESCAPED.search(text)  # printable: no control character (a fast C scan)


def task_columns(tasks: Iterable[PairedTask]) -> dict[str, Any]:
    """The per-task rows as columns (TASK_COLUMNS, one list each, in the tasks' order): what a certificate stores."""
    return _Columns(tuple(tasks)).document()[0]


def canonical_columns(tasks: Iterable[PairedTask]) -> tuple[dict[str, Any], bytes]:
    """task_columns(tasks) and its canonical JSON (json.dumps with sorted keys, no spaces, ensure_ascii off, as
    UTF-8), what a certificate's digest stands on."""
    return _Columns(tuple(tasks)).document()


def task_rows(document: Any) -> list[dict[str, Any]]:
    """The per-task rows of a stored certificate's tasks: its columns (task_columns), or the rows themselves as
    certificates stored them before columns."""
    if isinstance(document, list):
        return document
    if not isinstance(document, Mapping) or not isinstance(document.get("columns"), Mapping):
        return []
    columns = document["columns"]
    rows = []
    for values in zip(*(columns.get(name, ()) for name in TASK_COLUMNS), strict=False):
        row = dict(zip(TASK_COLUMNS, values, strict=True))
        rows.append(
            {
                "task_id": row["task_id"],
                "critical": row["critical"],
                "model": row["model"],
                "outcome": row["outcome"],
                "control": {key: row[f"control_{key}"] for key in ("passed", "score", "answered", "run_id")},
                "candidate": {key: row[f"candidate_{key}"] for key in ("passed", "score", "answered", "run_id")},
            }
        )
    return rows


def _task_row(task: PairedTask) -> dict[str, Any]:
    control, candidate = task.control, task.candidate
    if not control.answered:
        outcome = "excluded"
    elif control.passed == (after := candidate.answered and candidate.passed):
        outcome = "both_passed" if after else "both_failed"
    else:
        outcome = "repair" if after else "breakage"
    return {
        "task_id": task.task_id,
        "critical": task.critical,
        "model": task.model,
        "outcome": outcome,
        "control": _arm_document(control),
        "candidate": _arm_document(candidate),
    }


def _arm_document(arm: ArmOutcome) -> dict[str, Any]:
    if not arm.answered:
        return {"passed": False, "score": None, "answered": False, "run_id": arm.run_id}
    score = arm.score
    value = (1.0 if arm.passed else 0.0) if score is None else min(1.0, max(0.0, float(score)))
    return {"passed": arm.passed, "score": value, "answered": True, "run_id": arm.run_id}


def betting_order(task_id: str) -> tuple[int, str]:
    """The order the intervals read the pairs in: a hash of the task id (CRC-32, then the id for ties), so it is
    fixed for a set of tasks and owes nothing to their outcomes (the betting interval is valid for an order chosen
    independently of the data; sorted by outcome it is not). Not a secret: nothing is gained by choosing ids."""
    return zlib.crc32(task_id.encode()), task_id


def certify(tasks: Iterable[PairedTask], *, alpha: float, critical: Iterable[str] = ()) -> Certificate:
    """The certificate of `tasks` at level 1 - alpha (the tasks are listed in the order given; the intervals read
    them in `betting_order`); a task is critical when it says so or its id is in `critical`."""
    tasks = tuple(tasks)
    critical = frozenset(critical)
    if critical:
        tasks = tuple(
            task if task.critical or task.task_id not in critical else replace(task, critical=True) for task in tasks
        )
    # Columns, not a loop with branches per task (10,000 tasks a certificate): each field read once into a list,
    # then arrays.
    columns = _Columns(tasks)
    ids, control, candidate = columns.ids, columns.control, columns.candidate
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        twice = next(task_id for task_id in ids if task_id in seen or seen.add(task_id))
        raise ValueError(f"task {twice!r} is paired twice")
    order = _betting_order(ids, np.flatnonzero(control.answered_mask))  # the compared tasks, in betting_order
    before = control.success[order].astype(float)
    after = candidate.success[order].astype(float)
    success = after - before
    positions = order.tolist()
    ungraded = (control.ungraded and candidate.ungraded) or all(
        control.score[i] is None and candidate.score[i] is None for i in positions
    )
    if ungraded:  # every score is its success: one difference twice, one interval does
        score = success
    else:
        controls, candidates = control.arms, candidate.arms
        score = np.fromiter((candidates[i].value - controls[i].value for i in positions), dtype=float, count=len(order))
    repairs, breakages = int(np.sum(success > 0)), int(np.sum(success < 0))
    both_passed = int(np.sum((before == 1) & (after == 1)))
    success_interval = difference_interval(success, alpha)
    score_interval = success_interval if ungraded else difference_interval(score, alpha)
    broken = []
    if any(columns.critical):
        critical_mask = np.fromiter(map(bool, columns.critical), dtype=bool, count=len(ids))
        broken = order[critical_mask[order] & (before == 1) & (after == 0)].tolist()
    models = columns.models
    compared_models = set(models) if len(order) == len(ids) else set(map(models.__getitem__, positions))
    certificate = Certificate(
        n=len(order),
        repairs=repairs,
        breakages=breakages,
        both_passed=both_passed,
        both_failed=len(order) - repairs - breakages - both_passed,
        critical_breakages=tuple(ids[i] for i in broken),
        success=Difference.of(success_interval),
        score=Difference.of(score_interval),
        alpha=alpha,
        excluded=tuple(ids[i] for i in np.flatnonzero(~control.answered_mask).tolist()),
        candidate_unanswered=tuple(ids[i] for i in order[~candidate.answered_mask[order]].tolist()),
        models=tuple(sorted(model for model in compared_models if model)),
        tasks=tasks,
    )
    certificate.__dict__["_columns"] = columns
    return certificate


def _betting_order(ids: Sequence[str], positions: np.ndarray) -> np.ndarray:
    """`positions` (indices into `ids`) ordered by betting_order of their ids: by CRC-32, by id where CRCs tie."""
    if not len(positions):
        return positions
    chosen = ids if len(positions) == len(ids) else [ids[i] for i in positions.tolist()]
    crc = np.fromiter(map(zlib.crc32, map(str.encode, chosen)), dtype=np.int64, count=len(chosen))
    order = np.argsort(crc)  # unique CRCs (the usual case) have one order, so any sort finds it
    ranked = crc[order]
    if np.any(ranked[1:] == ranked[:-1]):  # a CRC shared by two ids (rare): the ids break the tie
        order = np.lexsort((np.array(chosen, dtype=str), crc))
    return positions[order]


def paired_tasks(
    control: Mapping[str, ArmOutcome],
    candidate: Mapping[str, ArmOutcome],
    *,
    critical: Iterable[str] = (),
    models: Mapping[str, str] | None = None,
) -> list[PairedTask]:
    """Pair two arms' outcomes by task id (sorted), every task of either arm: a task one arm lacks is unanswered
    there."""
    critical = set(critical)
    models = models or {}
    missing = ArmOutcome(answered=False)
    return [
        PairedTask(
            task_id=task_id,
            control=control.get(task_id, missing),
            candidate=candidate.get(task_id, missing),
            critical=task_id in critical,
            model=models.get(task_id, ""),
        )
        for task_id in sorted(set(control) | set(candidate), key=_natural)
    ]


def _natural(task_id: str) -> tuple:
    """Numeric ids in numeric order (run ids), others after them in text order."""
    return (0, int(task_id), "") if task_id.isdigit() else (1, 0, task_id)
