"""Login, logout, the settings page (API tokens) and the audit page. The accounts issue fills these in."""

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from .models import AuditEvent

login_view = auth_views.LoginView.as_view(template_name="accounts/login.html", redirect_authenticated_user=True)
logout_view = require_POST(auth_views.LogoutView.as_view())


@login_required
def settings_view(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/settings.html", {"tokens": request.user.api_tokens.all()})


@login_required
def audit_view(request: HttpRequest) -> HttpResponse:
    if not request.user.is_admin:
        raise PermissionDenied
    return render(request, "accounts/audit.html", {"events": AuditEvent.objects.select_related("actor_user")[:100]})
