from django.urls import path

from . import views

app_name = "llm"
urlpatterns = [
    path("", views.calls_view, name="calls"),
]
