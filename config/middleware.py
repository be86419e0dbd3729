"""A guard in front of every view: NUL characters in the path or query string are refused before any view sees them.

PostgreSQL text cannot hold NUL, so a filter value carrying one would fail deep inside a query. Forms already
refuse NUL (Django's ProhibitNullCharactersValidator); query strings are read by hand in many views.
"""

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

NUL = "\x00"


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
    for key, values in request.GET.lists():
        if NUL in key or any(NUL in value for value in values):
            return ["query", key.replace(NUL, "\\0")]
    return None
