from django.urls import path

from . import views

app_name = "accounts"
urlpatterns = [
    path("login/", views.login_view, name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("settings/", views.settings_view, name="settings"),
    path("settings/tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token_revoke"),
    path("settings/agents/", views.agents_view, name="agents"),
    path("audit/", views.audit_view, name="audit"),
]
