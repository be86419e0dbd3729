"""Procedure pages: the list (with "mine now" for operators) and a version's page with its replay reports."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.services import Actor
from intents.taxonomy.selectors import reviewed_intents_by_key
from procedures.core import HIGHER_IS_BETTER
from reviews.selectors import pending_requests_for
from uplift import selectors as uplift_selectors

from . import charts, errors, selectors
from .forms import AmendForm, MineForm, RerunForm, RubricFloorForm
from .mining import services as mining_services
from .promotable import KIND as PROMOTION_KIND
from .versions import services as version_services

# Versions a reviewer or operator may propose for activation (a failed one needs an admin override of its gate).
PROPOSABLE = ("ready", "failed", "retired")

METRICS_SHOWN = (
    "task_success",
    "outcome_success",
    "tool_correctness",
    "grounding",
    "answered_rate",
    "mean_steps",
    "mean_tokens",
    "mean_cost",
    "counterexamples",
    "regressions",
    "improvements",
)


def _list_page(request: HttpRequest, form: MineForm | None = None, status: int = 200) -> HttpResponse:
    rows = selectors.procedure_rows()
    reviewed = reviewed_intents_by_key(row.procedure.intent for row in rows)
    for row in rows:
        row.reviewed_intent = reviewed.get(row.procedure.intent)
    context = {"rows": rows, "mine_form": form or MineForm()}
    return render(request, "procedures/list.html", context, status=status)


@login_required
def list_view(request: HttpRequest) -> HttpResponse:
    return _list_page(request)


@login_required
@require_POST
def mine_view(request: HttpRequest) -> HttpResponse:
    form = MineForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form, status=422)
    try:
        result = mining_services.procedure_mine(actor=Actor.of_request(request), **form.cleaned_data)
    except errors.MiningError as exc:
        form.add_error(None, str(exc))
        return _list_page(request, form, status=422)
    version = result.version
    if result.created:
        messages.success(request, f"Mined version {version.number}; its replay is queued.")
    elif result.replays:
        queued = " and ".join(replay.mode for replay in result.replays)
        messages.info(request, f"The runs give version {version.number} again; its {queued} replay is queued.")
    else:
        messages.info(request, f"Nothing new: the runs give version {version.number} again.")
    return redirect("procedures:version", pk=version.pk)


def metric_rows(candidate: dict[str, Any] | None, active: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each shown metric with the compared value and the delta; `better` is True/False/None (no comparison)."""
    candidate = candidate or {}
    rows = []
    for name in METRICS_SHOWN:
        value = candidate.get(name)
        base = None if active is None else active.get(name)
        delta = better = None
        if isinstance(value, int | float) and isinstance(base, int | float):
            delta = value - base
            if delta:
                better = (delta > 0) == HIGHER_IS_BETTER.get(name, name != "regressions")
        if value is None and base is None:
            continue
        rows.append({"name": name, "value": value, "active": base, "delta": delta, "better": better})
    return rows


@login_required
def version_view(request: HttpRequest, pk: int) -> HttpResponse:
    page = selectors.version_page(pk)
    replays = [
        {
            "view": view,
            "metrics": metric_rows(view.replay.metrics.get("candidate"), view.replay.metrics.get("active")),
        }
        for view in page.replays
    ]
    active_metrics = None
    if page.active_replay is not None:
        active_metrics = metric_rows(page.active_replay.metrics.get("candidate"), None)
    version = page.version
    pending = pending_requests_for(kind=PROMOTION_KIND, parent_key=str(page.procedure.pk))
    is_active = page.procedure.active_version_id == version.pk
    context = {
        "page": page,
        "version": page.version,
        "procedure": page.procedure,
        "replays": replays,
        "active_metrics": active_metrics,
        "replay_charts": charts.replay_charts(page),
        "procedure_trends": charts.procedure_trends(page.procedure),
        "can_propose": request.user.may_propose
        and not is_active
        and version.status in PROPOSABLE
        and str(version.pk) not in pending,
        "needs_override": version.status == "failed",
        "open_request": pending.get(str(version.pk)),
        "other_requests": [item for key, item in pending.items() if key != str(version.pk)],
        "promotion_kind": PROMOTION_KIND,
        "replays_open": any(view.replay.status in ("queued", "running") for view in page.replays),
        "rubric_floor_form": RubricFloorForm(initial={"rubric_floor": page.procedure.rubric_floor}),
        "amend_form": AmendForm(
            initial={
                "preconditions": "\n".join(page.version.preconditions),
                "failure_exits": "\n".join(page.version.failure_exits),
            }
        ),
    }
    certificate = uplift_selectors.latest_certificate(PROMOTION_KIND, str(version.pk))
    flag = uplift_selectors.coverage_flags_of(PROMOTION_KIND, [str(version.pk)]).get(str(version.pk))
    context.update(
        {
            "certificate": uplift_selectors.certificate_summary(certificate),
            "coverage_flag": flag,
            "may_recertify": request.user.may_operate,
            "review": page.review,
            "shown_status": page.status,
            "rerun_form": RerunForm(),
            # What a re-split splits anew: the runs this version was mined from (version_services._runs_of_version).
            "split_runs": len({*version.training_run_ids, *version.held_out_run_ids}),
            # The polled fragment also replaces the page head (status) and the promotion area (Propose) out of band.
            "oob": bool(request.htmx),
        }
    )
    if request.htmx:
        return render(request, "procedures/version.html#replays-section", context)
    return render(request, "procedures/version.html", context)


@login_required
@require_POST
def amend_view(request: HttpRequest, pk: int) -> HttpResponse:
    version = selectors.version_by_id(pk)
    form = AmendForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The texts are too long; nothing changed.")
        return redirect("procedures:version", pk=pk)
    try:
        result = version_services.procedure_version_amend(
            actor=Actor.of_request(request),
            version=version,
            preconditions=form.lines("preconditions"),
            failure_exits=form.lines("failure_exits"),
        )
    except errors.MiningError as exc:
        messages.error(request, str(exc))
        return redirect("procedures:version", pk=pk)
    if result.created:
        messages.success(request, f"Saved as version {result.version.number}; its replay is queued.")
    else:
        messages.info(request, f"Nothing new: version {result.version.number} holds exactly this.")
    return redirect("procedures:version", pk=result.version.pk)


@login_required
@require_POST
def rubric_floor_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Set or clear the rubric floor of the version's procedure (applies to live replays settled from now on)."""
    version = selectors.version_by_id(pk)
    form = RubricFloorForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The rubric floor is a number from 0 to 1 (blank turns it off); nothing changed.")
        return redirect("procedures:version", pk=pk)
    floor = form.cleaned_data["rubric_floor"]
    version_services.rubric_floor_set(actor=Actor.of_request(request), procedure=version.procedure, floor=floor)
    if floor is None:
        messages.success(request, "No rubric floor: live replays are gated on their metrics only.")
    else:
        messages.success(request, f"Rubric floor {floor:g}: live replays settled from now on are judged against it.")
    return redirect("procedures:version", pk=pk)


@login_required
@require_POST
def rerun_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Run a failed version's replay again with the same settings (operators; audited as replay.rerun), or, when
    the form carries a seed and a held-out share, on another split of its runs
    (version_services.procedure_version_resplit: this version replayed on the new held-out runs, or a new version
    when the split learns other steps)."""
    version = selectors.version_by_id(pk)
    if "seed" in request.POST or "held_out_share" in request.POST:
        return _rerun_split(request, version)
    try:
        replays = version_services.replay_rerun(actor=Actor.of_request(request), version=version)
    except errors.ReplayRefused as exc:
        messages.error(request, str(exc))
        return redirect("procedures:version", pk=pk)
    modes = " and ".join(replay.mode for replay in replays)
    messages.success(request, f"The {modes} replay of version {version.number} is queued again.")
    return redirect("procedures:version", pk=pk)


def _rerun_split(request: HttpRequest, version) -> HttpResponse:
    form = RerunForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Nothing was queued: {form.reason()}")
        return redirect("procedures:version", pk=version.pk)
    seed, share = form.cleaned_data["seed"], form.cleaned_data["held_out_share"]
    try:
        result = version_services.procedure_version_resplit(
            actor=Actor.of_request(request),
            version=version,
            seed=seed,
            held_out_share=share,
            live=form.cleaned_data["live"],
        )
    except (errors.ReplayRefused, errors.MiningError) as exc:
        messages.error(request, f"Nothing was queued: {exc}")
        return redirect("procedures:version", pk=version.pk)
    split = f"seed {seed}, held-out share {share:g}"
    held_out = len(result.replays[0].held_out_run_ids) if result.replays else 0
    if result.created:
        messages.success(
            request,
            f"The split ({split}) learns other steps: saved as version {result.version.number} "
            f"({held_out} held-out runs); its replay is queued.",
        )
    else:
        messages.success(
            request,
            f"The split ({split}) learns version {result.version.number}: it is replayed on the "
            f"{held_out} held-out runs of this split.",
        )
    return redirect("procedures:version", pk=result.version.pk)


@login_required
def run_vs_view(request: HttpRequest, run_id: int) -> HttpResponse:
    """A run against the active procedure of its intent (linked from the run page)."""
    from .run_vs import run_against_active_procedure

    return render(request, "procedures/run_vs.html", {"vs": run_against_active_procedure(run_id)})
