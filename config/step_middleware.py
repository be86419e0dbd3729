"""Browser-only middleware that the per-step API calls (config/step_api.py) skip.

The per-step calls authenticate with a bearer token on every request and never read a session, the session's user
or flash messages, and none of that can change their response. These subclasses of Django's own do their work for
every other request and none for a per-step call (whose `request.user` starts anonymous, until the token check sets
the token's user). What every response needs stays on for them too: the security headers (SecurityMiddleware, the
Content-Security-Policy, X-Frame-Options), the request id, the URL and NUL guards, and the busy-database answer.
CSRF stays as it is (the per-step views are csrf_exempt, and `check --deploy` looks for Django's class by name).
Django's checks accept subclasses wherever they require the session, auth and messages middleware.
"""

from __future__ import annotations

import re

from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse

from .step_api import API_PREFIX, STEP_CALLS

# "graphs/<ws>/active" → "graphs/[^/]+/active" (the routes hold only letters, slashes and str path converters)
_CONVERTER = re.compile(r"<\w+>")
_STEP_PATH = re.compile(f"^/{API_PREFIX}(?:{'|'.join(_CONVERTER.sub('[^/]+', call.route) for call in STEP_CALLS)})$")


def is_step_call(request: HttpRequest) -> bool:
    """Whether the request is a per-step call (matched once per request, then remembered on it)."""
    found = request.__dict__.get("_waymark_step_call")
    if found is None:
        found = request._waymark_step_call = _STEP_PATH.match(request.path_info) is not None
    return found


class BrowserSessionMiddleware(SessionMiddleware):
    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request) if is_step_call(request) else super().__call__(request)


class BrowserAuthenticationMiddleware(AuthenticationMiddleware):
    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_step_call(request):
            request.user = AnonymousUser()
            return self.get_response(request)
        return super().__call__(request)


class BrowserMessageMiddleware(MessageMiddleware):
    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request) if is_step_call(request) else super().__call__(request)
