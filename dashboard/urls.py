from django.urls import path

from . import views

# No app_name: the page is `dashboard` everywhere (LOGIN_REDIRECT_URL, the navigation, the error pages' links).
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
]
