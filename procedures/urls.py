from django.urls import path

from . import views

app_name = "procedures"
urlpatterns = [
    path("", views.list_view, name="list"),
    path("mine/", views.mine_view, name="mine"),
    path("versions/<int:pk>/", views.version_view, name="version"),
    path("versions/<int:pk>/amend/", views.amend_view, name="amend"),
    path("versions/<int:pk>/rubric-floor/", views.rubric_floor_view, name="rubric_floor"),
    path("versions/<int:pk>/rerun/", views.rerun_view, name="rerun"),
    path("runs/<int:run_id>/", views.run_vs_view, name="run_vs"),
]
