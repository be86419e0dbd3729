"""The per-step API calls as plain Django views in front of the ninja API (issue 13).

Agents call these on every step: GET /api/v1/graphs/{ws}/active, POST /api/v1/graphs/{ws}/guidance and
GET /api/v1/procedures. Each is served here without django-ninja's operation machinery (signature binding, response
validation, rendering): the same token check (accounts.api_auth.authenticate: scopes, 401/403/429), the same handler
code (the `*_response` functions of graphs.api and procedures.api, which answer from prepared bytes), and every error
answered by the ninja API's own exception handlers (config.api), so the Error body and headers are the same.

The ninja operations stay where they were: they document these calls in /api/v1/openapi.json, and they answer
anything unusual — another method, or a guidance body that is not valid JSON or does not match its schema — so those
answers (405, 400, 422 and their details) come from one implementation. A request handed over is not counted twice
by the rate limit (accounts.api_auth.authenticate remembers it passed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.views.decorators.csrf import csrf_exempt

from accounts.api_auth import authenticate
from graphs import api as graphs_api
from procedures import api as procedures_api

from .api import api

API_PREFIX = "api/v1/"  # where config.urls mounts the API
# handler(request, **path kwargs) -> a response, or None to hand the request over to the ninja operation
Handler = Callable[..., HttpResponse | None]


@dataclass(frozen=True)
class StepCall:
    route: str  # as ninja names it under /api/v1/
    method: str
    scope: str
    handler: Handler


STEP_CALLS = (
    StepCall("graphs/<ws>/active", "GET", graphs_api.READ_SCOPE, graphs_api.active_graph_response),
    StepCall("graphs/<ws>/guidance", "POST", graphs_api.GUIDE_SCOPE, graphs_api.step_guidance_response),
    StepCall("procedures", "GET", procedures_api.READ_SCOPE, procedures_api.active_list_response),
)


def step_view(call: StepCall, ninja_view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @csrf_exempt
    def view(request: HttpRequest, **kwargs: str) -> HttpResponse:
        if request.method != call.method:
            return ninja_view(request, **kwargs)
        try:
            request.auth = authenticate(request, call.scope)
            response = call.handler(request, **kwargs)
        except Exception as exc:  # the API's handlers answer (and log what they do not expect)
            return api.on_exception(request, exc)
        return ninja_view(request, **kwargs) if response is None else response

    view.__name__ = view.__qualname__ = f"step_{ninja_view.__name__}"
    return view


def step_urlpatterns(prefix: str, ninja_patterns: list) -> list[URLPattern]:
    """The plain views at `prefix` + route, each in front of the ninja operation at that route (in `ninja_patterns`,
    the API's own patterns, to be mounted at `prefix` after these)."""
    by_route = {str(p.pattern): p.callback for p in ninja_patterns if isinstance(p, URLPattern)}
    missing = [call.route for call in STEP_CALLS if call.route not in by_route]
    if missing:
        raise LookupError(f"no ninja operation at {missing}: the per-step views would shadow nothing")
    return [path(prefix + call.route, step_view(call, by_route[call.route])) for call in STEP_CALLS]
