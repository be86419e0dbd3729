"""The Django admin for Waymark admins only: people with the admin role (group or superuser), not every is_staff
account. Installed in place of django.contrib.admin (INSTALLED_APPS: WaymarkAdminConfig), so every app's
`admin.register` lands on this site. Everything shown there is read-only: writes go through the services."""

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.urls import reverse


class WaymarkAdminSite(AdminSite):
    site_header = "Waymark admin"
    site_title = "Waymark admin"
    index_title = "Read-only views of the stored records"

    def has_permission(self, request) -> bool:
        user = request.user
        return bool(user.is_active and getattr(user, "is_admin", False))

    def login(self, request, extra_context=None):
        """The one login page, with its throttling (accounts.throttle): the admin's own form would bypass it."""
        from django.contrib.auth.views import redirect_to_login  # (not importable while the apps load)

        return redirect_to_login(request.GET.get("next") or reverse("admin:index"), reverse("accounts:login"))


class WaymarkAdminConfig(AdminConfig):
    default_site = "config.admin_site.WaymarkAdminSite"
