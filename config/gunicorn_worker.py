"""The Procfile's gunicorn worker: gunicorn's threaded worker, with Waymark's styled 414 page instead of gunicorn's
bare "URI Too Long" when a request line passes gunicorn's own limit (--limit-request-line, at most 8190 bytes).

Such a request never reaches Django (the line was not read whole), so the page is rendered without a request, like
the 500 page (config.error_views.static_page): the static navigation, no user. Every other error is gunicorn's.
URLs under the limit reach Django, where config.middleware.LongUrlMiddleware answers the same page with the user's
navigation above WAYMARK_MAX_URL_LENGTH.
"""

from __future__ import annotations

from gunicorn import util
from gunicorn.http.errors import LimitRequestLine
from gunicorn.workers.gthread import ThreadWorker

FALLBACK = "<!doctype html><title>URI too long · Waymark</title><h1>The URL is too long</h1>"


def styled_414(limit: int) -> bytes:
    """The whole HTTP response: the 414 page rendered from templates/414.html (a plain page if that fails)."""
    try:
        from config.error_views import static_page

        body = static_page("414.html", limit=limit, length=None, path="")
    except Exception:  # Django not set up, a template error: still answer, plainly
        body = FALLBACK
    payload = body.encode("utf-8")
    head = (
        "HTTP/1.1 414 URI Too Long\r\n"
        "Connection: close\r\n"
        "Content-Type: text/html; charset=utf-8\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode("latin-1") + payload


class WaymarkThreadWorker(ThreadWorker):
    def handle_error(self, req, client, addr, exc):
        if not isinstance(exc, LimitRequestLine):
            return super().handle_error(req, client, addr, exc)
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        try:
            util.write_nonblock(client, styled_414(self.cfg.limit_request_line))
        except Exception:
            self.log.debug("Failed to send the 414 page.")
