"""Trajectory pages: the run list (filters, cursor paging, htmx fragment) and one run's step timeline."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode

from config.cursors import InvalidCursor
from reviews import rubric_selectors

from . import selectors
from .forms import RunFilterForm

PAGE_SIZE = 25
FILTER_FIELDS = ("q", "outcome", "source", "tool", "intent")


@login_required
def list_view(request: HttpRequest) -> HttpResponse:
    form = RunFilterForm(request.GET or None)
    values = form.cleaned_data if form.is_valid() else {}
    filters = selectors.RunFilters(**{name: values.get(name) or None for name in FILTER_FIELDS})
    notice = "" if form.is_valid() or not form.is_bound else "Some filters were not valid and were ignored."
    try:
        page = selectors.run_page(filters=filters, cursor=values.get("cursor") or None, limit=PAGE_SIZE)
    except InvalidCursor:
        notice = "That page link is no longer valid; showing the newest runs."
        page = selectors.run_page(filters=filters, limit=PAGE_SIZE)
    rubric_selectors.attach_rubric_scores(page.runs)
    active = {name: values[name] for name in FILTER_FIELDS if values.get(name)}
    context = {
        "form": form,
        "page": page,
        "notice": notice,
        "is_first_page": not values.get("cursor") or bool(notice),
        "first_query": urlencode(active),
        "next_query": urlencode({**active, "cursor": page.next_cursor}) if page.next_cursor else "",
    }
    template = "trajectories/list.html#results" if request.htmx else "trajectories/list.html"
    return render(request, template, context)


@login_required
def detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    run = selectors.run_with_steps(pk)
    context = {
        "run": run,
        "steps": list(run.steps.all()),
        "rubric_panel": rubric_selectors.run_panel(request.user, run),
    }
    return render(request, "trajectories/detail.html", context)
