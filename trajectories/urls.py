from django.urls import path

from . import views

app_name = "trajectories"
urlpatterns = [
    path("", views.list_view, name="list"),
    path("totals", views.totals_view, name="totals"),
    path("columns", views.columns_view, name="columns"),
    path("export.jsonl", views.export_view, name="export"),
    path("compare", views.compare_view, name="compare"),
    path("<int:pk>/", views.detail_view, name="detail"),
]
