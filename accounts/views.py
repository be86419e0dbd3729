"""Login, logout, the settings page (API tokens) and the audit page."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from . import selectors, services, throttle
from .blinding import blind, sealed_events
from .forms import AgentCreateForm, AuditFilterForm, TokenCreateForm
from .roles import SCOPES, Role, agent_scopes_allowed, scope_requirement, scopes_allowed_for

_logout = auth_views.LogoutView.as_view()


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        services.logout_record(user=request.user, ip=throttle.client_ip(request))
    return _logout(request)


def _redirect_target(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        return target
    return resolve_url(settings.LOGIN_REDIRECT_URL)


@sensitive_post_parameters("password")
@csrf_protect
@never_cache
@require_http_methods(["GET", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    """Log in, refusing (429, no password check) while a lock stands against the attempt (accounts.throttle: this
    browser's device cookie, or the username from this address, the address, the username from new browsers); a
    success sets this browser's device cookie for the username."""
    next_url = _redirect_target(request)
    if request.method == "GET":
        if request.user.is_authenticated:
            return redirect(next_url)
        return _login_page(request, AuthenticationForm(request), next_url)

    username = request.POST.get("username", "")[:150]
    attempt = throttle.attempt_of(request, username)
    lockout = throttle.lockout_for(attempt)
    if lockout is not None:
        response = _login_page(
            request, AuthenticationForm(request, initial={"username": username}), next_url, lockout.message, 429
        )
        response["Retry-After"] = str(lockout.retry_after)
        return response

    form = AuthenticationForm(request, data=request.POST)
    if form.is_valid():
        user = form.get_user()
        services.session_log_in(request=request, user=user, attempt=attempt)
        response = redirect(next_url)
        throttle.set_device_cookie(response, user.get_username())
        return response
    notice = ""
    password_checked = form.has_error(NON_FIELD_ERRORS, "invalid_login") or form.has_error(NON_FIELD_ERRORS, "inactive")
    if password_checked and services.login_failure_record(attempt=attempt):
        notice = "That was one failed attempt too many: further attempts are refused for a while."
    return _login_page(request, form, next_url, notice)


def _login_page(
    request: HttpRequest, form: AuthenticationForm, next_url: str, notice: str = "", status: int = 200
) -> HttpResponse:
    context = {"form": form, "next": next_url, "notice": notice}
    return render(request, "accounts/login.html", context, status=status)


def _scope_rows(user, checked: list[str]) -> list[dict]:
    allowed = set(scopes_allowed_for(user))
    return [
        {
            "scope": scope,
            "description": description,
            "allowed": scope in allowed,
            "needs": scope_requirement(scope),
            "checked": scope in checked,
        }
        for scope, description in SCOPES.items()
    ]


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def settings_view(request: HttpRequest) -> HttpResponse:
    """The user's API tokens; a POST creates one and shows its plaintext on this response only."""
    form = TokenCreateForm(data=request.POST if request.method == "POST" else None)
    created = None
    if form.is_bound and form.is_valid():
        try:
            token, plaintext = services.api_token_create(
                actor=services.Actor.of_request(request),
                user=request.user,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                expires_at=form.expires_at(),
            )
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            created = {"token": token, "plaintext": plaintext}
            form = TokenCreateForm()
    status = 400 if form.is_bound and form.errors else 200
    checked = form.data.getlist("scopes") if form.is_bound else []
    context = {
        "tokens": list(selectors.tokens_of(request.user)),
        "form": form,
        "scope_rows": _scope_rows(request.user, checked),
        "created": created,
        "roles": [role.value for role in Role if request.user.has_role(role)],
    }
    return render(request, "accounts/settings.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    """GET asks for confirmation; POST revokes (idempotent) and returns to the settings page."""
    token = selectors.token_of_user(request.user, token_id)
    if request.method == "POST":
        services.api_token_revoke(actor=services.Actor.of_request(request), token=token)
        messages.success(request, f"Token “{token.name}” is revoked; agents using it now get 401.")
        return redirect("accounts:settings")
    return render(request, "accounts/token_revoke.html", {"token": token})


@login_required
def audit_view(request: HttpRequest) -> HttpResponse:
    """The audit log, admins only, filtered and paged by cursor; htmx requests get the results fragment. Judgments
    of what is still open are left out for an admin who has not judged it (accounts.blinding)."""
    if not request.user.may_administer:
        raise PermissionDenied
    form = AuditFilterForm(data=request.GET)
    page = None
    if form.is_valid():
        filters = form.filters()
        page = selectors.audit_page(filters, after=form.cursor(), hide=sealed_events(request.user))
        events = blind(page.events, request.user)
        if filters.actor:  # a sealed judgment's actor is withheld, so it cannot be found by its actor either
            events = [event for event in events if not event.sealed]
        page = selectors.AuditPage(events=events, next_cursor=page.next_cursor)
    query = request.GET.copy()
    query.pop("after", None)
    context = {"form": form, "page": page, "query": query.urlencode()}
    template = "accounts/audit.html#results" if request.htmx else "accounts/audit.html"
    return render(request, template, context)


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def agents_view(request: HttpRequest) -> HttpResponse:
    """Operators create agent identities and their tokens (plaintext shown on this response only) and revoke them.
    POST `action`: "agent" (create an agent), "token" (a token for an agent), "revoke" (an agent's token)."""
    if not request.user.has_role(Role.OPERATOR):
        raise PermissionDenied
    actor = services.Actor.of_request(request)
    action = request.POST.get("action", "") if request.method == "POST" else ""
    agent_form = AgentCreateForm(data=request.POST if action == "agent" else None)
    token_form = TokenCreateForm(data=request.POST if action == "token" else None)
    created = error = None
    agents = list(selectors.agents())
    if action == "agent" and agent_form.is_valid():
        try:
            agent = services.agent_create(actor=actor, name=agent_form.cleaned_data["name"])
        except services.AgentRefused as exc:
            agent_form.add_error("name", str(exc))
        else:
            messages.success(request, f"Agent “{agent.username}” is created: give it a token below.")
            return redirect("accounts:agents")
    elif action == "token":
        agent = next((a for a in agents if str(a.pk) == request.POST.get("agent", "")), None)
        if agent is None:
            error = "Choose an agent."
        elif token_form.is_valid():
            try:
                token, plaintext = services.api_token_create(
                    actor=actor,
                    user=agent,
                    name=token_form.cleaned_data["name"],
                    scopes=token_form.cleaned_data["scopes"],
                    expires_at=token_form.expires_at(),
                )
            except ValueError as exc:
                error = str(exc)
            else:
                created = {"token": token, "plaintext": plaintext, "agent": agent}
                token_form = TokenCreateForm()
    elif action == "revoke":
        token = selectors.agent_token(request.POST.get("token", ""))
        services.api_token_revoke(actor=actor, token=token)
        messages.success(request, f"Token “{token.name}” of {token.user.username} is revoked.")
        return redirect("accounts:agents")
    invalid = bool(error) or (agent_form.is_bound and agent_form.errors) or (token_form.is_bound and token_form.errors)
    context = {
        "agents": [(agent, list(selectors.tokens_of(agent))) for agent in agents],
        "agent_form": agent_form,
        "token_form": token_form,
        "error": error,
        "created": created,
        "scope_rows": [row for row in _scope_rows(request.user, []) if row["scope"] in agent_scopes_allowed()],
    }
    return render(request, "accounts/agents.html", context, status=400 if invalid else 200)
