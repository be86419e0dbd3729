"""Guards in front of every view.

RejectNulMiddleware: NUL characters in the path or query string are refused before any view sees them. PostgreSQL
text cannot hold NUL, so a filter value carrying one would fail deep inside a query. Forms already refuse NUL
(Django's ProhibitNullCharactersValidator); query strings are read by hand in many views.

NotModifiedAwareCommonMiddleware: Django's CommonMiddleware, except that a 304 gets no Content-Length: Django would add
"Content-Length: 0", which RFC 9110 §8.6 forbids (a 304 may only repeat the length of the 200 it stands for), and
which every per-step 304 of an agent paid for.

LongUrlMiddleware: a URL longer than WAYMARK_MAX_URL_LENGTH characters answers the styled 414 page (the API's Error
body under /api/), below gunicorn's own request-line limit (8190 bytes, the Procfile's --limit-request-line), so
people see a page with the navigation that says why. Above that limit gunicorn refuses the request line itself and
the Procfile's worker class (config.gunicorn_worker) answers with the same page.
"""

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.middleware.common import CommonMiddleware

from . import error_views

NUL = "\x00"
# Below gunicorn's largest request-line limit (8190 bytes, which also holds the method and "HTTP/1.1").
DEFAULT_MAX_URL_LENGTH = 8000


def max_url_length() -> int:
    return int(getattr(settings, "WAYMARK_MAX_URL_LENGTH", DEFAULT_MAX_URL_LENGTH))


class NotModifiedAwareCommonMiddleware(CommonMiddleware):
    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.status_code == 304:  # no body, no length (and the slash redirect is for 404s only)
            return response
        return super().process_response(request, response)


class LongUrlMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = max_url_length()
        length = len(request.path_info) + len(request.META.get("QUERY_STRING", ""))
        if length > limit:
            return error_views.uri_too_long(request, length=length, limit=limit)
        return self.get_response(request)


class RejectNulMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = _nul_location(request)
        if where is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            error = {"loc": where, "msg": "must not contain NUL characters", "type": "string_nul"}
            return JsonResponse(
                {"code": "invalid", "message": "the request holds a NUL character", "details": {"errors": [error]}},
                status=422,
            )
        return HttpResponseBadRequest("The request holds a NUL character.", content_type="text/plain")


def _nul_location(request: HttpRequest) -> list[str] | None:
    if NUL in request.path:
        return ["path"]
    query = request.META.get("QUERY_STRING", "")
    if NUL not in query and "%00" not in query:  # a NUL reaches a decoded value only as itself or as %00
        return None
    for key, values in request.GET.lists():
        if NUL in key or any(NUL in value for value in values):
            return ["query", key.replace(NUL, "\\0")]
    return None
