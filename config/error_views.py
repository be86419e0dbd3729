"""The error pages: 400, 403, 404, 405, 413, 414 and 500, styled like every page and saying why; under /api/ the API's
Error body. They are what every mode shows: Django's technical pages only under WAYMARK_DEBUG=1, set on purpose.

400, 403, 404 and 405 render with the request (the navigation of the signed-in user, the reason; a visitor who is not
signed in gets the static navigation and a sign-in link). No exception text reaches the page unless it was written for
people: a 400's reason only from BadRequest (a SuspiciousOperation's text names settings, e.g. ALLOWED_HOSTS), a 403's
and a 404's from the view's own message. 500 renders with an empty context and no request, so it needs neither the
database nor a working session: its navigation is static. The 414 page is answered by
config.middleware.LongUrlMiddleware below the server's own limit, and by the Procfile's gunicorn worker class
(config.gunicorn_worker) above it. The 413 page is answered by config.middleware.BodyLimitMiddleware for a body over
DATA_UPLOAD_MAX_MEMORY_SIZE, before the CSRF check or a view reads it.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

GENERIC_403 = "You do not have the role this page needs."
GENERIC_400 = "the request could not be read"
SERVER_ERROR = "an unexpected error occurred; it has been logged"


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


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int) -> HttpResponse:
    """An error page with the request: `error_page` gives a visitor who is not signed in the static navigation."""
    return HttpResponse(loader.render_to_string(template, {**context, "error_page": True}, request), status=status)


def bad_request(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    """handler400: a BadRequest a view raised with its message; any other (a SuspiciousOperation: a host not in
    ALLOWED_HOSTS, too many fields) says only that the request could not be read."""
    reason = _reason(exception) if isinstance(exception, BadRequest) else ""
    if is_api(request):
        return api_error(400, "bad_request", reason or GENERIC_400)
    context = {"reason": _capfirst(reason).rstrip(".") + "." if reason else "", "request_path": request.path[:200]}
    return _page(request, "400.html", context, status=400)


def permission_denied(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    reason = _reason(exception)
    if is_api(request):
        return api_error(403, "forbidden", reason or "forbidden")
    reason = _capfirst(reason).rstrip(".") + "." if reason else GENERIC_403
    context = {"reason": reason, "roles": _roles(request), "request_path": request.path}
    return _page(request, "403.html", context, status=403)


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
    return _page(request, "404.html", context, status=404)


def method_not_allowed(request: HttpRequest, *, allowed: str, page: str = "") -> HttpResponse:
    """A method the address does not take (config.middleware.PageMethodMiddleware sends GETs of a form's address to
    its page instead): the styled 405 naming what it takes and the page it belongs to."""
    if is_api(request):
        message = f"{request.method} is not allowed on {request.path[:200]}"
        response = api_error(405, "method_not_allowed", message, {"allowed": allowed})
    else:
        context = {"method": request.method, "allowed": allowed, "page": page, "request_path": request.path[:200]}
        response = _page(request, "405.html", context, status=405)
    if allowed:
        response["Allow"] = allowed
    return response


def server_error(request: HttpRequest | None = None) -> HttpResponse:
    """No request context and no database: whatever failed may be what a context processor would need. The API's
    answer is the one its own handler gives for an error inside an operation (config.api.on_unexpected)."""
    if request is not None and is_api(request):
        return api_error(500, "internal_error", SERVER_ERROR)
    return HttpResponse(loader.get_template("500.html").render({}), status=500)


def uri_too_long(request: HttpRequest, *, length: int, limit: int) -> HttpResponse:
    if is_api(request):
        return api_error(414, "uri_too_long", f"the URL has {length} characters; at most {limit}", {"limit": limit})
    context = {"length": length, "limit": limit, "path": request.path[:200]}
    return _page(request, "414.html", context, status=414)


def payload_too_large(request: HttpRequest, *, limit: int) -> HttpResponse:
    if is_api(request):
        return api_error(413, "payload_too_large", f"the body is larger than {limit} bytes", {"max_bytes": limit})
    context = {"limit": limit, "limit_mib": f"{limit / 2**20:.1f}", "path": request.path[:200]}
    return _page(request, "413.html", context, status=413)


def plain_error(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """A short plain-text answer for what only a hand-made request gets (a malformed Content-Length, a chunked body
    the server cannot read): no browser sends these."""
    return HttpResponse(message[:1].upper() + message[1:] + ".", status=status, content_type="text/plain")


def static_page(template: str, **context: Any) -> str:
    """A page rendered without a request (the gunicorn worker's 414): the static navigation of the 500 page."""
    return loader.get_template(template).render(context)
