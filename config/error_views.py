"""The error pages: 403, 404, 413, 414 and 500, styled like every page and saying why; under /api/ the API's Error
body.

403 and 404 render with the request (the navigation of the signed-in user, the reason). 500 renders with an empty
context and no request, so it needs neither the database nor a working session: its navigation is static. The 414
page is answered by config.middleware.LongUrlMiddleware below the server's own limit, and by the Procfile's gunicorn
worker class (config.gunicorn_worker) above it. The 413 page is answered by config.bodies.BodyLimitMiddleware for a
body over DATA_UPLOAD_MAX_MEMORY_SIZE, before the CSRF check or a view reads it.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

GENERIC_403 = "You do not have the role this page needs."


def is_api(request: HttpRequest) -> bool:
    return request.path == "/api/v1" or request.path.startswith("/api/")


def api_error(status: int, code: str, message: str, details: Any = None) -> JsonResponse:
    return JsonResponse({"code": code, "message": message, "details": details}, status=status)


def _reason(exception: BaseException | None) -> str:
    """The exception's own message, when it carries one written for people (not Django's resolver dict)."""
    if exception is None or not exception.args:
        return ""
    message = exception.args[0]
    return message.strip() if isinstance(message, str) else ""


def _capfirst(text: str) -> str:
    return text[:1].upper() + text[1:]


def _roles(request: HttpRequest) -> list[str]:
    from accounts.roles import Role

    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return []
    return [role.value for role in Role if user.has_role(role)]


def permission_denied(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    reason = _reason(exception)
    if is_api(request):
        return api_error(403, "forbidden", reason or "forbidden")
    reason = _capfirst(reason).rstrip(".") + "." if reason else GENERIC_403
    context = {"reason": reason, "roles": _roles(request), "request_path": request.path}
    return HttpResponse(loader.render_to_string("403.html", context, request), status=403)


CSRF_REASON = (
    "The form could not be accepted: it was sent without this session's security token (the page may be old, or "
    "the session ended). Reload the page and send it again."
)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the 403 page, saying what to do (Django's own reason stays in the log)."""
    from django.core.exceptions import PermissionDenied

    return permission_denied(request, PermissionDenied(CSRF_REASON))


def page_not_found(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    reason = _reason(exception)
    if is_api(request):
        return api_error(404, "not_found", reason or f"nothing at {request.path}")
    context = {"reason": reason, "request_path": request.path}
    return HttpResponse(loader.render_to_string("404.html", context, request), status=404)


def server_error(request: HttpRequest | None = None) -> HttpResponse:
    """No request context and no database: whatever failed may be what a context processor would need."""
    if request is not None and is_api(request):
        return api_error(500, "server_error", "the server failed to answer; the error is logged")
    return HttpResponse(loader.get_template("500.html").render({}), status=500)


def uri_too_long(request: HttpRequest, *, length: int, limit: int) -> HttpResponse:
    if is_api(request):
        return api_error(414, "uri_too_long", f"the URL has {length} characters; at most {limit}", {"limit": limit})
    context = {"length": length, "limit": limit, "path": request.path[:200]}
    return HttpResponse(loader.render_to_string("414.html", context, request), status=414)


def payload_too_large(request: HttpRequest, *, limit: int) -> HttpResponse:
    if is_api(request):
        return api_error(413, "payload_too_large", f"the body is larger than {limit} bytes", {"max_bytes": limit})
    context = {"limit": limit, "limit_mib": f"{limit / 2**20:.1f}", "path": request.path[:200]}
    return HttpResponse(loader.render_to_string("413.html", context, request), status=413)


def plain_error(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """A short plain-text answer for what only a hand-made request gets (a malformed Content-Length, a chunked body
    the server cannot read): no browser sends these."""
    return HttpResponse(message[:1].upper() + message[1:] + ".", status=status, content_type="text/plain")


def static_page(template: str, **context: Any) -> str:
    """A page rendered without a request (the gunicorn worker's 414): the static navigation of the 500 page."""
    return loader.get_template(template).render(context)
