from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from .call_rows import call_rows
from .factory import model_is_scripted
from .models import ModelCall
from .selectors import CallFilters, model_call_choices, model_call_page


@login_required
@require_safe
def calls_view(request: HttpRequest) -> HttpResponse:
    """The model-call ledger, newest first: every logged-in user may read it."""
    filters = CallFilters.from_query(request.GET)
    page = model_call_page(filters, request.GET.get("page"))
    roles, model_ids = model_call_choices()
    context = {
        "filters": filters,
        "page": page,
        "rows_html": call_rows(page.calls),
        "roles": roles,
        "model_ids": model_ids,
        "statuses": ModelCall.Status.values,
        "query": filters.as_query(),
        "scripted": model_is_scripted(),
    }
    template = "llm/calls.html#results" if getattr(request, "htmx", False) else "llm/calls.html"
    return render(request, template, context)
