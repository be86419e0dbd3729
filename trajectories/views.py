"""Trajectory pages: the explorer (search, filters, sorting, totals, keyset pages, htmx fragment, the address as its
state, the user's columns, JSONL export), one run's page (waterfall, steps, formatted metadata) and two runs side by
side."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_POST

from common.cursors import InvalidCursor

from . import explorer_columns, run_markup, run_panels, selectors
from .core.align import align_tools
from .filter_form import filter_form_html
from .forms import RunFilterForm
from .models import EVALUATION_SOURCE
from .run_rows import COLUMNS, header_row, hidden_classes, run_rows

PAGE_SIZE = 25
# The range filters, passed to RunFilters under their own names.
RANGE_FIELDS = (
    "score_min",
    "score_max",
    "duration_min",
    "duration_max",
    "cost_min",
    "cost_max",
    "steps_min",
    "steps_max",
)
# The fields that narrow or order the list (kept in paging and export links); the cursor is not one of them.
FILTER_FIELDS = (
    "q",
    "outcome",
    "source",
    "tool",
    "intent",
    "kind",
    "received_from",
    "received_to",
    *RANGE_FIELDS,
    "sort",
)
# Longer than any query string the form can produce (its max lengths, percent-encoded): refused with a message
# before anything is parsed, well under the web server's request-line limit.
MAX_QUERY_CHARS = 4000


def _is_production(run) -> bool:
    return run.source != EVALUATION_SOURCE


def _filters(form: RunFilterForm) -> selectors.RunFilters:
    """The valid fields of a bound form (invalid ones are left out), production runs by default."""
    values = form.cleaned_data if form.is_bound else {}
    received_from, received_before = form.received_bounds() if form.is_bound else (None, None)
    return selectors.RunFilters(
        outcome=values.get("outcome") or None,
        source=values.get("source") or None,
        tool=values.get("tool") or None,
        intent=values.get("intent") or None,
        search=values.get("q") or None,
        kind=values.get("kind") or "production",
        received_from=received_from,
        received_before=received_before,
        **{name: values.get(name) for name in RANGE_FIELDS},
    )


def _read_form(request: HttpRequest) -> tuple[RunFilterForm, str]:
    """The bound filter form (validated) and a notice for what was refused or ignored."""
    size = len(request.META.get("QUERY_STRING", ""))
    if size > MAX_QUERY_CHARS:
        form = RunFilterForm()
        return form, (
            f"These filters are too long ({size:,} characters in the address; at most {MAX_QUERY_CHARS:,}) "
            "and were ignored: showing all production runs."
        )
    form = RunFilterForm(request.GET or None)
    if not form.is_bound or form.is_valid():
        return form, ""
    return form, f"Some filters were not valid and were ignored. {form.error_summary()}"


def _active(request: HttpRequest, form: RunFilterForm) -> dict[str, str]:
    """The filters in effect as they were typed (valid, non-empty): what paging and export links carry."""
    if not form.is_bound:
        return {}
    valid = form.cleaned_data
    return {
        name: request.GET[name]
        for name in FILTER_FIELDS
        if name in valid and valid[name] not in (None, "") and request.GET.get(name, "") != ""
    }


@login_required
def list_view(request: HttpRequest) -> HttpResponse:
    form, notice = _read_form(request)
    filters = _filters(form)
    values = form.cleaned_data if form.is_bound else {}
    sort = values.get("sort") or "newest"
    cursor = values.get("cursor") or None
    # Totals the daily totals answer come with the page; a walk of the matching runs is left to its own request, which
    # the page asks for once it is shown (totals_view), so the rows never wait for it.
    with_totals = selectors.totals_are_kept(filters)
    try:
        page, totals = selectors.run_results(
            filters=filters, cursor=cursor, limit=PAGE_SIZE, sort=sort, totals=with_totals
        )
    except InvalidCursor:
        notice = " ".join(filter(None, [notice, "That page link is no longer valid; showing the first page."]))
        cursor = None
        page, totals = selectors.run_results(filters=filters, limit=PAGE_SIZE, sort=sort, totals=with_totals)
    run_panels.annotate_listed_runs(page.runs, viewer=request.user, production=_is_production)
    rows_html = run_rows(page.runs)
    active = _active(request, form)
    shown = explorer_columns.shown_columns(request)
    context = {
        "form": form,
        "filter_form": filter_form_html(form, reverse("trajectories:list")),
        "page": page,
        "rows_html": rows_html,
        "header_row": header_row(),
        "hidden_columns": hidden_classes(shown),
        "column_choices": [(key, label, key in shown) for key, label, _ in COLUMNS if key != "run"],
        "columns_url": reverse("trajectories:columns"),
        "this_url": request.get_full_path(),
        "totals": totals,
        "notice": notice,
        "kind": filters.kind,
        "is_first_page": not cursor,
        "first_query": urlencode(active),
        "next_query": urlencode({**active, "cursor": page.next_cursor}) if page.next_cursor else "",
        "export_query": urlencode(active),
        "totals_url": reverse("trajectories:totals") + (f"?{urlencode(active)}" if active else ""),
    }
    # htmx asks for the results only; a history restore htmx could not serve from its cache asks for the whole page.
    fragment = request.htmx and not request.htmx.history_restore_request
    response = render(request, "trajectories/list.html#results" if fragment else "trajectories/list.html", context)
    if fragment:  # the bar shows what was asked for, without the form's empty fields and defaults
        response["HX-Push-Url"] = _address(request)
    patch_vary_headers(response, ["HX-Request"])  # the browser's cache never answers a page with a fragment
    return response


# The form's values that are the defaults anyway: left out of the address pushed to the bar.
DEFAULTS = {"kind": "production", "sort": "newest"}


def _address(request: HttpRequest) -> str:
    """The list's address for this request: its query without empty fields or defaults, in the order sent (the
    address is the state that Back brings back, and the fields are filled from it: static/js/explorer.js)."""
    kept = [(name, value) for name, value in request.GET.items() if value != "" and DEFAULTS.get(name) != value]
    return request.path + (f"?{urlencode(kept)}" if kept else "")


@login_required
@require_POST
def columns_view(request: HttpRequest) -> HttpResponse:
    """Keep the explorer's column choice (trajectories.explorer_columns): from htmx, as each box changes (the page
    has hidden the column already), no content; from the plain form, back to the list as it was."""
    columns = explorer_columns.choose(request.POST.getlist("column"))
    response = HttpResponse(status=204) if request.htmx else HttpResponseRedirect(_list_address(request))
    explorer_columns.keep(response, request, columns)
    return response


def _list_address(request: HttpRequest) -> str:
    """The `next` the chooser's form carries when it is an address of the list on this site, else the list."""
    target = request.POST.get("next", "")
    listed = reverse("trajectories:list")
    if url_has_allowed_host_and_scheme(target, {request.get_host()}) and urlsplit(target).path == listed:
        return target
    return listed


@login_required
def totals_view(request: HttpRequest) -> HttpResponse:
    """The explorer's totals line for the filters in the query (the fragment a list page asks for when its totals
    need a walk of the matching runs)."""
    form, _ = _read_form(request)
    filters = _filters(form)
    active = _active(request, form)
    context = {
        "totals": selectors.searched_totals(filters=filters),
        "kind": filters.kind,
        "first_query": urlencode(active),
        "export_query": urlencode(active),
    }
    return render(request, "trajectories/list.html#totals", context)


def _jsonl(items: Iterator[dict[str, Any]]) -> Iterator[str]:
    for item in items:
        yield json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n"


@login_required
def export_view(request: HttpRequest) -> HttpResponse:
    """The filtered runs as JSONL in the ingest format (one run a line, oldest first), streamed."""
    form, notice = _read_form(request)
    if notice:
        return HttpResponse(notice + "\n", status=400, content_type="text/plain; charset=utf-8")
    response = StreamingHttpResponse(
        _jsonl(selectors.export_items(filters=_filters(form))), content_type="application/x-ndjson; charset=utf-8"
    )
    response["Content-Disposition"] = 'attachment; filename="runs.jsonl"'
    return response


@login_required
def detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    run, steps = selectors.run_and_steps(pk)
    waterfall = selectors.run_waterfall(run, steps)
    panels = run_panels.run_panels(request.user, run, production=run.source != EVALUATION_SOURCE)
    context = {
        "run": run,
        "steps": steps,
        "waterfall": waterfall,
        "waterfall_svg": run_markup.waterfall_svg(waterfall, run.pk) if waterfall.timed else "",
        "step_timeline": run_markup.step_timeline(
            steps, run_panels.evidence_steps(panels), reverse("trajectories:list")
        ),
        "is_evaluation": run.source == EVALUATION_SOURCE,
        "metadata_json": json.dumps(run.metadata, indent=2, ensure_ascii=False, sort_keys=True) if run.metadata else "",
        "inferred": _inferred(run.metadata),
        # the other apps' panels (trajectories.run_panels), each an autoescaped template (render_to_string: safe)
        "panels_html": [render_to_string(panel.template, panel.context, request) for panel in panels],
    }
    return render(request, "trajectories/detail.html", context)


def _inferred(metadata: Any) -> list[tuple[str, str]]:
    """What an OTLP run's mapping inferred (metadata.otlp.inferred: field → where it came from), for the run page's
    "outcome inferred from …" lines; [] for other runs."""
    otlp = metadata.get("otlp") if isinstance(metadata, dict) else None
    inferred = otlp.get("inferred") if isinstance(otlp, dict) else None
    if not isinstance(inferred, dict):
        return []
    return [(str(field), str(source)) for field, source in sorted(inferred.items())]


def _parse_run_id(raw: str | None) -> int | None:
    text = (raw or "").strip().removeprefix("#")
    if not (text.isascii() and text.isdigit()) or len(text) > 18 or int(text) < 1:
        return None
    return int(text)


def _compare_rows(run_a, run_b) -> list[dict[str, Any]]:
    steps_a, steps_b = list(run_a.steps.all()), list(run_b.steps.all())
    rows = []
    for aligned in align_tools([s.tool for s in steps_a], [s.tool for s in steps_b]):
        a = steps_a[aligned.a] if aligned.a is not None else None
        b = steps_b[aligned.b] if aligned.b is not None else None
        differs = []
        if a is not None and b is not None:
            if a.tool != b.tool:
                differs.append("tool")
            if a.arguments != b.arguments:
                differs.append("arguments")
            if a.ok != b.ok:
                differs.append("status")
        rows.append({"kind": aligned.kind, "a": a, "b": b, "differs": differs})
    return rows


@login_required
def compare_view(request: HttpRequest) -> HttpResponse:
    """Two runs side by side, their steps aligned on the tool sequences (trajectories.core.align)."""
    raw_a, raw_b = request.GET.get("a", ""), request.GET.get("b", "")
    context: dict[str, Any] = {"raw_a": raw_a[:20], "raw_b": raw_b[:20], "error": "", "rows": []}
    if not raw_a and not raw_b:
        return render(request, "trajectories/compare.html", context)
    id_a, id_b = _parse_run_id(raw_a), _parse_run_id(raw_b)
    if id_a is None or id_b is None:
        context["error"] = "Give two run numbers to compare, e.g. ?a=12&b=15."
        return render(request, "trajectories/compare.html", context, status=400)
    runs = selectors.runs_with_steps([id_a, id_b])
    missing = [f"#{pk}" for pk in (id_a, id_b) if pk not in runs]
    if missing:
        context["error"] = f"No run {' or '.join(dict.fromkeys(missing))}."
        return render(request, "trajectories/compare.html", context, status=404)
    run_a, run_b = runs[id_a], runs[id_b]
    rows = _compare_rows(run_a, run_b)
    context.update(
        run_a=run_a,
        run_b=run_b,
        rows=rows,
        same=sum(row["kind"] == "equal" and not row["differs"] for row in rows),
    )
    return render(request, "trajectories/compare.html", context)
