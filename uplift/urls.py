from django.urls import path

from . import views

app_name = "uplift"
urlpatterns = [
    path("", views.policies_view, name="policies"),
    path("certificates/<int:pk>/", views.certificate_view, name="certificate"),
    path("critical/", views.critical_view, name="critical"),
    path("recertify/", views.recertify_view, name="recertify"),
    path("watches/", views.watches_view, name="watches"),
    path("watches/<int:pk>/", views.watch_view, name="watch"),
    path("watches/<int:pk>/set/", views.watch_set_view, name="watch_set"),
    path("watches/<int:pk>/stop/", views.watch_stop_view, name="watch_stop"),
]
