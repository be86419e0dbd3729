"""Bearer-token auth for the API: `Authorization: Bearer wm_…`, one required scope per operation."""

from django.http import HttpRequest
from ninja.security import HttpBearer

from accounts.models import ApiToken
from accounts.services import api_token_authenticate

from .errors import ApiError


class TokenAuth(HttpBearer):
    """401 for a missing, malformed, unknown or revoked token; 403 when the token lacks `scope`."""

    def __init__(self, scope: str) -> None:
        super().__init__()
        self.scope = scope

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        api_token = api_token_authenticate(token)
        if api_token is None:
            return None
        if self.scope not in api_token.scopes:
            raise ApiError(403, "missing_scope", f"this token lacks the scope {self.scope}", {"scope": self.scope})
        request.api_token = api_token
        request.user = api_token.user
        return api_token


def scoped(scope: str) -> TokenAuth:
    return TokenAuth(scope)
