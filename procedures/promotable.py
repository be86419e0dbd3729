"""Procedure versions as a promotable kind of the reviews registry (registered in ProceduresConfig.ready).

parent_key = the procedure's pk, candidate ids = version pks (strings). Gate: the newest finished replay of the
version (its regression gate report). Activation runs inside the review's transaction: lock the procedure, check
the expected active version, retire the previous one, move the pointer, bump `revision`, audit `procedure.activate`
(rollback targets read this history). This is the only way a procedure's active version changes.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from accounts.services import Actor
from config.parsing import int_or_none
from reviews.registry import (
    Description,
    DiffView,
    GateEvidence,
    PromotableKind,
    find_candidate,
    move_active_version,
    previous_active,
    register_kind,
)

from .mining import intent_key
from .models import Procedure, ProcedureVersion, ReplayRun, ReplayStatus, VersionStatus

KIND = "procedure_version"


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


class ProcedureVersionKind(PromotableKind):
    key = KIND
    label = "procedure version"

    def describe(self, candidate_id: str) -> Description:
        version = _version(candidate_id)
        procedure = version.procedure
        tools = " → ".join(version.tools[:8]) + (" …" if len(version.tools) > 8 else "")
        return Description(
            title=f"{procedure.title or procedure.intent} v{version.number}",
            summary=f"{len(version.steps)} steps: {tools}",
            url=reverse("procedures:version", args=[version.pk]),
            parent_key=str(procedure.pk),
            parent_label=procedure.title or procedure.intent,
        )

    def current_active(self, parent_key: str) -> str | None:
        pk = int_or_none(parent_key)
        active = Procedure.objects.filter(pk=pk).values_list("active_version_id", flat=True).first() if pk else None
        return str(active) if active else None

    def gate_evidence(self, candidate_id: str) -> GateEvidence:
        version = _version(candidate_id)
        url = reverse("procedures:version", args=[version.pk])
        replay = ReplayRun.objects.filter(version=version, status=ReplayStatus.DONE).order_by("-id").first()
        if replay is None or replay.gate_report is None:
            return GateEvidence(passing=None, summary="no finished replay yet", url=url)
        failures = [check for check in replay.gate_report.get("checks", []) if not check.get("passed")]
        details: dict[str, Any] = {
            check["metric"]: f"{check.get('value')} ({'ok' if check.get('passed') else check.get('reason', 'failed')})"
            for check in replay.gate_report.get("checks", [])
            if "metric" in check
        }
        passed = bool(replay.passed)
        summary = f"{replay.mode} replay #{replay.pk} on {len(replay.held_out_run_ids)} held-out runs: " + (
            "gate passed" if passed else f"gate failed ({len(failures)} check{'s' if len(failures) != 1 else ''})"
        )
        rubric = replay.gate_report.get("rubric")
        if rubric:
            details["rubric_floor"] = _rubric_detail(rubric)
            summary += f"; rubric floor {rubric.get('floor'):g} " + (
                ("met" if rubric.get("passed") else "not met") if rubric.get("applied") else "not applied"
            )
        return GateEvidence(passing=passed, summary=summary, details=details, url=url)

    def diff(self, candidate_id: str, active_id: str | None) -> DiffView:
        candidate = _version(candidate_id)
        active = ProcedureVersion.objects.filter(pk=int_or_none(active_id)).first() if active_id else None
        return DiffView(
            template="reviews/diff_steps.html",
            context={
                "before_label": f"active v{active.number}" if active else "no active version",
                "after_label": f"candidate v{candidate.number}",
                "before_steps": active.steps if active else [],
                "after_steps": candidate.steps,
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

    def rollback_target(self, parent_key: str) -> str | None:
        active = self.current_active(parent_key)
        if active is None:
            return None
        return previous_active(
            verb="procedure.activate",
            target_type="procedures.procedure",
            target_id=parent_key,
            field="active_version",
            active=active,
        )

    def history_url(self, parent_key: str) -> str:
        return reverse("procedures:list")

    def demo_candidate(self, *, actor: Actor) -> str | None:
        """seed_demo: the newest replayed, not yet active version (the refund procedure's first)."""
        versions = ProcedureVersion.objects.filter(status__in=(VersionStatus.READY, VersionStatus.FAILED))
        version = versions.filter(procedure__intent=intent_key("refund_request")).order_by("-number").first()
        version = version or versions.order_by("-id").first()
        return str(version.pk) if version else None


register_kind(ProcedureVersionKind())
