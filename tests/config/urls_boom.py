"""The project's URLs plus views that fail, for the error page tests (its error handlers come along), and a
middleware that fails before any view."""

from django.core.exceptions import BadRequest, SuspiciousOperation
from django.urls import path

from config.urls import *  # noqa: F403
from config.urls import urlpatterns as project_urlpatterns

SECRET_LOOKING = "WAYMARK_SECRET_KEY=s3cr3t in /srv/waymark/config/settings/base.py"


def boom(request):
    local_secret = SECRET_LOOKING  # noqa: F841 - a debug page would show this local variable
    raise RuntimeError("boom " + SECRET_LOOKING)


def bad(request):
    raise BadRequest("the run number must be a whole number")


def suspicious(request):
    raise SuspiciousOperation("Invalid header: you may need to add it to ALLOWED_HOSTS " + SECRET_LOOKING)


class BoomMiddleware:
    """Fails for any path ending in /boom-in-middleware, outside every view (and outside the API's handlers)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.endswith("/boom-in-middleware"):
            raise RuntimeError("boom " + SECRET_LOOKING)
        return self.get_response(request)


urlpatterns = [path("boom/", boom), path("bad/", bad), path("suspicious/", suspicious), *project_urlpatterns]
