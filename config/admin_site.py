"""The Django admin for Waymark admins only: people with the admin role (group or superuser), not every is_staff
account. Installed in place of django.contrib.admin (INSTALLED_APPS: WaymarkAdminConfig), so every app's
`admin.register` lands on this site. Everything shown there is read-only: writes go through the services."""

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig


class WaymarkAdminSite(AdminSite):
    site_header = "Waymark admin"
    site_title = "Waymark admin"
    index_title = "Read-only views of the stored records"

    def has_permission(self, request) -> bool:
        user = request.user
        return bool(user.is_active and getattr(user, "is_admin", False))


class WaymarkAdminConfig(AdminConfig):
    default_site = "config.admin_site.WaymarkAdminSite"
