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

HtmxLoginMiddleware: an htmx request whose session has ended gets the login page as a whole page, never inside the
box it would have filled: login_required's redirect to LOGIN_URL (which the browser's XHR would follow and htmx would
swap in) becomes an `HX-Redirect` to the login page, `next` being the page the browser shows. Every htmx endpoint
is covered at once, wherever login is required (the views' login_required, the admin).

PageMethodMiddleware: a page's form posts to an address of its own (`/procedures/mine/`, `/reviews/3/judge/`); when
the form comes back with an error, that address is left in the bar, and reopening it (or a bookmark, or a reload
after the POST) is a GET that Django answers with an empty 405. Such a GET redirects to the page the form belongs to
(PAGE_OF names the few whose page is not the nearest address above them); any other method a page does not take gets
the styled 405 page. Under /api/ ninja's plain-text 405 (a method an operation's path does not take) becomes the
Error body, with its Allow header.

BodyLimitMiddleware: Django refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE by raising RequestDataTooBig wherever the
body is first read: inside a ninja operation (which would answer it as an unexpected error, 500) or in the CSRF check
of a page form (Django's 400, the debug page under DEBUG). This middleware answers before any of that, from the
declared Content-Length, without reading the body: 413 with the API's Error body under /api/, the styled 413 page
elsewhere (config/error_views.py). A body sent chunked (no Content-Length) reaches a WSGI application as an empty body
unless it is read from the server's input stream to its end, which the server allows when it sets
`wsgi.input_terminated` (gunicorn does): the middleware then reads at most the limit plus one byte; past the limit it
answers 413 without reading further, within it the body is handed on as if it had come with its Content-Length. A
server that does not terminate its input stream gets 411 Length Required. The limit and the readers that ingest and
OTLP use under their own, smaller limit are in common/bodies.py.
"""

from io import BytesIO
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect, JsonResponse
from django.middleware.common import CommonMiddleware
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, Resolver404, get_script_prefix, resolve, reverse

from common.bodies import READ_CHUNK, declared_length, is_chunked, upload_limit
from common.errors import ApiError

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


REDIRECTS = (301, 302, 303, 307, 308)


class HtmxLoginMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code not in REDIRECTS or request.META.get("HTTP_HX_REQUEST") != "true":
            return response
        login = resolve_url(settings.LOGIN_URL)
        if urlsplit(response.get("Location", "")).path != login:
            return response
        answer = HttpResponse(status=204)
        answer["HX-Redirect"] = f"{login}?{urlencode({'next': _shown_page(request)})}"
        return answer


def _shown_page(request: HttpRequest) -> str:
    """The page to come back to after logging in: the one the browser shows (htmx's HX-Current-URL, on this site),
    or this request's own address when it is that page with new filters (a GET of the same path, pushed to the bar);
    the dashboard when neither is known."""
    current = urlsplit(request.headers.get("HX-Current-URL", ""))
    if current.netloc and current.netloc != request.get_host():
        current = urlsplit("")
    if request.method == "GET" and current.path == request.path:
        return request.get_full_path()
    if current.path:
        return current.path + (f"?{current.query}" if current.query else "")
    return resolve_url(settings.LOGIN_REDIRECT_URL)


# POST-only addresses whose page is not the nearest address above them: URL name -> the page's URL name (it takes the
# same arguments). The rubric forms of the run page post under /reviews/rubrics/runs/<id>/, whose own address is the
# panel's htmx fragment, not a page.
PAGE_OF = {
    "rubrics:assess": "trajectories:detail",
    "rubrics:judge": "trajectories:detail",
}
NOT_PAGES = {"rubrics:run_panel"}


def page_of(path_info: str) -> str:
    """The address of the page a POST-only address belongs to: PAGE_OF, else the nearest address above it that is
    a page (`/reviews/3/judge/` → `/reviews/3/`, `/intents/taxonomy/review/5/judge/` → `/intents/taxonomy/review/`),
    else the dashboard."""
    try:
        match = resolve(path_info)
    except Resolver404:
        return ""
    if match.view_name in PAGE_OF:
        try:
            return reverse(PAGE_OF[match.view_name], args=list(match.kwargs.values()))
        except NoReverseMatch:
            pass
    parts = path_info.rstrip("/").split("/")
    while len(parts) > 1:
        parts.pop()
        candidate = "/".join(parts) + "/"
        try:
            above = resolve(candidate)
        except Resolver404:
            continue
        if above.view_name not in NOT_PAGES:
            return get_script_prefix().rstrip("/") + candidate
    return reverse("dashboard")


class PageMethodMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or response.streaming:
            return response
        allowed = response.get("Allow", "")
        if error_views.is_api(request):  # ninja's own 405 is a line of text: the Error body instead
            json = response.get("Content-Type", "").startswith("application/json")
            return response if json else error_views.method_not_allowed(request, allowed=allowed)
        if response.content:
            return response  # a 405 page a view wrote itself is kept
        page = page_of(request.path_info)
        if request.method in ("GET", "HEAD") and page and page != request.path:
            moved = HttpResponseRedirect(page)
            if allowed:
                moved["Allow"] = allowed  # what the address itself takes (RFC 9110 §10.2.1 allows it on any answer)
            return moved
        return error_views.method_not_allowed(request, allowed=allowed, page=page)


# --- BodyLimitMiddleware ----------------------------------------------------------------------------------------------


def _read_chunked(request: HttpRequest, limit: int) -> bytes | None:
    """The whole chunked body from the server's (terminated) input stream, or None past `limit` bytes."""
    stream = request.META["wsgi.input"]
    chunks, size = [], 0
    while chunk := stream.read(min(READ_CHUNK, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
    return b"".join(chunks)


def _refusal(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    """400 / 411: the API's Error body under /api/, a plain text elsewhere (no browser sends such a request)."""
    if error_views.is_api(request):
        return error_views.api_error(status, code, message)
    return error_views.plain_error(request, status, message)


def oversized_response(request: HttpRequest, limit: int) -> HttpResponse:
    """413: the API's Error body under /api/, the styled page elsewhere."""
    return error_views.payload_too_large(request, limit=limit)


class BodyLimitMiddleware:
    """413 for a body over DATA_UPLOAD_MAX_MEMORY_SIZE before any view or the CSRF check reads it (see above)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = upload_limit()
        try:
            declared = declared_length(request)
        except ApiError as exc:
            return _refusal(request, 400, exc.code, exc.message)
        if declared is None and is_chunked(request):
            refused = self._take_chunked(request, limit)
            if refused is not None:
                return refused
        elif limit is not None and declared is not None and declared > limit:
            return oversized_response(request, limit)
        return self.get_response(request)

    @staticmethod
    def _take_chunked(request: HttpRequest, limit: int | None) -> HttpResponse | None:
        if not request.META.get("wsgi.input_terminated"):
            message = "send the body with a Content-Length (this server cannot read a chunked body to its end)"
            return _refusal(request, 411, "length_required", message)
        body = _read_chunked(request, limit if limit is not None else 2**62)
        if body is None:
            return oversized_response(request, limit)
        # As if the body had come with its length: Django's request reads `_stream` (WSGIRequest set it to read 0
        # bytes of the input for want of a Content-Length).
        request.META["CONTENT_LENGTH"] = str(len(body))
        request._stream = LimitedStream(BytesIO(body), len(body))
        return None
