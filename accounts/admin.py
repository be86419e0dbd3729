"""Users with their roles in the Django admin (admins only: config.admin_site). Read-only: roles change through
accounts.services.user_roles_set (audited), tokens and agents on their own pages."""

from django.contrib import admin
from django.db.models import QuerySet

from .models import User
from .roles import Role


@admin.register(User)
class UserAdmin(admin.ModelAdmin):
    list_display = ("username", "roles", "is_agent", "is_active", "is_superuser", "last_login", "date_joined")
    list_filter = ("groups", "is_agent", "is_active", "is_superuser")
    search_fields = ("username", "email", "first_name", "last_name")
    ordering = ("username",)
    fields = (
        "username",
        "first_name",
        "last_name",
        "email",
        "roles",
        "is_agent",
        "is_active",
        "is_superuser",
        "last_login",
        "date_joined",
    )
    readonly_fields = fields

    def get_queryset(self, request) -> QuerySet[User]:
        return super().get_queryset(request).prefetch_related("groups")

    @admin.display(description="roles")
    def roles(self, user: User) -> str:
        """The user's roles (a superuser holds them all); "—" for none (read-only) and for agent identities."""
        if user.is_agent:
            return "— (agent)"
        if user.is_superuser:
            return "admin (superuser)"
        names = sorted({group.name for group in user.groups.all()} & {role.value for role in Role})
        return ", ".join(names) or "—"

    def has_module_permission(self, request) -> bool:
        return bool(request.user.is_active and request.user.is_admin)

    def has_view_permission(self, request, obj=None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
