"""Reads of uplift: the policy in force for a kind and parent, the critical tasks, a candidate's latest certificate,
a split's ledger."""

from __future__ import annotations

from django.conf import settings

from .core.policy import Policy
from .models import Certificate, CertificationPolicy, CriticalTask, HeldOutSplit, SplitDecision

POLICY_FIELDS = tuple(Policy().to_document())


def default_policy() -> Policy:
    """Policy()'s defaults (non-inferiority, 2 points, n >= 10) with the fields settings.WAYMARK_CERTIFICATION_POLICY
    sets over them."""
    return Policy.from_document({**Policy().to_document(), **(settings.WAYMARK_CERTIFICATION_POLICY or {})})


def policy_for(kind: str, parent_key: str) -> Policy:
    """The parent's own policy, else the kind's (parent_key ""), else the default (default_policy)."""
    rows = {
        row.parent_key: row for row in CertificationPolicy.objects.filter(kind=kind, parent_key__in=[parent_key, ""])
    }
    row = rows.get(parent_key) or rows.get("")
    if row is None:
        return default_policy()
    return Policy.from_document({field: getattr(row, field) for field in POLICY_FIELDS})


def critical_task_keys(kind: str, parent_key: str) -> set[str]:
    return set(CriticalTask.objects.filter(kind=kind, parent_key=parent_key).values_list("task_key", flat=True))


def critical_tasks(kind: str, parent_key: str) -> list[CriticalTask]:
    return list(
        CriticalTask.objects.filter(kind=kind, parent_key=parent_key).select_related("tagged_by").order_by("task_key")
    )


def latest_certificate(kind: str, candidate_id: str) -> Certificate | None:
    return (
        Certificate.objects.filter(kind=kind, candidate_id=str(candidate_id))
        .select_related("split")
        .order_by("-id")
        .first()
    )


def certificates_of(kind: str, candidate_ids: list[str]) -> dict[str, Certificate]:
    """The latest certificate of each candidate (one query)."""
    latest: dict[str, Certificate] = {}
    rows = Certificate.objects.filter(kind=kind, candidate_id__in=[str(c) for c in candidate_ids]).select_related(
        "split"
    )
    for row in rows.order_by("id"):
        latest[row.candidate_id] = row
    return latest


def split_ledger(split: HeldOutSplit) -> list[SplitDecision]:
    return list(SplitDecision.objects.filter(split=split).order_by("number"))


def certificate_summary(certificate: Certificate | None) -> dict | None:
    """What an agent or a dashboard shows of a certificate ("certified +x, lower bound y, n"): the policy's metric's
    mean paired difference and its interval, n, repairs and breakages, the models measured, the split's decision
    number; None without a certificate."""
    if certificate is None:
        return None
    metric = (certificate.policy or {}).get("metric", "success")
    difference = (certificate.totals or {}).get(metric) or {}
    return {
        "id": certificate.pk,
        "passed": certificate.passed,
        "metric": metric,
        "uplift": difference.get("mean"),
        "lower_bound": difference.get("low"),
        "upper_bound": difference.get("high"),
        "confidence": certificate.totals.get("confidence"),
        "n": certificate.totals.get("n"),
        "repairs": certificate.totals.get("repairs"),
        "breakages": certificate.totals.get("breakages"),
        "models": list(certificate.agent_models or []),
        "decision_number": certificate.decision_number,
        "against": "the version it replaces" if certificate.replaces_id else "no artifact",
        "sentence": certificate.sentence,
        "digest": certificate.digest,
    }
