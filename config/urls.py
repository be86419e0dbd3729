from django.contrib import admin
from django.urls import include, path

from . import views
from .api import api

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("accounts.urls")),
    path("trajectories/", include("trajectories.urls")),
    path("models/", include("llm.urls")),
    path("graphs/", include("graphs.urls")),
    path("procedures/", include("procedures.urls")),
    path("intents/", include("intents.urls")),
    path("reviews/", include("reviews.urls")),
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
]
