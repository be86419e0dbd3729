from django.urls import path

from . import views

app_name = "uplift"
urlpatterns = [
    path("", views.policies_view, name="policies"),
    path("certificates/<int:pk>/", views.certificate_view, name="certificate"),
    path("critical/", views.critical_view, name="critical"),
    path("recertify/", views.recertify_view, name="recertify"),
]
