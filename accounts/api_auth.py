"""Bearer-token auth for the API: `Authorization: Bearer wm_…`, one required scope per operation.

`authenticate` is the one implementation: the ninja operations use it through `TokenAuth`, the plain per-step views
(config/step_api.py) call it directly, so scopes, 401/403/429 and their Error bodies are the same on both.

A valid token is served whatever its address has done: the failed-authentication limit of an address
(common/ratelimit.py) refuses only attempts that fail, and only those that could be guessing a token (no token, a
malformed or unknown one, a wrong secret). A revoked or expired token, or the genuine token of a deactivated user,
is answered 401 saying so and is not counted: one such client retrying cannot get its neighbours refused.
"""

from typing import NoReturn

from django.http import HttpRequest
from ninja.errors import AuthenticationError
from ninja.security import HttpBearer

from common import ratelimit
from common.errors import ApiError

from .services import api_token_check
from .throttle import client_ip
from .token_cache import VerifiedToken
from .tokens import MALFORMED, Refusal

SCHEME = "bearer"
_DONE = "_waymark_authenticated"  # (scope, token) set on the request once it passed


def authenticate(request: HttpRequest, scope: str) -> VerifiedToken:
    """The request's token holding `scope`, set as `request.api_token` and its user as `request.user`.

    401 for a missing, malformed, unknown, revoked or expired token (TokenRefused says which when the token is one
    Waymark issued); ApiError 403 when the token lacks `scope`; RateLimited (429) past a rate limit
    (common/ratelimit.py): the token's calls, or — for a failing attempt only — the failed authentications from the
    client's address. A request authenticated once for a scope is not counted again (a per-step view that hands an
    unusual request over to the ninja operation)."""
    done = getattr(request, _DONE, None)
    if done is not None and done[0] == scope:
        return done[1]
    api_token = _bearer_token(request)
    if type(api_token) is Refusal:
        _refuse(request, api_token)
    ratelimit.check_token(api_token.pk)  # every call the token makes counts, refused (403) ones too
    if scope not in api_token.scopes:
        raise ApiError(403, "missing_scope", f"this token lacks the scope {scope}", {"scope": scope})
    request.api_token = api_token
    request.user = api_token.user
    setattr(request, _DONE, (scope, api_token))
    return api_token


def _bearer_token(request: HttpRequest) -> VerifiedToken | Refusal:
    """The active token named by the Authorization header (parsed as ninja's HttpBearer does), or why not."""
    value = request.META.get("HTTP_AUTHORIZATION")  # as request.headers["Authorization"], without building them all
    if not value:
        return MALFORMED
    scheme, _, token = value.partition(" ")
    if scheme.lower() != SCHEME:
        return MALFORMED
    return api_token_check(token)


def _refuse(request: HttpRequest, refusal: Refusal) -> NoReturn:
    """A guess counts against the client's address, and is refused 429 once the address has used up its failures
    (nothing more is counted then); any other refusal is answered 401 at once."""
    if not refusal.guess:
        raise TokenRefused(refusal)
    ip = client_ip(request)
    ratelimit.check_auth_failures(ip)
    ratelimit.count_auth_failure(ip)
    raise AuthenticationError()


class TokenRefused(ApiError):
    """401 for a token Waymark issued that cannot be used (revoked, expired, its user deactivated): the Error body
    (code `unauthorized`, as every 401) says why in `message` and `details.reason`, and WWW-Authenticate says
    `invalid_token` (RFC 6750)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(401, "unauthorized", refusal.message, refusal.details)
        self.headers = {"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{refusal.message}"'}


class TokenAuth(HttpBearer):
    """The ninja side of `authenticate` (the HttpBearer base documents the scheme in the OpenAPI schema)."""

    def __init__(self, scope: str) -> None:
        super().__init__()
        self.scope = scope

    def __call__(self, request: HttpRequest) -> VerifiedToken:
        return authenticate(request, self.scope)  # its errors reach config.api's handlers

    def authenticate(self, request: HttpRequest, token: str) -> VerifiedToken | None:  # pragma: no cover
        raise NotImplementedError("TokenAuth reads the header in __call__")


def scoped(scope: str) -> TokenAuth:
    return TokenAuth(scope)
