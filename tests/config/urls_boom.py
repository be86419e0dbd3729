"""The project's URLs plus one view that fails, for the 500 page test (its error handlers come along)."""

from django.urls import path

from config.urls import *  # noqa: F403
from config.urls import urlpatterns as project_urlpatterns


def boom(request):
    raise RuntimeError("boom")


urlpatterns = [*project_urlpatterns, path("boom/", boom)]
