from django.urls import path

from . import views
from .evolution import views as evolution_views

app_name = "graphs"
urlpatterns = [
    path("", views.list_view, name="list"),
    path("<slug:slug>/", views.workspace_view, name="workspace"),
    path("<slug:slug>/diff/", views.diff_view, name="diff"),
    path("<slug:slug>/certify/", views.certify_view, name="certify"),
    path("<slug:slug>/guidance/", views.guidance_view, name="guidance"),
    path("<slug:slug>/evolutions/", evolution_views.list_view, name="evolutions"),
    path("<slug:slug>/evolutions/<int:run_id>/", evolution_views.run_view, name="evolution"),
    path("<slug:slug>/evolutions/<int:run_id>/cancel/", evolution_views.cancel_view, name="evolution_cancel"),
    path(
        "<slug:slug>/evolutions/<int:run_id>/rounds/<int:iteration>/",
        evolution_views.round_view,
        name="evolution_round",
    ),
    path("<slug:slug>/rejections/", evolution_views.rejections_view, name="rejections"),
]
