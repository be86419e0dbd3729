"""Browser-only middleware that the per-step API calls (config/step_api.py) skip.

The per-step calls authenticate with a bearer token on every request and never read a session, the session's user
or flash messages, never ask for a static file, never render a template (so never use a CSP nonce) and are never
made by htmx; none of that can change their response. These subclasses of Django's, WhiteNoise's and django-htmx's
middleware do their work for every other request and none for a per-step call (whose `request.user` starts
anonymous, until the token check sets the token's user). The Content-Security-Policy stays on every per-step
response, error answers included: built once per process (`security_policy_headers`) instead of once per response.
What every response needs stays on as it is: SecurityMiddleware's headers, X-Frame-Options, the request id, the URL
and NUL guards, and the busy-database answer. CSRF stays as it is (the per-step views are csrf_exempt, and
`check --deploy` looks for Django's class by name). Django's checks accept subclasses wherever they require the
session, auth and messages middleware.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.middleware.csp import ContentSecurityPolicyMiddleware
from django.utils.csp import CSP, build_policy
from django_htmx.middleware import HtmxMiddleware
from whitenoise.middleware import WhiteNoiseMiddleware

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


class SkippedOnStepCalls:
    """Mixed in before a middleware class: a per-step call goes straight on to the next layer."""

    get_response: Callable[[HttpRequest], HttpResponse]

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request) if is_step_call(request) else super().__call__(request)


class BrowserSessionMiddleware(SkippedOnStepCalls, SessionMiddleware):
    pass


class BrowserAuthenticationMiddleware(AuthenticationMiddleware):
    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_step_call(request):
            request.user = AnonymousUser()
            return self.get_response(request)
        return super().__call__(request)


class BrowserMessageMiddleware(SkippedOnStepCalls, MessageMiddleware):
    pass


class BrowserStaticFilesMiddleware(SkippedOnStepCalls, WhiteNoiseMiddleware):
    pass


class BrowserHtmxMiddleware(SkippedOnStepCalls, HtmxMiddleware):
    pass


# The headers a per-step 304 leaves out: the browser security headers of the 200 it stands for. RFC 9110 §15.4.5 asks
# a 304 for ETag, Vary, Cache-Control and Date (Content-Location and Expires, which these calls don't send), and a
# cache keeps the header fields of its stored 200 that a 304 does not carry (RFC 9111 §4.3.4): so they still apply.
LEFT_OUT_OF_304 = (
    "Content-Security-Policy",
    "Content-Security-Policy-Report-Only",
    "Cross-Origin-Opener-Policy",
    "Referrer-Policy",
    "X-Content-Type-Options",
    "X-Frame-Options",
)


class LeanNotModifiedMiddleware:
    """Outermost: a per-step call's 304 (the answer to most of an agent's calls) is sent without the security
    headers the middleware below added (`LEFT_OUT_OF_304`): fewer bytes for the agent and the server to handle."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 304 and is_step_call(request):
            headers = response.headers
            for header in LEFT_OUT_OF_304:
                headers.pop(header, None)
        return response


class PreparedPolicyMiddleware(ContentSecurityPolicyMiddleware):
    """Django's Content-Security-Policy middleware; a per-step response gets the policy built once per process."""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_step_call(request):
            return super().__call__(request)
        response = self.get_response(request)
        for header, value in security_policy_headers():
            if header not in response:  # as Django's: a policy the view set is kept
                response.headers[header] = value
        return response


@functools.cache
def security_policy_headers() -> tuple[tuple[str, str], ...]:
    """The Content-Security-Policy headers Django's middleware would add to a response that used no nonce (a
    nonce named by the policy is left out, as the middleware leaves out an unused one), built once per process:
    Django's middleware builds them for every response. Built again after a test changes the policy."""
    return tuple(
        (str(header), build_policy(config))
        for header, config in (
            (CSP.HEADER_ENFORCE, settings.SECURE_CSP),
            (CSP.HEADER_REPORT_ONLY, settings.SECURE_CSP_REPORT_ONLY),
        )
        if config
    )


@receiver(setting_changed)
def _policy_changed(*, setting: str, **kwargs: object) -> None:
    if setting.startswith("SECURE_CSP"):
        security_policy_headers.cache_clear()
