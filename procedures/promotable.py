"""Procedure versions as a promotable kind of the reviews registry (registered in ProceduresConfig.ready).

parent_key = the procedure's pk, candidate ids = version pks (strings). Gate: the newest finished replay of the
version (its regression gate report). Activation runs inside the review's transaction: lock the procedure, check
the expected active version, retire the previous one, move the pointer, bump `revision`, audit `procedure.activate`
(rollback targets read this history). This is the only way a procedure's active version changes.
"""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from typing import Any

from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from accounts.services import Actor, audit_record
from common.parsing import int_or_none
from intents.taxonomy.selectors import runs_of_intent
from reviews.activations import activated_since
from reviews.registry import (
    ActiveArtifact,
    ArmRun,
    CanaryState,
    Choice,
    Description,
    DiffView,
    GateEvidence,
    PromotableKind,
    find_candidate,
    move_active_version,
    number_labels,
    register_kind,
    significant,
)
from trajectories.selectors import model_counts, step_observations
from uplift.core.safety import LearnedText, Source

from .core.replay import HIGHER_IS_BETTER
from .models import Procedure, ProcedureVersion, ReplayArm, ReplayCase, ReplayRun, ReplayStatus, VersionStatus

KIND = "procedure_version"
SOURCE_RUNS_READ = 50  # source runs whose steps the safety scan reads for the observations a text may come from
CASES_SHOWN = 200  # held-out cases listed in a gate snapshot (the total is kept beside them)
PROPOSABLE = (VersionStatus.CANDIDATE, VersionStatus.REPLAYING, VersionStatus.READY, VersionStatus.FAILED)
GATE_OF_STATUS: dict[str, tuple[bool | None, str]] = {
    VersionStatus.READY: (True, "replay passed the gate"),
    VersionStatus.FAILED: (False, "replay failed the gate"),
    VersionStatus.REPLAYING: (None, "replaying"),
    VersionStatus.CANDIDATE: (None, "no finished replay"),
}


def _version(candidate_id: str) -> ProcedureVersion:
    return find_candidate(ProcedureVersion.objects.select_related("procedure"), candidate_id, "procedure version")


def _rubric_detail(rubric: dict[str, Any]) -> str:
    """The rubric floor of a gate report in one line: per judged run its overall and required failures."""
    if not rubric.get("applied"):
        return f"floor {rubric.get('floor')}: {rubric.get('reason', 'not applied')}"
    runs = [
        f"run {run['run_id']}: "
        + ("not scored" if run.get("overall") is None else f"{run['overall']:.2f}")
        + (f" (required failures: {', '.join(run['required_failures'])})" if run.get("required_failures") else "")
        for run in rubric.get("runs", [])[:10]
    ]
    head = f"floor {rubric.get('floor')} under {rubric.get('rubric_key')} v{rubric.get('rubric_version')}: "
    return head + ("passed" if rubric.get("passed") else "failed") + (" — " + "; ".join(runs) if runs else "")


def metric_row(check: dict[str, Any], active_metrics: dict[str, Any]) -> dict[str, Any]:
    """One gate check as the item page shows it: value, bound (as text), the active version's value and the delta."""
    metric = check["metric"]
    value = check.get("value")
    active = check.get("baseline")
    if active is None:
        active = active_metrics.get(metric)
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (value, active))
    return {
        "metric": metric,
        "mode": check.get("mode"),
        "value": value,
        "threshold": check.get("threshold"),
        "bound": bound_text(check),
        "active": active,
        "delta": (value - active) if numbers else None,
        "passed": bool(check.get("passed")),
        "reason": check.get("reason") or "",
    }


def bound_text(check: dict[str, Any]) -> str:
    """`≥ 0.5`, `≤ 0`, `no worse than the active version: ≥ 0.8` — what the check asked of the value."""
    mode, threshold = check.get("mode"), check.get("threshold")
    if mode == "at_least":
        return f"≥ {significant(threshold)}"
    if mode == "at_most":
        return f"≤ {significant(threshold)}"
    if mode == "no_regression":
        if threshold is None:
            return "no regression (no active version to compare with)"
        sign = "≥" if HIGHER_IS_BETTER.get(check.get("metric"), True) else "≤"
        return f"no regression: {sign} {significant(threshold)}"
    return str(mode or "")


def replay_cases(replay: ReplayRun) -> tuple[list[dict[str, Any]], int]:
    """The first CASES_SHOWN held-out cases of a finished replay with pass/fail per arm and the runs to link, and
    how many there are (one query)."""
    shown = sorted(replay.held_out_run_ids)[:CASES_SHOWN]
    by_case: dict[int, dict[str, Any]] = {
        case_id: {
            "case_run_id": case_id,
            "answered": False,
            "passed": False,
            "result_run_id": None,
            "active_passed": None,
            "active_result_run_id": None,
            "regression": False,
        }
        for case_id in shown
    }
    rows = ReplayCase.objects.filter(replay=replay, case_run_id__in=shown).values_list(
        "arm", "case_run_id", "result_run_id", "answered", "result"
    )
    for arm, case_id, result_run_id, answered, result in rows:
        case = by_case.get(case_id)
        if case is None:
            continue
        passed = bool((result or {}).get("passed")) and answered
        if arm == ReplayArm.CANDIDATE:
            case.update(answered=answered, passed=passed, result_run_id=result_run_id)
            case["regression"] = bool((result or {}).get("regression"))
        else:
            case.update(active_passed=passed if answered else None, active_result_run_id=result_run_id)
    return [by_case[case_id] for case_id in shown], len(replay.held_out_run_ids)


def _args_text(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in (arguments or {}).items())


def step_rows(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step of both versions in the candidate's order: {"change": same/added/removed/changed, "number" (the
    candidate's step number, None for a removed step), "tool", "arguments" (text), "before_arguments" (text, for a
    changed step: same tool, other retained arguments)}. Steps are matched by tool (longest matching blocks)."""
    tools_before = [step.get("tool") for step in before]
    tools_after = [step.get("tool") for step in after]
    rows: list[dict[str, Any]] = []

    def row(change: str, step: dict[str, Any], number: int | None, previous: dict[str, Any] | None = None):
        rows.append(
            {
                "change": change,
                "number": number,
                "tool": step.get("tool"),
                "arguments": _args_text(step.get("arguments") or {}),
                "before_arguments": _args_text(previous.get("arguments") or {}) if previous is not None else "",
            }
        )

    matcher = SequenceMatcher(a=tools_before, b=tools_after, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for old, new, number in zip(before[i1:i2], after[j1:j2], range(j1 + 1, j2 + 1), strict=True):
                same = (old.get("arguments") or {}) == (new.get("arguments") or {})
                row("same" if same else "changed", new, number, None if same else old)
            continue
        for old in before[i1:i2]:
            row("removed", old, None)
        for new, number in zip(after[j1:j2], range(j1 + 1, j2 + 1), strict=True):
            row("added", new, number)
    return rows


def note_rows(before: list[Any], after: list[Any]) -> list[dict[str, str]]:
    """Preconditions or failure exits of both versions: the candidate's in order (same or added), then the ones it
    drops (removed)."""
    old = [str(note) for note in before or []]
    new = [str(note) for note in after or []]
    rows = [{"change": "same" if note in old else "added", "text": note} for note in new]
    rows += [{"change": "removed", "text": note} for note in old if note not in new]
    return rows


class ProcedureVersionKind(PromotableKind):
    key = KIND
    label = "procedure version"
    watchable = True

    def describe(self, candidate_id: str) -> Description:
        version = _version(candidate_id)
        procedure = version.procedure
        tools = " → ".join(version.tools[:8]) + (" …" if len(version.tools) > 8 else "")
        return Description(
            title=f"{procedure.title or procedure.intent} {version.label}",
            summary=f"{len(version.steps)} steps: {tools}",
            url=reverse("procedures:version", args=[version.pk]),
            parent_key=str(procedure.pk),
            parent_label=procedure.title or procedure.intent,
            label=version.label,
        )

    def labels(self, candidate_ids) -> dict[str, str]:
        return number_labels(ProcedureVersion.objects, candidate_ids)

    def proposable(self, parent_key: str | None = None) -> list[Choice]:
        versions = ProcedureVersion.objects.filter(status__in=PROPOSABLE).select_related("procedure")
        if parent_key is not None:
            versions = versions.filter(procedure_id=int_or_none(parent_key))
        choices = []
        for version in versions.order_by("procedure__title", "procedure__intent", "-number")[:200]:
            passing, note = GATE_OF_STATUS.get(version.status, (None, version.status))
            procedure = version.procedure
            choices.append(
                Choice(
                    id=str(version.pk),
                    label=version.label,
                    parent_key=str(procedure.pk),
                    parent_label=procedure.title or procedure.intent,
                    gate_passing=passing,
                    gate_note=note,
                )
            )
        return choices

    def current_active(self, parent_key: str) -> str | None:
        pk = int_or_none(parent_key)
        active = Procedure.objects.filter(pk=pk).values_list("active_version_id", flat=True).first() if pk else None
        return str(active) if active else None

    def gate_evidence(self, candidate_id: str) -> GateEvidence:
        version = _version(candidate_id)
        url = reverse("procedures:version", args=[version.pk])
        replay = (
            ReplayRun.objects.select_related("compared_with")
            .filter(version=version, status=ReplayStatus.DONE)
            .order_by("-id")
            .first()
        )
        if replay is None or replay.gate_report is None:
            return GateEvidence(passing=None, summary="no finished replay yet", url=url)
        checks = [check for check in replay.gate_report.get("checks", []) if "metric" in check]
        failures = [check for check in replay.gate_report.get("checks", []) if not check.get("passed")]
        active_metrics = (replay.metrics or {}).get("active") or {}
        metrics = [metric_row(check, active_metrics) for check in checks]
        details: dict[str, Any] = {
            row["metric"]: f"{significant(row['value'])} ({'ok' if row['passed'] else row['reason'] or 'failed'})"
            for row in metrics
        }
        passed = bool(replay.passed)
        compared = f", compared with {replay.compared_with.label}" if replay.compared_with else ""
        summary = f"{replay.mode} replay #{replay.pk} on {len(replay.held_out_run_ids)} held-out runs{compared}: " + (
            "gate passed" if passed else f"gate failed ({len(failures)} check{'s' if len(failures) != 1 else ''})"
        )
        rubric = replay.gate_report.get("rubric")
        if rubric:
            details["rubric_floor"] = _rubric_detail(rubric)
            summary += f"; rubric floor {rubric.get('floor'):g} " + (
                ("met" if rubric.get("passed") else "not met") if rubric.get("applied") else "not applied"
            )
        certified = replay.gate_report.get("certificate") or {}
        if certified.get("refused"):
            details["certificate"] = f"not certified: {certified['refused']}"
            summary += "; not certified (its held-out split is exhausted: certify again on fresh runs)"
        elif certified:
            summary += "; certified" if certified.get("passed") else "; not certified"
        cases, total = replay_cases(replay)
        return GateEvidence(
            passing=passed, summary=summary, details=details, url=url, metrics=metrics, cases=cases, cases_total=total
        )

    def diff(self, candidate_id: str, active_id: str | None) -> DiffView:
        candidate = _version(candidate_id)
        active = ProcedureVersion.objects.filter(pk=int_or_none(active_id)).first() if active_id else None
        rows = step_rows(active.steps if active else [], candidate.steps)
        return DiffView(
            template="reviews/diff_steps.html",
            context={
                "before_label": f"active {active.label}" if active else "no active version",
                "after_label": f"candidate {candidate.label}",
                "has_active": active is not None,
                "step_rows": rows,
                "steps_changed": any(row["change"] != "same" for row in rows),
                "preconditions": note_rows(active.preconditions if active else [], candidate.preconditions),
                "failure_exits": note_rows(active.failure_exits if active else [], candidate.failure_exits),
                "sources": candidate.source_run_ids[:20],
                "source_count": len(candidate.source_run_ids),
            },
        )

    def activate(self, *, actor: Actor, candidate_id: str, expected_active_id: str | None) -> None:
        version = _version(candidate_id)
        move_active_version(
            actor=actor,
            parent_model=Procedure,
            parent_id=version.procedure_id,
            version=version,
            expected_active_id=expected_active_id,
            active_status=VersionStatus.ACTIVE,
            retired_status=VersionStatus.RETIRED,
            verb="procedure.activate",
        )
        from . import active_body  # (imports the selectors, which import this module)

        active_body.changed()  # move_active_version writes by queryset (no model signal)

    def history_url(self, parent_key: str) -> str:
        return reverse("procedures:list")

    # --- certified uplift ---------------------------------------------------------------------------------------
    def learned_texts(self, candidate_id: str) -> list[LearnedText]:
        """Every step argument (its value as text), precondition and failure exit of the version. A step's sources
        are the steps calling the same tool in the first SOURCE_RUNS_READ runs it was mined from, each with its
        observation (what an injected instruction would have been copied from)."""
        version = _version(candidate_id)
        tools = [str(step.get("tool") or "") for step in version.steps]
        observed: dict[str, list[Source]] = {}
        for run_id, ordinal, tool, observation in step_observations(
            version.source_run_ids[:SOURCE_RUNS_READ], [tool for tool in tools if tool]
        ):
            observed.setdefault(tool, []).append(Source(run_id=run_id, step=ordinal, observation=observation or ""))
        texts = []
        for number, step in enumerate(version.steps, start=1):
            tool = str(step.get("tool") or "")
            sources = tuple(observed.get(tool, ()))
            texts.append(LearnedText(where=f"step {number} tool", text=tool, sources=sources))
            for key, value in (step.get("arguments") or {}).items():
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
                texts.append(LearnedText(where=f"step {number} ({tool}) argument {key!r}", text=text, sources=sources))
        sources = tuple(Source(run_id=run_id) for run_id in version.source_run_ids[:SOURCE_RUNS_READ])
        for what, notes in (("precondition", version.preconditions), ("failure exit", version.failure_exits)):
            for number, note in enumerate(notes or [], start=1):
                texts.append(LearnedText(where=f"{what} {number}", text=str(note), sources=sources))
        return texts

    def active_artifacts(self) -> list[ActiveArtifact]:
        """Every procedure's active version, with when it was last activated through a review (one query, and one
        for the activation times)."""
        procedures = list(
            Procedure.objects.filter(active_version__isnull=False)
            .select_related("active_version")
            .only("pk", "intent", "title", "active_version__number", "active_version__created_at")
        )
        since = activated_since(KIND, [str(p.pk) for p in procedures])
        return [
            ActiveArtifact(
                parent_key=str(p.pk),
                candidate_id=str(p.active_version_id),
                parent_label=p.title or p.intent,
                label=p.active_version.label,
                url=reverse("procedures:version", args=[p.active_version_id]),
                since=since.get(str(p.pk)),
            )
            for p in procedures
        ]

    def recent_run_models(self, artifact: ActiveArtifact, *, limit: int) -> dict[str, int]:
        """The newest `limit` production runs of the procedure's intent since its version became active."""
        procedure = Procedure.objects.filter(pk=int_or_none(artifact.parent_key)).only("intent").first()
        if procedure is None:
            return {}
        runs = runs_of_intent(procedure.intent).runs
        if artifact.since is not None:
            runs = runs.filter(created_at__gte=artifact.since)
        return model_counts(runs, limit=limit)

    def recertify(self, *, actor: Actor, candidate_id: str, model: str | None) -> str:
        from .errors import ReplayRefused
        from .versions.services import procedure_version_recertify

        version = _version(candidate_id)
        try:
            replay = procedure_version_recertify(actor=actor, version=version, model=model)
        except ReplayRefused as exc:
            raise ValueError(str(exc)) from None
        of_model = f" of {model}" if model else ""
        return (
            f"{replay.mode} replay #{replay.pk} of {version.label} queued on {len(replay.held_out_run_ids)} fresh"
            f" run{'s' if len(replay.held_out_run_ids) != 1 else ''}{of_model}"
        )

    # --- the watch after activation -------------------------------------------------------------------------
    def start_canary(self, *, actor: Actor, candidate_id: str, expected_active_id: str | None, share: float) -> None:
        """Activate the version for `share` of runs: the activation itself, then the version it replaced kept as the
        canary's control (a first version has nothing to be the control: ValueError)."""
        if not 0 < share < 1:
            raise ValueError("a canary's share is between 0 and 1 (exclusive)")
        if not expected_active_id:
            raise ValueError("a first version has no version to serve the other runs: activate it fully")
        self.activate(actor=actor, candidate_id=candidate_id, expected_active_id=expected_active_id)
        version = _version(candidate_id)
        Procedure.objects.filter(pk=version.procedure_id).update(
            canary_control_id=int(expected_active_id), canary_share=share, updated_at=timezone.now()
        )
        audit_record(
            actor=actor,
            verb="procedure.canary_start",
            target=version.procedure,
            after={"candidate": version.label, "control": int(expected_active_id), "share": share},
        )

    def canary_state(self, parent_key: str) -> CanaryState | None:
        row = (
            Procedure.objects.filter(pk=int_or_none(parent_key), canary_control__isnull=False, canary_share__gt=0)
            .values_list(
                "active_version_id",
                "canary_control_id",
                "active_version__content_revision",
                "canary_control__content_revision",
                "canary_share",
            )
            .first()
        )
        if row is None:
            return None
        active, control, active_ref, control_ref, share = row
        return CanaryState(
            parent_key=str(parent_key),
            candidate_id=str(active),
            control_id=str(control),
            candidate_ref=active_ref,
            control_ref=control_ref,
            share=share,
        )

    def set_canary_share(self, *, actor: Actor, parent_key: str, share: float) -> None:
        from django.db import transaction

        if not 0 < share < 1:
            raise ValueError("a canary's share is between 0 and 1 (exclusive)")
        with transaction.atomic(durable=True):
            procedure = Procedure.objects.select_for_update().filter(pk=int_or_none(parent_key)).first()
            if procedure is None or procedure.canary_control_id is None:
                raise ValueError("this procedure has no canary running")
            before = procedure.canary_share
            Procedure.objects.filter(pk=procedure.pk).update(canary_share=share, updated_at=timezone.now())
            audit_record(
                actor=actor, verb="procedure.canary_share", target=procedure, before={"share": before},
                after={"share": share},
            )  # fmt: skip
            self._changed()

    def end_canary(self, *, actor: Actor, parent_key: str) -> None:
        procedure = Procedure.objects.select_for_update().filter(pk=int_or_none(parent_key)).first()
        if procedure is None or procedure.canary_control_id is None:
            return
        before = {"control": procedure.canary_control_id, "share": procedure.canary_share}
        Procedure.objects.filter(pk=procedure.pk).update(
            canary_control=None, canary_share=0.0, updated_at=timezone.now()
        )
        audit_record(actor=actor, verb="procedure.canary_end", target=procedure, before=before)
        self._changed()

    def _changed(self) -> None:
        from . import active_body

        active_body.changed()

    def ref_of(self, candidate_id: str) -> str:
        pk = int_or_none(candidate_id)
        found = (
            ProcedureVersion.objects.filter(pk=pk).values_list("content_revision", flat=True).first() if pk else None
        )
        return found or ""

    def arm_runs(self, parent_key: str, *, candidate_ref: str, control_ref: str, since, after_id: int = 0,
                 limit: int = 5000) -> list[ArmRun]:  # fmt: skip
        procedure = Procedure.objects.filter(pk=int_or_none(parent_key)).only("intent").first()
        if procedure is None:
            return []
        runs = runs_of_intent(procedure.intent).runs.filter(
            procedure_revision__in=[candidate_ref, control_ref], pk__gt=after_id
        )
        if since is not None:
            runs = runs.filter(created_at__gte=since)
        rows = runs.order_by("pk").values_list("pk", "procedure_revision", "outcome", "score", "metadata__model")[
            :limit
        ]
        return [
            ArmRun(
                run_id=run_id,
                arm="canary" if revision == candidate_ref else "control",
                success=1.0 if outcome == "success" else 0.0,
                score=score if score is not None else (1.0 if outcome == "success" else 0.0),
                model=model or "",
            )
            for run_id, revision, outcome, score, model in rows
        ]

    def certification_changed(self, parent_key: str) -> None:
        """The active list shows the active version's certificate and coverage flag: its stamp moves."""
        from . import active_body

        pk = int_or_none(parent_key)
        if pk is not None:
            Procedure.objects.filter(pk=pk).update(certification_stamp=F("certification_stamp") + 1)
            active_body.changed()

    def demo_candidate(self, *, actor: Actor) -> str | None:
        """seed_demo: the refund procedure's version learnt from the demo runs, replayed and not yet active (never a
        version mined from anyone else's runs: procedures.demo)."""
        from .demo import demo_review_version  # (the demo module registers a seeder: imported only when seeding)

        version = demo_review_version(actor=actor)
        return str(version.pk) if version else None


register_kind(ProcedureVersionKind())
