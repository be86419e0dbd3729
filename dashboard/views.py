"""The dashboard: what came in lately, how runs went, what is waiting for review (templates/dashboard.html)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from . import selectors


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard.html", selectors.dashboard_context(request.user))
