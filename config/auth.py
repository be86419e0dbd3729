"""Bearer-token auth for the API: `Authorization: Bearer wm_…`, one required scope per operation."""

from django.http import HttpRequest
from ninja.security import HttpBearer

from accounts.models import ApiToken
from accounts.services import api_token_authenticate
from accounts.throttle import client_ip

from . import ratelimit
from .errors import ApiError


class TokenAuth(HttpBearer):
    """401 for a missing, malformed, unknown or revoked token; 403 when the token lacks `scope`; 429 past a rate
    limit (config/ratelimit.py): the token's calls, or the failed authentications from the client's IP."""

    def __init__(self, scope: str) -> None:
        super().__init__()
        self.scope = scope

    def __call__(self, request: HttpRequest) -> ApiToken | None:
        ip = client_ip(request)
        ratelimit.check_auth_failures(ip)  # refused before any token is looked at
        api_token = super().__call__(request)  # a missing or non-bearer header never reaches authenticate()
        if api_token is None:
            ratelimit.count_auth_failure(ip)
        return api_token

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        api_token = api_token_authenticate(token)
        if api_token is None:
            return None
        ratelimit.check_token(api_token.pk)  # every call the token makes counts, refused (403) ones too
        if self.scope not in api_token.scopes:
            raise ApiError(403, "missing_scope", f"this token lacks the scope {self.scope}", {"scope": self.scope})
        request.api_token = api_token
        request.user = api_token.user
        return api_token


def scoped(scope: str) -> TokenAuth:
    return TokenAuth(scope)
