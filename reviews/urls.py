from django.urls import path

from . import views

app_name = "reviews"
urlpatterns = [
    path("", views.queue_view, name="queue"),
]
