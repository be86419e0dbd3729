from django.contrib import admin

from .models import Revision, Workspace


class ReadOnlyAdmin(admin.ModelAdmin):
    """Read-only: workspaces and revisions are written by graphs.services only (audited, append-only chains)."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Workspace)
class WorkspaceAdmin(ReadOnlyAdmin):
    list_display = ("slug", "title", "active_revision", "updated_at")
    search_fields = ("slug", "title")
    list_select_related = ("active_revision",)


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("workspace", "kind", "seq", "short_digest", "origin", "created_at")
    list_filter = ("kind",)
    search_fields = ("workspace__slug", "digest")
    list_select_related = ("workspace",)
