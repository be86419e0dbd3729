"""Rubric pages, mounted under /reviews/rubrics/ (config/urls.py): the addresses they had while rubrics lived in
reviews."""

from django.urls import path

from . import views

app_name = "rubrics"
urlpatterns = [
    path("", views.list_view, name="list"),
    path("<int:pk>/", views.detail_view, name="detail"),
    path("<int:pk>/agreement/", views.agreement_view, name="agreement"),
    path("runs/<int:run_id>/", views.panel_view, name="run_panel"),
    path("runs/<int:run_id>/assess/", views.assess_view, name="assess"),
    path("runs/<int:run_id>/judge/", views.judge_view, name="judge"),
]
