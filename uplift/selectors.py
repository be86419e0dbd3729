"""Reads of uplift: the policy in force for a kind and parent, the critical tasks, a candidate's latest certificate,
a split's ledger."""

from __future__ import annotations

from django.conf import settings

from .core import safety
from .core.policy import Policy
from .models import Certificate, CertificationPolicy, CoverageFlag, CriticalTask, HeldOutSplit, SplitDecision, Watch

FINDINGS_KEPT = 100  # findings a review snapshot keeps (the totals count them all)

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


def _points(value: float | None) -> str:
    if value is None:
        return "none"
    points = value * 100
    return f"{'+' if points > 0 else '−' if points < 0 else '±'}{abs(points):.1f}"


def headline(passed: bool, difference: dict, n: int | None) -> str:
    """ "certified +4.0 points, lower bound −1.2, n = 40": what a badge shows of a certificate."""
    state = "certified" if passed else "not certified"
    return (
        f"{state} {_points(difference.get('mean'))} points, lower bound {_points(difference.get('low'))}, n = {n or 0}"
    )


def certificate_summary(certificate: Certificate | None) -> dict | None:
    """What an agent or a dashboard shows of a certificate ("certified +x, lower bound y, n"): the policy's metric's
    mean paired difference and its interval, n, repairs and breakages, the models measured, the split's decision
    number; None without a certificate."""
    if certificate is None:
        return None
    metric = (certificate.policy or {}).get("metric", "success")
    difference = (certificate.totals or {}).get(metric) or {}
    return {
        "headline": headline(certificate.passed, difference, certificate.totals.get("n")),
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


def certified_models(kind: str, candidate_ids: list[str]) -> dict[str, set[str]]:
    """Per candidate, the agent models its passing certificates were measured with (one query)."""
    found: dict[str, set[str]] = {str(c): set() for c in candidate_ids}
    rows = Certificate.objects.filter(kind=kind, candidate_id__in=list(found), passed=True).values_list(
        "candidate_id", "agent_models"
    )
    for candidate_id, models in rows:
        found[candidate_id].update(m for m in models or [] if isinstance(m, str))
    return found


def latest_certificates_with_model(kind: str, candidate_id: str, model: str) -> Certificate | None:
    """The newest certificate of the candidate measured with `model`."""
    for row in Certificate.objects.filter(kind=kind, candidate_id=str(candidate_id)).order_by("-id")[:50]:
        if model in (row.agent_models or []):
            return row
    return None


def coverage_flags(kind: str | None = None) -> list[CoverageFlag]:
    """Active artifacts flagged "not certified for <model>" (one query)."""
    rows = CoverageFlag.objects.select_related("failed_certificate")
    if kind is not None:
        rows = rows.filter(kind=kind)
    return list(rows.order_by("kind", "parent_label", "parent_key"))


def coverage_flags_of(kind: str, candidate_ids: list[str]) -> dict[str, CoverageFlag]:
    """The flag of each candidate that has one (one query)."""
    rows = CoverageFlag.objects.filter(kind=kind, candidate_id__in=[str(c) for c in candidate_ids])
    return {row.candidate_id: row for row in rows}


def coverage_summary(flag: CoverageFlag | None) -> dict | None:
    """What the API and pages say of a flag: {"model", "share", "runs", "failed_certificate_id"} or None."""
    if flag is None:
        return None
    return {
        "model": flag.model,
        "share": flag.share,
        "runs": flag.runs,
        "failed_certificate_id": flag.failed_certificate_id,
    }


def safety_report(texts: list[safety.LearnedText]) -> dict:
    """The safety scan of a candidate's learned text, as a review snapshot keeps it: how many texts were scanned,
    the critical findings and warnings counted, and the first FINDINGS_KEPT findings (critical first)."""
    findings = safety.scan(texts, allowed_hosts=settings.WAYMARK_LEARNED_TEXT_HOSTS)
    ordered = sorted(findings, key=lambda finding: finding.severity != safety.CRITICAL)  # stable: input order kept
    critical = len(safety.critical(findings))
    return {
        "scanned": len(texts),
        "critical": critical,
        "warnings": len(findings) - critical,
        "findings": [finding.to_document() for finding in ordered[:FINDINGS_KEPT]],
        "allowed_hosts": list(settings.WAYMARK_LEARNED_TEXT_HOSTS),
    }


PAIRS_SHOWN = 200  # repairs and breakages listed on a page (the totals count them all)
RUN_TASK_KINDS = ("procedure_version",)  # kinds whose task ids are stored runs (a held-out run per task)


def certificate_by_id(certificate_id: int) -> Certificate | None:
    return Certificate.objects.select_related("split").filter(pk=certificate_id).first()


def policy_sentence(policy: dict) -> str:
    """The policy in words: "non-inferiority: the lower bound above −2 points of success rate; n ≥ 10; …"."""
    what = "success rate" if policy.get("metric") == "success" else "score"
    if policy.get("mode") == "superiority":
        bound = f"superiority: the lower bound of the uplift in {what} above 0"
    elif float(policy.get("margin", 0)) >= 1:
        bound = f"no bound asked of the uplift in {what} (margin 100 points)"
    else:
        margin = float(policy["margin"]) * 100
        bound = f"non-inferiority: the lower bound of the uplift in {what} above −{margin:g} points"
    return (
        f"{bound}; at least {policy.get('min_n')} paired tasks; no critical task broken; no net regression; "
        f"error budget α = {policy.get('alpha')} per held-out split, at most {policy.get('max_decisions')} decisions"
    )


def certificate_view(certificate: Certificate, *, pairs_shown: int | None = PAIRS_SHOWN) -> dict:
    """Everything a page shows of a certificate: the sentence, the policy in words, the totals, the two differences
    with their intervals (a chart spec and its table), the reuse of its split, the models, and the repairs and
    breakages (critical first, at most PAIRS_SHOWN) with the runs to compare. Two queries (the split's ledger
    count is the split row's)."""
    from common.charts import chart_spec, series

    totals = certificate.totals or {}
    policy = certificate.policy or {}
    threshold = 0.0 if policy.get("mode") == "superiority" else -float(policy.get("margin", 0.0))
    differences = []
    for metric, label in (("success", "success rate"), ("score", "score")):
        value = totals.get(metric) or {}
        differences.append(
            {
                "metric": metric,
                "label": label,
                "mean": value.get("mean"),
                "low": value.get("low"),
                "high": value.get("high"),
                "judged": metric == policy.get("metric", "success"),
            }
        )
    chart = chart_spec(
        labels=[row["label"] for row in differences],
        series_list=[
            series(
                f"{float(totals.get('confidence', 0.95)) * 100:.2f}".rstrip("0").rstrip(".") + "% interval",
                [[row["low"], row["high"]] for row in differences],
                kind="bar",
                tone="neutral",
            ),
            series("mean paired difference", [row["mean"] for row in differences], points_only=True),
            series("policy bound", [threshold, threshold], tone="failure"),
        ],
        x_title="uplift of the candidate",
        y_title="candidate minus control",
        kind="bar",
        y_range=(-1, 1),
    )
    split = certificate.split
    max_decisions = int(policy.get("max_decisions") or 0)
    task_is_run = certificate.kind in RUN_TASK_KINDS
    pairs = [
        {**row, "task_run": int(row["task_id"]) if task_is_run and str(row["task_id"]).isdigit() else None}
        for row in certificate.rows
        if row.get("outcome") in ("repair", "breakage")
    ]
    pairs.sort(key=lambda row: (not row.get("critical"), row.get("outcome") != "breakage"))
    return {
        "certificate": certificate,
        "chart_id": f"certificate-{certificate.pk}-chart",
        "policy_sentence": policy_sentence(policy),
        "totals": totals,
        "differences": differences,
        "threshold": threshold,
        "chart": chart,
        "split": split,
        "split_decisions": split.decisions,
        "max_decisions": max_decisions,
        "exhausted": bool(max_decisions) and split.decisions >= max_decisions,
        "later_decisions": max(split.decisions - certificate.decision_number, 0),
        "models": list(certificate.agent_models or []),
        "pairs": pairs if pairs_shown is None else pairs[:pairs_shown],
        "pairs_total": len(pairs),
        "critical_keys": critical_task_keys(certificate.kind, certificate.parent_key),
    }


def safety_for_page(report: dict | None) -> dict | None:
    """A stored safety report with each source's run id as an int (`run`) where it names a stored run, for links."""
    if not report:
        return None
    findings = []
    for finding in report.get("findings") or []:
        sources = [
            {**source, "run": int(source["run_id"]) if str(source.get("run_id", "")).isdigit() else None}
            for source in finding.get("sources") or []
        ]
        findings.append({**finding, "sources": sources})
    return {**report, "findings": findings}


def policies() -> list[CertificationPolicy]:
    """Every policy set, by kind and parent (the kind's own, parent "", first)."""
    return list(CertificationPolicy.objects.select_related("updated_by").order_by("kind", "parent_key"))


def all_critical_tasks(limit: int = 500) -> list[CriticalTask]:
    return list(CriticalTask.objects.select_related("tagged_by").order_by("kind", "parent_key", "task_key")[:limit])


ALERTING = ("rolled_back", "rollback_requested", "expired")


def recent_watch_alerts(days: int = 7) -> list[Watch]:
    """Watches that rolled back, asked for a rollback or expired in the last `days` days (one query): the review
    queue's card."""
    from datetime import timedelta

    from django.utils import timezone

    since = timezone.now() - timedelta(days=days)
    return list(Watch.objects.filter(status__in=ALERTING, decided_at__gte=since).order_by("-decided_at")[:20])


def watches(*, status: str | None = None, limit: int = 200) -> list[Watch]:
    rows = Watch.objects.defer("history", "sums")
    if status:
        rows = rows.filter(status=status)
    return list(rows.order_by("-id")[:limit])


def watch_by_id(watch_id: int) -> Watch | None:
    return Watch.objects.filter(pk=watch_id).first()


def watch_view(watch: Watch) -> dict:
    """What a watch's page shows beyond its row: per look, each arm's success and score and the bound of Δ (charts
    and their tables), newest first in the tables."""
    from common.charts import chart_spec, series

    points = watch.history or []
    labels = [point["at"][5:16].replace("T", " ") for point in points]

    def values(metric: str, key: str) -> list:
        return [(point.get(metric) or {}).get(key) for point in points]

    arms = chart_spec(
        labels=labels,
        series_list=[
            series("canary success", values("success", "canary_mean")),
            series("control success", values("success", "control_mean")),
            series("canary score", values("score", "canary_mean")),
            series("control score", values("score", "control_mean")),
        ],
        x_title="look",
        y_title="mean",
    )
    margin = -float((watch.policy or {}).get("margin", 0))
    bound = chart_spec(
        labels=labels,
        series_list=[
            series("Δ success", values("success", "estimate")),
            series("lower end", values("success", "low"), tone="neutral"),
            series("upper end", values("success", "high"), tone="neutral"),
            series("−margin", [margin] * len(points), tone="failure"),
            series("0", [0.0] * len(points), tone="success"),
        ],
        x_title="look",
        y_title="canary minus control",
        y_range=(None, None),
    )
    rows = [
        {
            "at": point["at"][:16].replace("T", " "),
            "success": point.get("success") or {},
            "score": point.get("score") or {},
        }
        for point in reversed(points)
    ]
    latest = {bound["metric"]: bound for bound in watch.bounds or []}
    return {"arms_chart": arms, "bound_chart": bound, "rows": rows[:200], "latest": latest}


def first_watch_of(kind: str, parent_keys: list[str]) -> Watch | None:
    """The first watch ever started on one of these parents (the demo seeds one each)."""
    return Watch.objects.filter(kind=kind, parent_key__in=parent_keys).order_by("id").first()
