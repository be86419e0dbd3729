from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from . import error_views, views
from .api import api
from .step_api import API_PREFIX, step_urlpatterns

# Styled error pages with the navigation (the API's Error body under /api/): config/error_views.py.
handler400 = error_views.bad_request
handler403 = error_views.permission_denied
handler404 = error_views.page_not_found
handler500 = error_views.server_error


@csrf_exempt
def api_not_found(request: HttpRequest) -> JsonResponse:
    """Any method on a path under /api/v1/ that no operation matches: the API's Error body, never the HTML 404."""
    body = {"code": "not_found", "message": f"no API operation at {request.path}", "details": None}
    return JsonResponse(body, status=404)


ninja_urls = api.urls
urlpatterns = [
    *step_urlpatterns(API_PREFIX, ninja_urls[0]),  # the per-step calls (first: matched on every agent step)
    path("", include("dashboard.urls")),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("accounts.urls")),
    path("trajectories/", include("trajectories.urls")),
    path("models/", include("llm.urls")),
    path("graphs/", include("graphs.urls")),
    path("procedures/", include("procedures.urls")),
    path("intents/", include("intents.urls")),
    path("reviews/rubrics/", include("rubrics.urls")),  # before reviews/: its addresses from when rubrics lived there
    path("reviews/", include("reviews.urls")),
    path("certification/", include("uplift.urls")),
    path("api/v1/", api_not_found),  # ninja's root view raises a bare Http404 (HTML): answer it here
    path("api/v1/", ninja_urls),
    re_path(r"^api/v1(?:/|$)", api_not_found),  # after the API's own paths: only what they leave unmatched
    path("admin/", admin.site.urls),
]
