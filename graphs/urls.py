from django.urls import path

from . import views

app_name = "graphs"
urlpatterns = [
    path("", views.list_view, name="list"),
    path("<slug:slug>/", views.workspace_view, name="workspace"),
    path("<slug:slug>/diff/", views.diff_view, name="diff"),
    path("<slug:slug>/guidance/", views.guidance_view, name="guidance"),
]
