"""Window pages: the analyses (with the analyse and compare forms), one analysis (clusters and novelty), one drift
report (chart and table), the novelty alerts.

Every page reads through intents.windows.selectors in a fixed number of queries. Analysing and comparing need the
operator role; deciding an alert needs the reviewer or operator role (the services refuse others: 403 with the page
and the reason, accounts.roles.refusal_shown); every logged-in user reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from accounts.roles import refusal_shown
from accounts.services import Actor
from common.cursors import InvalidCursor

from . import selectors
from .forms import AnalyzeWindowForm, CompareForm, DecideAlertForm
from .models import DriftReport, NoveltyAlert, WindowAnalysis
from .services import WindowRefused, drift_compare, novelty_alert_decide, window_analyze

DEFAULT_DAYS = 7
NOVELTY_SHOWN = 300
ALERT_BADGES = {"open": "badge-pending", "dismissed": "badge-unknown", "promoted": "badge-success"}


# -- analyses list, analyse and compare -------------------------------------------------------------------------------


def _default_window() -> dict[str, Any]:
    end = timezone.localtime().replace(second=0, microsecond=0)
    return {"start": end - timedelta(days=DEFAULT_DAYS), "end": end}


def _list_page(
    request: HttpRequest,
    *,
    form: AnalyzeWindowForm | None = None,
    compare: CompareForm | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    cursor = request.GET.get("cursor") or None
    try:
        page = selectors.analysis_page(cursor=cursor)
    except InvalidCursor:
        page, error, status = (
            selectors.analysis_page(),
            "That page of analyses does not exist; showing the newest.",
            400,
        )
    choices = selectors.analysis_choices()
    drifts = selectors.drift_page(limit=10)
    context = {
        "analyses": page.analyses,
        "next_cursor": page.next_cursor,
        "drifts": drifts.reports,
        "form": form or AnalyzeWindowForm(initial=_default_window()),
        "compare": compare or CompareForm(analyses=choices),
        "can_compare": len(choices) >= 1,
        "can_operate": request.user.may_operate,
        "open_alerts": selectors.open_alert_count(),
        "error": error,
    }
    return render(request, "intents/windows/list.html", context, status=status)


def _list_refused(request: HttpRequest, reason: str) -> HttpResponse:
    return _list_page(request, error=reason)


@login_required
@require_http_methods(["GET", "POST"])
@refusal_shown(_list_refused)
def windows_view(request: HttpRequest) -> HttpResponse:
    """GET: the analyses, the drift reports and, for operators, the forms. POST: analyse a window (operators)."""
    if request.method == "GET":
        return _list_page(request)
    form = AnalyzeWindowForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form=form, status=422)
    try:
        analysis = window_analyze(actor=Actor.of_request(request), **form.analyze_arguments())
    except WindowRefused as refused:
        form.add_error(None, str(refused))
        return _list_page(request, form=form, status=refused.status)
    messages.success(
        request,
        f"Window #{analysis.pk}: {analysis.candidates_count} candidate(s) in {analysis.clusters_count} cluster(s)"
        + (f", {analysis.novel_count} novel." if analysis.novelty_checked else "; novelty not measured (no taxonomy)."),
    )
    return redirect("intents:window", analysis_id=analysis.pk)


@login_required
@require_POST
@refusal_shown(_list_refused)
def compare_view(request: HttpRequest) -> HttpResponse:
    """POST: store the drift between two analyses (operators) and show it."""
    form = CompareForm(request.POST, analyses=selectors.analysis_choices())
    if not form.is_valid():
        return _list_page(request, compare=form, status=422)
    data = form.cleaned_data
    try:
        report = drift_compare(
            actor=Actor.of_request(request),
            before=selectors.analysis_of(data["before"]),
            after=selectors.analysis_of(data["after"]),
            matching=data["matching"],
            match_threshold=data.get("match_threshold"),
        )
    except WindowRefused as refused:
        form.add_error(None, str(refused))
        return _list_page(request, compare=form, status=refused.status)
    return redirect("intents:drift", report_id=report.pk)


# -- one analysis -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterRow:
    cluster_id: str
    medoid_id: str
    medoid_label: str
    support: int
    cohesion: float
    labels: list[str]
    ambiguous: list[tuple[str, str]]


def cluster_rows(analysis: WindowAnalysis) -> list[ClusterRow]:
    """The clusters, biggest first (ties by cluster id), with their ambiguous members' labels."""
    rows = [
        ClusterRow(
            cluster_id=item["cluster_id"],
            medoid_id=item["medoid_id"],
            medoid_label=item.get("medoid_label", ""),
            support=int(item["support"]),
            cohesion=float(item["cohesion"]),
            labels=list(item.get("labels") or []),
            ambiguous=[
                (cid, (item.get("member_labels") or {}).get(cid, "")) for cid in item["ambiguous_candidate_ids"]
            ],
        )
        for item in analysis.clusters
    ]
    return sorted(rows, key=lambda row: (-row.support, row.cluster_id))


@login_required
def window_view(request: HttpRequest, analysis_id: int) -> HttpResponse:
    analysis = selectors.analysis_of(analysis_id)
    novelty = sorted(analysis.novelty, key=lambda row: (not row["novel"], row["similarity"], row["candidate_id"]))
    alerts = {alert.candidate_id: alert for alert in selectors.alerts_of(analysis)}
    context = {
        "analysis": analysis,
        "clusters": cluster_rows(analysis),
        "novel": [(row, alerts.get(row["candidate_id"])) for row in novelty if row["novel"]],
        "known": novelty[:NOVELTY_SHOWN] if len(novelty) <= NOVELTY_SHOWN else [],
        "known_count": sum(1 for row in novelty if not row["novel"]),
        "alert_badges": ALERT_BADGES,
        "drifts": selectors.drifts_involving(analysis),
    }
    return render(request, "intents/windows/analysis.html", context)


# -- one drift report -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MassRow:
    label: str
    kind: str
    before_id: str | None
    after_id: str | None
    before: float
    after: float
    delta: float
    similarity: float | None


def mass_rows(report: DriftReport) -> list[MassRow]:
    """Matched clusters (by before id), then retired, then new: the order of the spec's aligned vectors."""
    rows = [
        MassRow(
            label=item["before_label"]
            if item["before_label"] == item["after_label"] or not item["after_label"]
            else f"{item['before_label']} → {item['after_label']}",
            kind="matched",
            before_id=item["before_cluster_id"],
            after_id=item["after_cluster_id"],
            before=item["before_mass"],
            after=item["after_mass"],
            delta=item["mass_delta"],
            similarity=item.get("similarity"),
        )
        for item in report.changes
    ]
    rows += [
        MassRow(item["label"], "retired", item["cluster_id"], None, item["mass"], 0.0, -item["mass"], None)
        for item in report.retired
    ]
    rows += [
        MassRow(item["label"], "new", None, item["cluster_id"], 0.0, item["mass"], item["mass"], None)
        for item in report.new
    ]
    return rows


def mass_chart(rows: list[MassRow]) -> dict[str, Any]:
    return {
        "labels": [row.label or (row.before_id or row.after_id or "") for row in rows],
        "x_title": "intent cluster (medoid label)",
        "y_title": "share of the window's candidates",
        "kind": "bar",
        "series": [
            {"label": "before", "data": [round(row.before, 6) for row in rows]},
            {"label": "after", "data": [round(row.after, 6) for row in rows]},
        ],
    }


def jsd_chart(reports: list[DriftReport]) -> dict[str, Any]:
    return {
        "labels": [f"#{item.before_id} → #{item.after_id}" for item in reports],
        "x_title": "drift report (before → after window)",
        "y_title": "Jensen–Shannon divergence (bits)",
        "series": [{"label": "JSD", "data": [round(item.jsd, 6) for item in reports]}],
    }


@login_required
def drift_view(request: HttpRequest, report_id: int) -> HttpResponse:
    report = selectors.drift_of(report_id)
    rows = mass_rows(report)
    history = selectors.jsd_series()
    context = {
        "report": report,
        "rows": rows,
        "mass_chart": mass_chart(rows),
        "history": history,
        "jsd_chart": jsd_chart(history),
    }
    return render(request, "intents/windows/drift.html", context)


# -- novelty alerts ---------------------------------------------------------------------------------------------------


def _alerts_page(request: HttpRequest, *, error: str = "", status: int = 200) -> HttpResponse:
    wanted = request.GET.get("status", NoveltyAlert.Status.OPEN)
    wanted = wanted if wanted in {*NoveltyAlert.Status.values, "all"} else NoveltyAlert.Status.OPEN
    cursor = request.GET.get("cursor") or None
    try:
        page = selectors.alert_page(status="" if wanted == "all" else wanted, cursor=cursor)
    except InvalidCursor:
        page, error, status = selectors.alert_page(status=wanted), "That page of alerts does not exist.", 400
    context = {
        "alerts": page.alerts,
        "next_cursor": page.next_cursor,
        "status": wanted,
        "statuses": [*NoveltyAlert.Status.values, "all"],
        "alert_badges": ALERT_BADGES,
        "can_decide": request.user.may_decide_alerts,
        "error": error,
    }
    return render(request, "intents/windows/alerts.html", context, status=status)


@login_required
def alerts_view(request: HttpRequest) -> HttpResponse:
    return _alerts_page(request)


def _alerts_refused(request: HttpRequest, reason: str, alert_id: int) -> HttpResponse:
    return _alerts_page(request, error=reason)


@login_required
@require_POST
@refusal_shown(_alerts_refused)
def alert_decide_view(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = selectors.alert_of(alert_id)
    form = DecideAlertForm(request.POST)
    if not form.is_valid():
        return _alerts_page(request, error="Choose to dismiss or to promote the alert.", status=422)
    try:
        decided = novelty_alert_decide(
            actor=Actor.of_request(request),
            alert=alert,
            status=form.cleaned_data["decision"],
            note=form.cleaned_data.get("note") or "",
        )
    except WindowRefused as refused:
        return _alerts_page(request, error=str(refused), status=refused.status)
    messages.success(request, f"The alert on {decided.candidate_id} is {decided.get_status_display()}.")
    return redirect("intents:window_alerts")
