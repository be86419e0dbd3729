"""Bearer-token auth for the API: `Authorization: Bearer wm_…`, one required scope per operation.

`authenticate` is the one implementation: the ninja operations use it through `TokenAuth`, the plain per-step views
(config/step_api.py) call it directly, so scopes, 401/403/429 and their Error bodies are the same on both.
"""

from django.http import HttpRequest
from ninja.errors import AuthenticationError
from ninja.security import HttpBearer

from accounts.services import api_token_authenticate
from accounts.throttle import client_ip
from accounts.token_cache import VerifiedToken

from . import ratelimit
from .errors import ApiError

SCHEME = "bearer"
_DONE = "_waymark_authenticated"  # (scope, token) set on the request once it passed


def authenticate(request: HttpRequest, scope: str) -> VerifiedToken:
    """The request's token holding `scope`, set as `request.api_token` and its user as `request.user`.

    AuthenticationError (401) for a missing, malformed, unknown or revoked token; ApiError 403 when the token lacks
    `scope`; RateLimited (429) past a rate limit (config/ratelimit.py): the token's calls, or the failed
    authentications from the client's IP. A request authenticated once for a scope is not counted again (a per-step
    view that hands an unusual request over to the ninja operation)."""
    done = getattr(request, _DONE, None)
    if done is not None and done[0] == scope:
        return done[1]
    ip = client_ip(request)
    ratelimit.check_auth_failures(ip)  # refused before any token is looked at
    api_token = _bearer_token(request)
    if api_token is None:
        ratelimit.count_auth_failure(ip)
        raise AuthenticationError()
    ratelimit.check_token(api_token.pk)  # every call the token makes counts, refused (403) ones too
    if scope not in api_token.scopes:
        raise ApiError(403, "missing_scope", f"this token lacks the scope {scope}", {"scope": scope})
    request.api_token = api_token
    request.user = api_token.user
    setattr(request, _DONE, (scope, api_token))
    return api_token


def _bearer_token(request: HttpRequest) -> VerifiedToken | None:
    """The active token named by the Authorization header (parsed as ninja's HttpBearer does), or None."""
    value = request.META.get("HTTP_AUTHORIZATION")  # as request.headers["Authorization"], without building them all
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != SCHEME:
        return None
    return api_token_authenticate(token)


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
